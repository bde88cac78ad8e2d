//! A different system boundary: retrieval instead of generation. The training text is cut
//! into passages, the passage most like the prompt is found with BM25, and the training
//! text that follows it is the answer.
//!
//! **Passages** are windows of [`WINDOW_WORDS`] words starting every [`STRIDE_WORDS`] words
//! within each training page (pages are separated by a blank line), each followed by at
//! least one word of its page (the page's last window is cut short to leave it one); a
//! window's **continuation** is its page's text from the next word on. Windows rather than lines or pages, because the prompt is a few words and
//! ends anywhere in a line: a window of about a prompt's length whose end lies within
//! `STRIDE_WORDS / 2` words of every word boundary lets the answer start where a prompt
//! like it stops. **Words** are maximal runs of alphanumeric characters, lowercased, so
//! punctuation and case do not split a term (the language-neutral part of a standard
//! analyser; no stemming, which would need a stemmer per language).
//!
//! **BM25** (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and
//! Beyond", 2009), in the form of Lucene's `BM25Similarity`, with k1 = 1.2 and b = 0.75:
//!
//! score(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d) · (k1 + 1) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl)),
//! idf(t) = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5)),
//!
//! over the distinct words t of the query (a word repeated in the prompt counts once), with
//! N windows, n(t) of them containing t, |d| the window's words and avgdl their mean. The
//! `1 +` inside Lucene's logarithm keeps idf above 0 for a word in most windows. Ties go to
//! the earlier window.
//!
//! BM25 over words rather than character n-gram overlap: it weighs a rare shared word (a
//! product or function name) far above a shared "the", which is what makes a retrieved
//! passage about the same thing; the price is that a word written differently (an inflected
//! Basque form) does not match at all.

use std::collections::HashMap;

/// Words a window holds, about a prompt's worth (64 bytes are 9–12 words).
pub const WINDOW_WORDS: usize = 8;
/// Words between the starts of consecutive windows.
pub const STRIDE_WORDS: usize = 2;
pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;

/// The words of `text`, lowercased, with the byte offset each starts at.
pub fn words(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, text[s..i].to_lowercase()));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// One window: its words' count, and where in the index's text its continuation lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    words: u32,
    continuation: (u32, u32),
}

/// The inverted index of the windows of some texts.
pub struct Index {
    text: String,
    windows: Vec<Window>,
    /// Per word, the windows holding it with the word's count there, in window order.
    postings: HashMap<String, Vec<(u32, u32)>>,
    average_words: f64,
}

/// The best window for a query: its score and its continuation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit<'a> {
    pub window: usize,
    pub score: f64,
    pub continuation: &'a str,
}

impl Index {
    /// Indexes the pages of `texts` (each a text of pages separated by a blank line).
    pub fn build(texts: &[&str]) -> Index {
        let text = texts.join("\n\n");
        let mut windows = Vec::new();
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut page_start = 0;
        for page in text.split("\n\n") {
            let found = words(page);
            let mut start = 0;
            while start + 1 < found.len() {
                let end = (start + WINDOW_WORDS).min(found.len() - 1);
                let id = windows.len() as u32;
                let mut counts: HashMap<&str, u32> = HashMap::new();
                for (_, w) in &found[start..end] {
                    *counts.entry(w).or_insert(0) += 1;
                }
                for (w, count) in counts {
                    postings.entry(w.to_string()).or_default().push((id, count));
                }
                windows.push(Window {
                    words: (end - start) as u32,
                    continuation: (
                        (page_start + found[end].0) as u32,
                        (page_start + page.len()) as u32,
                    ),
                });
                if end + 1 == found.len() {
                    // A later start would give a suffix of this window, not a new place.
                    break;
                }
                start += STRIDE_WORDS;
            }
            page_start += page.len() + 2;
        }
        let total: u64 = windows.iter().map(|w| u64::from(w.words)).sum();
        let average_words = total as f64 / windows.len().max(1) as f64;
        Index {
            text,
            windows,
            postings,
            average_words,
        }
    }

    /// Whether `text` occurs verbatim in the indexed text.
    pub fn contains(&self, text: &str) -> bool {
        self.text.contains(text)
    }

    pub fn windows(&self) -> usize {
        self.windows.len()
    }

    /// The bytes the index holds as built: the training text it answers from, each word's
    /// bytes and its postings (8 bytes each) and each window (12 bytes).
    pub fn size_bytes(&self) -> usize {
        self.text.len()
            + self
                .postings
                .iter()
                .map(|(w, p)| w.len() + std::mem::size_of_val(p.as_slice()))
                .sum::<usize>()
            + std::mem::size_of_val(self.windows.as_slice())
    }

    /// idf(t) for a word in `n` of the windows.
    fn idf(&self, n: usize) -> f64 {
        let (big_n, n) = (self.windows.len() as f64, n as f64);
        (1.0 + (big_n - n + 0.5) / (n + 0.5)).ln()
    }

    /// Every window's BM25 score for `query`, in window order (0 where no word is shared).
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut distinct: Vec<String> = words(query).into_iter().map(|(_, w)| w).collect();
        distinct.sort();
        distinct.dedup();
        let mut scores = vec![0.0; self.windows.len()];
        for word in &distinct {
            let Some(list) = self.postings.get(word) else {
                continue;
            };
            let idf = self.idf(list.len());
            for &(window, tf) in list {
                let (tf, length) = (
                    f64::from(tf),
                    f64::from(self.windows[window as usize].words),
                );
                let norm = K1 * (1.0 - B + B * length / self.average_words);
                scores[window as usize] += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        scores
    }

    /// The highest-scoring window (the earliest of equals), or `None` when the query
    /// shares no word with any window.
    pub fn best(&self, query: &str) -> Option<Hit<'_>> {
        let scores = self.scores(query);
        let (window, &score) = scores.iter().enumerate().fold(
            None,
            |best: Option<(usize, &f64)>, (i, s)| match best {
                Some((_, b)) if b >= s => best,
                _ => Some((i, s)),
            },
        )?;
        (score > 0.0).then(|| {
            let (from, to) = self.windows[window].continuation;
            Hit {
                window,
                score,
                continuation: &self.text[from as usize..to as usize],
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercased_alphanumeric_runs() {
        assert_eq!(
            words("Zer da Access2Base? It's café-au-lait."),
            [
                (0, "zer"),
                (4, "da"),
                (7, "access2base"),
                (20, "it"),
                (23, "s"),
                (25, "café"),
                (31, "au"),
                (34, "lait"),
            ]
            .map(|(i, w)| (i, w.to_string()))
        );
    }

    /// Three pages of at most `WINDOW_WORDS + 1` words, so each is one window, scored by
    /// hand from the formula in the module doc.
    #[test]
    fn bm25_scores_equal_a_hand_computation() {
        let pages = "red apple pie is sweet\n\nred car red road\n\ngreen apple tree grows";
        let index = Index::build(&[pages]);
        // Windows hold all but the last word: [red apple pie is], [red car red], [green apple tree].
        assert_eq!(index.windows(), 3);
        // By hand, with N = 3 and avgdl = 10 / 3: "red" and "apple" are each in 2 windows,
        // idf = ln(1 + 1.5 / 2.5) = ln 1.6 = 0.470004; the length norms are
        // 1.2 · (0.25 + 0.75 · 4 / (10 / 3)) = 1.38 for 4 words and 1.11 for 3. Window 0:
        // 2 · 0.470004 · 2.2 / (1 + 1.38) = 0.868914; window 1 ("red" twice):
        // 0.470004 · 2 · 2.2 / (2 + 1.11) = 0.664957; window 2: 0.470004 · 2.2 / 2.11 = 0.490051.
        let scores = index.scores("Red apple, red!");
        for (got, want) in scores.iter().zip([0.868_914, 0.664_957, 0.490_051]) {
            assert!((got - want).abs() < 1e-6, "{got} against {want}");
        }
        let hit = index.best("red apple").unwrap();
        assert_eq!((hit.window, hit.continuation), (0, "sweet"));
        let hit = index.best("tree").unwrap();
        assert_eq!((hit.window, hit.continuation), (2, "grows"));
        assert_eq!(index.best("nothing shared"), None);
        assert!(index.contains("car red road") && !index.contains("sweet red"));
    }

    #[test]
    fn long_pages_give_overlapping_windows_and_continuations_stay_in_the_page() {
        let page: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
        let index = Index::build(&[&page.join(" "), "last page here"]);
        // Windows of words 0..8, 2..10 and 4..11 on the first page (the last stops before
        // the last word, and ends the page's windows), and 0..2 on the second.
        assert_eq!(index.windows(), 4);
        assert_eq!(index.best("w1").unwrap().continuation, "w8 w9 w10 w11");
        assert_eq!(index.best("w2").unwrap().continuation, "w8 w9 w10 w11");
        // w9 is in the windows 2..10 and 4..11: the shorter wins.
        assert_eq!(index.best("w9").unwrap().continuation, "w11");
        assert_eq!(index.best("last").unwrap().continuation, "here");
    }
}
