//! Text in messages, bounded: an error that quotes what the user gave quotes at most
//! [`EXCERPT_CHARS`] characters of it, so a 50 MB line or a 100,000-character flag makes a
//! message of one line, not a copy of the input.

use std::fmt;

/// The most characters of an input a message quotes.
pub const EXCERPT_CHARS: usize = 200;

/// Displays text as a message quotes it: whole when it is at most [`EXCERPT_CHARS`]
/// characters, else its first [`EXCERPT_CHARS`], then `…` and its full length. `{:?}`
/// quotes it as a Rust string, escapes and all, the same way.
///
/// ```
/// use policy::Excerpt;
///
/// assert_eq!(Excerpt("slice=eu").to_string(), "slice=eu");
/// assert_eq!(format!("{:?}", Excerpt("a\"b")), r#""a\"b""#);
/// let long = "k".repeat(100_000);
/// assert_eq!(
///     Excerpt(&long).to_string(),
///     format!("{}… (100000 characters in all)", "k".repeat(200))
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Excerpt<'a>(pub &'a str);

impl<'a> Excerpt<'a> {
    /// The text quoted whole, or its first [`EXCERPT_CHARS`] characters and how many it has
    /// in all.
    pub(crate) fn parts(&self) -> (&'a str, Option<usize>) {
        match self.0.char_indices().nth(EXCERPT_CHARS) {
            None => (self.0, None),
            Some((end, _)) => (&self.0[..end], Some(self.0.chars().count())),
        }
    }
}

impl fmt::Display for Excerpt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (text, None) => f.write_str(text),
            (text, Some(all)) => write!(f, "{text}… ({all} characters in all)"),
        }
    }
}

impl fmt::Debug for Excerpt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (text, None) => write!(f, "{text:?}"),
            (text, Some(all)) => write!(f, "{text:?}… ({all} characters in all)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_at_a_character_not_a_byte() {
        let text = "é".repeat(300);
        let shown = Excerpt(&text).to_string();
        assert_eq!(
            shown,
            format!("{}… (300 characters in all)", "é".repeat(200))
        );
        let exact = "x".repeat(EXCERPT_CHARS);
        assert_eq!(Excerpt(&exact).to_string(), exact);
        assert_eq!(
            format!("{:?}", Excerpt(&text)),
            format!("{:?}… (300 characters in all)", "é".repeat(200))
        );
    }
}
