//! Held-out accuracy and novelty: each page of a slice's validation text classified whole, or
//! by its first bytes (prompt-sized, since the observe report classifies prompts), and its
//! bytes unseen in training counted. In-distribution text is not wholly "seen": pruned
//! n-grams count as unseen, so the held-out share is the baseline an observed share is read
//! against.
//!
//! The corpus files hold one page after another, separated by one blank line
//! (`corpus/PROVENANCE.md`), so a page is what lies between blank lines.

use crate::{share, LangId};

/// The pages of a corpus text: the non-empty runs between blank lines, without their
/// separating newlines.
pub fn pages(text: &str) -> impl Iterator<Item = &str> {
    text.split("\n\n")
        .map(|page| page.trim_matches('\n'))
        .filter(|page| !page.is_empty())
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a character
/// boundary.
pub fn prefix(text: &str, max_bytes: usize) -> &str {
    if max_bytes >= text.len() {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How one slice's held-out pages were classified, and how novel they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tally {
    pub code: String,
    /// The prefix each page was cut to, or `None` for whole pages.
    pub prefix_bytes: Option<usize>,
    pub pages: usize,
    /// Pages classified as their own slice.
    pub correct: usize,
    /// Pages that got no language (no n-gram the model keeps).
    pub unknown: usize,
    /// Bytes of the pages (or prefixes).
    pub bytes: usize,
    /// Of those, the bytes in characters or n-grams unseen in training
    /// ([`Novelty::unseen_ngram_bytes`](crate::Novelty::unseen_ngram_bytes), summed).
    pub unseen_bytes: usize,
}

impl Tally {
    /// The share of pages classified correctly (0 for no pages).
    pub fn accuracy(&self) -> f64 {
        share(self.correct, self.pages)
    }

    /// The share of bytes unseen in training (0 for no bytes).
    pub fn unseen_share(&self) -> f64 {
        share(self.unseen_bytes, self.bytes)
    }
}

/// Classifies every page of each `(code, text)` slice, whole or cut to `prefix_bytes`, and
/// sums its novelty.
pub fn tally(model: &LangId, slices: &[(&str, &str)], prefix_bytes: Option<usize>) -> Vec<Tally> {
    slices
        .iter()
        .map(|&(code, text)| {
            let mut tally = Tally {
                code: code.to_string(),
                prefix_bytes,
                pages: 0,
                correct: 0,
                unknown: 0,
                bytes: 0,
                unseen_bytes: 0,
            };
            for page in pages(text) {
                let page = prefix_bytes.map_or(page, |n| prefix(page, n));
                let found = model.classify(page).code;
                tally.pages += 1;
                tally.correct += usize::from(found == Some(code));
                tally.unknown += usize::from(found.is_none());
                let novelty = model.novelty(page);
                tally.bytes += novelty.bytes;
                tally.unseen_bytes += novelty.unseen_ngram_bytes;
            }
            tally
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_the_runs_between_blank_lines() {
        let text = "one\nline two\n\nthree\n\n\nfour\n";
        assert_eq!(
            pages(text).collect::<Vec<_>>(),
            ["one\nline two", "three", "four"]
        );
        assert_eq!(pages("").count(), 0);
        assert_eq!(pages("\n\n\n").count(), 0);
    }

    #[test]
    fn a_prefix_ends_on_a_character_boundary() {
        // "añ€" is 1 + 2 + 3 bytes: boundaries at 0, 1, 3, 6.
        let text = "añ€";
        let ends: Vec<usize> = (0..=7).map(|n| prefix(text, n).len()).collect();
        assert_eq!(ends, [0, 1, 1, 3, 3, 3, 6, 6]);
    }

    #[test]
    fn a_tally_counts_correct_wrong_and_unknown_pages_and_unseen_bytes() {
        let config = crate::TrainConfig {
            order: 2,
            min_count: 1,
            smoothing: 1.0,
        };
        let model = LangId::train(&[("a", "aaaa"), ("b", "bbbb")], &config).unwrap();
        // Slice "a": one right, one wrong, one unknown (a character never seen).
        let tally = tally(&model, &[("a", "aa\n\nbb\n\nzz\n")], None);
        assert_eq!(
            tally,
            [Tally {
                code: "a".into(),
                prefix_bytes: None,
                pages: 3,
                correct: 1,
                unknown: 1,
                // "aa", "bb" and "zz"; z is unseen.
                bytes: 6,
                unseen_bytes: 2,
            }]
        );
        assert!((tally[0].accuracy() - 1.0 / 3.0).abs() < 1e-15);
        assert!((tally[0].unseen_share() - 1.0 / 3.0).abs() < 1e-15);
        // Cut to one byte, "ba" reads as "b"; "ab" and "ba" were never seen, but "a" and
        // "b" were.
        let cut = super::tally(&model, &[("a", "ab\n\nba")], Some(1));
        assert_eq!(
            (
                cut[0].pages,
                cut[0].correct,
                cut[0].bytes,
                cut[0].unseen_bytes
            ),
            (2, 1, 2, 0)
        );
        let whole = super::tally(&model, &[("a", "ab\n\nba")], None);
        assert_eq!((whole[0].bytes, whole[0].unseen_bytes), (4, 4));
    }
}
