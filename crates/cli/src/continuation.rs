//! The held-out continuation task that `decode-lab traffic` labels outcomes with and
//! `decode-lab eval --alternatives` compares systems on, kept in one place so both ask the
//! same question.
//!
//! A prompt is the opening of a held-out page, cut at the last space at or before
//! `prompt_bytes`; the page's true continuation is the reference. The outcome rule:
//! **accepted when the chrF of an output against as many bytes of the true continuation as
//! the output has is at least the threshold** ([`THRESHOLD`] by default; `observe::chrf`),
//! so that length alone is not the verdict.

use observe::chrf::chrf;

/// The default line of the outcome rule. The tiny model's continuations score about 17 on
/// average, so 20 accepts roughly the better fifth.
pub const THRESHOLD: f64 = 20.0;

/// A held-out page's opening and its true continuation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passage {
    pub prompt: String,
    pub continuation: String,
}

/// The passages of a slice's held-out pages (separated by a blank line): the opening cut at
/// the last space at or before `prompt_bytes` (at least a quarter of it), and the rest of
/// the page (at least half of `prompt_bytes`). Shorter pages give no passage.
pub fn passages(text: &str, prompt_bytes: usize) -> Vec<Passage> {
    text.split("\n\n")
        .filter_map(|page| {
            let space = head(page, prompt_bytes).rfind(' ')?;
            let (prompt, rest) = page.split_at(space + 1);
            (prompt.len() >= prompt_bytes / 4 && rest.len() >= prompt_bytes / 2).then(|| Passage {
                prompt: prompt.to_string(),
                continuation: rest.to_string(),
            })
        })
        .collect()
}

/// The first `bytes` bytes of `text`, cut back to a character boundary.
pub fn head(text: &str, bytes: usize) -> &str {
    let mut cut = bytes.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// How one output fared against its passage's true continuation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub chrf: f64,
    pub accepted: bool,
}

/// The outcome rule: chrF of `output` against as many bytes of `continuation` as `output`
/// has (at least one), accepted at `threshold` or above.
pub fn outcome(output: &str, continuation: &str, threshold: f64) -> Outcome {
    let score = chrf(output, head(continuation, output.len().max(1)));
    Outcome {
        chrf: score,
        accepted: score >= threshold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_opens_at_a_space_and_short_pages_give_nothing() {
        let text = "Title of a page\nand its body goes on for a while\n\ntiny\n\nnospacesatallhere";
        let found = passages(text, 16);
        assert_eq!(
            found,
            vec![Passage {
                prompt: "Title of a ".into(),
                continuation: "page\nand its body goes on for a while".into(),
            }]
        );
        // The cut never splits a character: "é" spans bytes 5 and 6.
        assert_eq!(head("abcdé", 5), "abcd");
        assert_eq!(head("abc", 10), "abc");
    }

    #[test]
    fn the_reference_is_as_long_as_the_output() {
        // The reference is cut to the output's 5 bytes, so a perfect opening scores 100.
        let o = outcome("hello", "hello world and more", THRESHOLD);
        assert!((o.chrf - 100.0).abs() < 1e-9 && o.accepted);
        let o = outcome("zzzzz", "hello world", THRESHOLD);
        assert_eq!((o.chrf, o.accepted), (0.0, false));
        assert!(outcome("", "hello", 0.0).accepted, "chrF ≥ 0 always holds");
    }
}
