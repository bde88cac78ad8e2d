//! Standard output and standard error as a Unix tool treats them: a reader that has gone
//! away (`decode-lab capacity | head -1`) ends the program quietly, any other write error
//! (`> /dev/full`) is one `error:` line and exit code 1, and nothing panics in `println!`.

use std::io::{self, ErrorKind, Write};

use crate::error::CliError;

/// Whether a write error means the reader has gone, which is no error for a filter.
pub fn reader_gone(e: &io::Error) -> bool {
    e.kind() == ErrorKind::BrokenPipe
}

/// `text` and a newline on standard output, flushed, so that a full disk is reported here
/// and not lost when the buffer is dropped at exit.
pub fn print_line(text: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(CliError::Stdout)
}

/// The most characters one message prints, whatever it quotes.
const MAX_MESSAGE_CHARS: usize = 2_000;

/// A message as it is printed: every word longer than a [`policy::Excerpt`] cut to one
/// (a value clap or the file system quotes whole, `--temperature zzz…`), and the whole at
/// most [`MAX_MESSAGE_CHARS`]; messages that quote input through `Excerpt` already pass
/// unchanged. Every error the command line prints goes through it.
pub fn bounded(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS + 64));
    let mut rest = message;
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        out += &policy::Excerpt(word).to_string();
        let spaces = after.len() - after.trim_start().len();
        out += &after[..spaces];
        rest = &after[spaces..];
    }
    match out.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => out,
        Some((cut, _)) => format!(
            "{}… ({} characters in all)",
            &out[..cut],
            out.chars().count()
        ),
    }
}

/// A line on standard error. Standard error carries notes beside the output; when it
/// cannot be written there is nowhere left to say so, and the run goes on.
pub fn note(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_quotes_at_most_an_excerpt_of_each_word() {
        let long = "z".repeat(100_000);
        let message = format!("error: invalid value '{long}' for '--temperature <T>'\n\nUsage: x");
        let shown = bounded(&message);
        assert!(shown.len() < 400, "{shown}");
        assert!(shown.contains("… (100002 characters in all)"), "{shown}");
        assert!(
            shown.ends_with("for '--temperature <T>'\n\nUsage: x"),
            "{shown}"
        );
        assert_eq!(
            bounded("error: --top-k 0: expected 1 or more"),
            "error: --top-k 0: expected 1 or more"
        );
        let many = "word ".repeat(10_000);
        assert!(bounded(&many).contains("(50000 characters in all)"));
    }
}
