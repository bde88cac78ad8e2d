//! The corpus: pages read from the four text files, token streams with `<|endoftext|>`
//! before every page, seeded sampling of training windows, and the fixed held-out windows
//! of the loss curve.
//!
//! The corpus files hold one page after another, each page's lines followed by an empty
//! line, so a page is what lies between blank lines.

use std::path::Path;

use crate::{Rng, TrainError};

/// The languages of the corpus, in the order they are reported.
pub const LANGUAGES: [&str; 2] = ["en", "eu"];

/// The pages of one language in one split.
#[derive(Clone, Debug)]
pub struct Slice {
    /// `en` or `eu`.
    pub language: String,
    /// Each page's lines, each line ended by `\n`.
    pub pages: Vec<String>,
}

impl Slice {
    /// UTF-8 bytes of all pages (the separators are not text).
    pub fn bytes(&self) -> usize {
        self.pages.iter().map(String::len).sum()
    }
}

/// Both splits of the corpus, each a slice per language in [`LANGUAGES`] order.
#[derive(Clone, Debug)]
pub struct Corpus {
    pub train: Vec<Slice>,
    pub valid: Vec<Slice>,
}

impl Corpus {
    /// Reads `train.*.txt` and `valid.*.txt` from `dir`.
    pub fn read(dir: &Path) -> Result<Corpus, TrainError> {
        Ok(Corpus {
            train: read_split(dir, "train")?,
            valid: read_split(dir, "valid")?,
        })
    }

    /// Every training page of both languages: the tokenizer's training text.
    pub fn training_pages(&self) -> Vec<&str> {
        self.train
            .iter()
            .flat_map(|s| s.pages.iter().map(String::as_str))
            .collect()
    }

    /// Each slice of both splits as a [`token_stream`].
    pub fn token_streams(&self, encode: impl Fn(&str) -> Vec<u32>, end_of_text: u32) -> Streams {
        let split = |slices: &[Slice]| -> Vec<Vec<u32>> {
            slices
                .iter()
                .map(|s| token_stream(s, &encode, end_of_text))
                .collect()
        };
        Streams {
            train: split(&self.train),
            valid: split(&self.valid),
        }
    }
}

/// The token streams of a [`Corpus`], slice for slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Streams {
    pub train: Vec<Vec<u32>>,
    pub valid: Vec<Vec<u32>>,
}

/// Splits a corpus file into pages: runs of non-empty lines, each line ended by `\n`.
pub fn split_pages(text: &str) -> Vec<String> {
    let mut pages = Vec::new();
    let mut page = String::new();
    for line in text.lines() {
        if line.is_empty() {
            if !page.is_empty() {
                pages.push(std::mem::take(&mut page));
            }
        } else {
            page.push_str(line);
            page.push('\n');
        }
    }
    if !page.is_empty() {
        pages.push(page);
    }
    pages
}

/// Reads `{split}.{language}.txt` for both languages from `dir`.
pub fn read_split(dir: &Path, split: &str) -> Result<Vec<Slice>, TrainError> {
    LANGUAGES
        .iter()
        .map(|&language| {
            let path = dir.join(format!("{split}.{language}.txt"));
            let text =
                std::fs::read_to_string(&path).map_err(|e| TrainError::io("read", &path, e))?;
            let pages = split_pages(&text);
            if pages.is_empty() {
                return Err(TrainError::Corpus(format!(
                    "{} holds no pages",
                    path.display()
                )));
            }
            Ok(Slice {
                language: language.to_string(),
                pages,
            })
        })
        .collect()
}

/// A slice as one token stream: `<|endoftext|>`, page, `<|endoftext|>`, page, ...
pub fn token_stream(
    slice: &Slice,
    encode: impl Fn(&str) -> Vec<u32>,
    end_of_text: u32,
) -> Vec<u32> {
    let mut stream = Vec::new();
    for page in &slice.pages {
        stream.push(end_of_text);
        stream.extend(encode(page));
    }
    stream
}

/// Draws training windows: a language with probability proportional to its bytes, then a
/// uniformly random start in its stream.
#[derive(Clone, Debug)]
pub struct Sampler {
    streams: Vec<Vec<u32>>,
    /// Cumulative probability of each stream.
    cumulative: Vec<f64>,
    rng: Rng,
}

impl Sampler {
    /// `streams[i]` is drawn with probability `weights[i] / Σ weights`; every stream must be
    /// longer than the windows that will be asked for.
    pub fn new(streams: Vec<Vec<u32>>, weights: &[f64], rng: Rng) -> Result<Sampler, TrainError> {
        let total: f64 = weights.iter().sum();
        if streams.len() != weights.len() || streams.is_empty() || total <= 0.0 {
            return Err(TrainError::Corpus("no stream to sample from".into()));
        }
        let mut acc = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Ok(Sampler {
            streams,
            cumulative,
            rng,
        })
    }

    /// `batch` windows of `len + 1` tokens, as inputs and targets `[batch · len]` each.
    pub fn batch(&mut self, batch: usize, len: usize) -> Result<(Vec<u32>, Vec<u32>), TrainError> {
        let mut inputs = Vec::with_capacity(batch * len);
        let mut targets = Vec::with_capacity(batch * len);
        for _ in 0..batch {
            let u = self.rng.next_f64();
            let which = self
                .cumulative
                .iter()
                .position(|&c| u < c)
                .unwrap_or(self.streams.len() - 1);
            let stream = &self.streams[which];
            if stream.len() <= len + 1 {
                return Err(TrainError::Corpus(format!(
                    "stream {which} has {} tokens, too few for windows of {}",
                    stream.len(),
                    len + 1
                )));
            }
            let start = self.rng.below(stream.len() - len);
            inputs.extend_from_slice(&stream[start..start + len]);
            targets.extend_from_slice(&stream[start + 1..start + len + 1]);
        }
        Ok((inputs, targets))
    }
}

/// Non-overlapping windows over `stream`: inputs `stream[i..i + len]` predicting
/// `stream[i + 1..i + len + 1]`, for `i = 0, len, 2·len, ...`; the last one may be shorter.
/// Every token but the first is a target exactly once.
pub fn windows(stream: &[u32], len: usize) -> Vec<(&[u32], &[u32])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < stream.len() {
        let n = len.min(stream.len() - 1 - i);
        out.push((&stream[i..i + n], &stream[i + 1..i + n + 1]));
        i += n;
    }
    out
}

/// `count` full-length [`windows`] of `stream`, evenly spread over it (fewer when the
/// stream has fewer): the loss curve measures the same held-out text at every point.
pub fn spread_windows(stream: &[u32], len: usize, count: usize) -> Vec<(&[u32], &[u32])> {
    let full: Vec<_> = windows(stream, len)
        .into_iter()
        .filter(|(inputs, _)| inputs.len() == len)
        .collect();
    let n = count.min(full.len());
    (0..n).map(|k| full[k * full.len() / n]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_separated_by_blank_lines() {
        let pages = split_pages("a\nb\n\nc\n\n\nd\n");
        assert_eq!(pages, vec!["a\nb\n", "c\n", "d\n"]);
    }

    #[test]
    fn windows_cover_every_target_once() {
        let stream: Vec<u32> = (0..10).collect();
        let w = windows(&stream, 4);
        let targets: Vec<u32> = w.iter().flat_map(|(_, t)| t.iter().copied()).collect();
        assert_eq!(targets, (1..10).collect::<Vec<u32>>());
        for (i, t) in &w {
            assert_eq!(i.len(), t.len());
            assert_eq!(i[1..], t[..t.len() - 1]);
        }
    }

    #[test]
    fn spread_windows_are_full_and_evenly_spaced() {
        let stream: Vec<u32> = (0..42).collect();
        // Ten full windows of 4 (the eleventh is short); three of them, one in every three.
        let picked = spread_windows(&stream, 4, 3);
        let starts: Vec<u32> = picked.iter().map(|(i, _)| i[0]).collect();
        assert_eq!(starts, vec![0, 12, 24]);
        assert!(picked.iter().all(|(i, t)| i.len() == 4 && t.len() == 4));
        assert_eq!(spread_windows(&stream, 4, 50).len(), 10);
        assert!(spread_windows(&stream[..3], 4, 2).is_empty());
    }

    #[test]
    fn streams_follow_the_slices() {
        let slice = |language: &str, pages: &[&str]| Slice {
            language: language.into(),
            pages: pages.iter().map(|p| p.to_string()).collect(),
        };
        let corpus = Corpus {
            train: vec![slice("en", &["ab\n", "c\n"]), slice("eu", &["d\n"])],
            valid: vec![slice("en", &["e\n"]), slice("eu", &["fg\n"])],
        };
        assert_eq!(corpus.training_pages(), vec!["ab\n", "c\n", "d\n"]);
        let streams = corpus.token_streams(|page| page.bytes().map(u32::from).collect(), 0);
        assert_eq!(streams.train[0], vec![0, 97, 98, 10, 0, 99, 10]);
        assert_eq!(streams.valid[1], vec![0, 102, 103, 10]);
    }

    #[test]
    fn sampler_is_deterministic_and_in_bounds() {
        let streams = vec![(0..100).collect::<Vec<u32>>(), (1000..1050).collect()];
        let mut a = Sampler::new(streams.clone(), &[3.0, 1.0], Rng::new(5)).unwrap();
        let mut b = Sampler::new(streams, &[3.0, 1.0], Rng::new(5)).unwrap();
        for _ in 0..20 {
            let (x, y) = a.batch(4, 8).unwrap();
            assert_eq!((x.clone(), y.clone()), b.batch(4, 8).unwrap());
            for (xi, yi) in x.iter().zip(&y) {
                assert_eq!(xi + 1, *yi);
            }
        }
    }
}
