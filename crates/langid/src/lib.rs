//! The language identifier the project ships: a multinomial naive Bayes classifier over
//! character n-grams, trained on the corpus's language slices (`en` and `eu`), and the
//! novelty of a text against that training (the bytes of characters and n-grams it never saw).
//!
//! It follows the naive Bayes of langid.py (Lui and Baldwin, "langid.py: An Off-the-shelf
//! Language Identification Tool", ACL 2012) over the character n-grams of Cavnar and Trenkle
//! ("N-Gram-Based Text Categorization", SDAIR 1994):
//!
//! - the features of a text are all its n-grams of 1 to N Unicode scalar values (N = 4 in
//!   the shipped file), overlapping, counted with multiplicity; no padding, no case folding.
//!   Characters rather than bytes, because the novelty report counts characters never seen,
//!   and a 4-gram of characters spans the same amount of text whatever the UTF-8 width;
//! - a slice c scores ln P(text | c) = Σ_f ln P(f | c) over the text's features f that the
//!   model keeps, with P(f | c) = (n(f, c) + α) / (N_c + α·|V|): n(f, c) the count of f in
//!   c's training text, N_c the total count of all kept features in c, |V| the number of
//!   kept features (all orders together), α the additive smoothing. Features the model does
//!   not keep are skipped, as langid.py skips features outside its selected set;
//! - the prior is uniform, not the training share: the corpus holds 10 % Basque by design,
//!   which says nothing about the share of Basque prompts. So the winner is the slice of
//!   highest ln P(text | c) (ties go to the slice given first in training), and
//!   [`Classification::log_odds`] is the posterior log odds of the winner over the runner-up;
//! - the model is kept small by pruning: every character seen is kept (the alphabet, which
//!   the novelty report needs whole), and an n-gram of 2 or more characters is kept only if
//!   it occurs at least `min_count` times in all training text together.
//!
//! A text with no kept feature (empty, or only characters never seen) gets no language:
//! [`Classification::code`] is `None`, which [`Classification::label`] names [`UNKNOWN`].
//! Training and classification are deterministic, without I/O, clock or entropy: the same
//! slices give the same file, byte for byte ([`LangId::to_bytes`]; the format is in
//! [`format`](mod@format)).
//!
//! ```
//! use langid::{LangId, TrainConfig};
//!
//! let config = TrainConfig { order: 3, min_count: 1, smoothing: 0.5 };
//! let model = LangId::train(
//!     &[("en", "the cat sat on the mat"), ("eu", "katua alfonbran eseri zen")],
//!     &config,
//! )?;
//! assert_eq!(model.classify("the hat").code, Some("en"));
//! assert_eq!(model.classify("").label(), langid::UNKNOWN);
//! let novelty = model.novelty("the λ");
//! assert_eq!(novelty.unseen_char_bytes, 2, "λ is two bytes, and never seen");
//! # Ok::<(), langid::LangIdError>(())
//! ```

#![forbid(unsafe_code)]

mod error;
pub mod format;
pub mod held_out;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub use error::LangIdError;

/// The longest n-gram: four 16-bit character ids fill one `u64` key.
pub const MAX_ORDER: usize = 4;
/// The most distinct characters: ids are 1 to 2^16 − 1 (0 would make keys of two orders
/// collide).
pub const MAX_ALPHABET: usize = u16::MAX as usize;
/// The longest slice code.
pub const MAX_CODE_LEN: usize = 16;
/// The label of a text that has no language: no feature the model knows.
pub const UNKNOWN: &str = "unknown";

/// A hash map over packed n-grams for lookups only, so its order never shows; its hasher is
/// fixed, so no entropy is drawn to seed it.
type FixedMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The hasher of packed n-grams: MurmurHash3's 64-bit finaliser (fmix64), which spreads
/// every key bit over the high bits the table's control bytes use and the low bits its
/// buckets use. SipHash, the std default, made classification four times slower, and the
/// keys are not chosen by an adversary who could flood one bucket to any effect but a slow
/// report.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, key: u64) {
        let mut h = self.0 ^ key;
        h = (h ^ (h >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h = (h ^ (h >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        self.0 = h ^ (h >> 33);
    }
}

/// What to train.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainConfig {
    /// The longest n-gram, 1 to [`MAX_ORDER`] characters; also the order the novelty of a
    /// text is judged at.
    pub order: usize,
    /// An n-gram of 2 or more characters seen fewer times than this (all slices together)
    /// is pruned.
    pub min_count: u32,
    /// The additive smoothing α of P(f | c).
    pub smoothing: f64,
}

impl Default for TrainConfig {
    /// The shipped file's settings (`decode-lab langid train`). Held-out accuracy on the
    /// corpus is the same for minimum counts 1, 4, 8 and 16 (whole pages and 16- to 64-byte
    /// prefixes); 8 keeps the file at a third of its unpruned size (217 kB against
    /// 684 kB), while the held-out bytes counted as unseen rise only from 0.3 % to 1.2 % (en)
    /// and from 0.4 % to 1.8 % (eu) of whole pages.
    fn default() -> Self {
        TrainConfig {
            order: 4,
            min_count: 8,
            smoothing: 0.5,
        }
    }
}

/// One language slice of the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    /// The slice's code, as the run records' `slice` tag names it (`en`, `eu`).
    pub code: String,
    /// The SHA-256 (lowercase hex) of the text it was trained on, so a file's provenance can
    /// be checked against the corpus.
    pub training_sha256: String,
}

/// The n-grams of one order, sorted by their packed ids, with one count per slice each
/// (`counts[i * slices + c]`). This is all the file stores besides the alphabet.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub(crate) grams: Vec<u64>,
    pub(crate) counts: Vec<u32>,
}

/// A trained language identifier.
#[derive(Clone, Debug)]
pub struct LangId {
    config: TrainConfig,
    slices: Vec<Slice>,
    /// Every character of the training text, in increasing order; a character's id is its
    /// index plus 1.
    alphabet: Vec<char>,
    /// Order 1 first; order 1 holds every id of the alphabet.
    tables: Vec<Table>,
    /// Derived: the ids of the ASCII characters (0 for one never seen), the common case.
    ascii: [u16; 128],
    /// Derived: each kept n-gram's row in `log_probs`.
    rows: FixedMap<u32>,
    /// Derived: ln P(f | c) at `row * slices + c`.
    log_probs: Vec<f64>,
}

/// The language of a text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Classification<'a> {
    /// The most likely slice, or `None` when the text has no n-gram the model keeps (empty,
    /// or only characters never seen in training).
    pub code: Option<&'a str>,
    /// ln P(text | winner) − ln P(text | runner-up), in nats: with the uniform prior, the
    /// posterior log odds of the winner. 0 when there is no winner.
    pub log_odds: f64,
    /// How many of the text's n-grams the model scored.
    pub ngrams: usize,
}

impl Classification<'_> {
    /// The slice code, or [`UNKNOWN`].
    pub fn label(&self) -> &str {
        self.code.unwrap_or(UNKNOWN)
    }
}

/// How much of a text lies outside the training: the input-quality figure of the observe
/// report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Novelty {
    /// UTF-8 bytes of the text.
    pub bytes: usize,
    /// Bytes of characters never seen in training (a script absent from the corpus shows
    /// here).
    pub unseen_char_bytes: usize,
    /// Bytes of characters that no kept n-gram of the model's order covers: every n-gram of
    /// that order containing them was never seen, or seen fewer than `min_count` times and
    /// pruned. A text shorter than the order is judged as one n-gram of its own length.
    /// Includes the bytes of unseen characters, since no kept n-gram contains one.
    pub unseen_ngram_bytes: usize,
}

impl Novelty {
    /// The share of bytes in characters or n-grams unseen in training (0 for no bytes).
    pub fn unseen_share(&self) -> f64 {
        share(self.unseen_ngram_bytes, self.bytes)
    }
}

/// `part / whole`, and 0 of nothing.
pub(crate) fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Packs ids (each 1 to 2^16 − 1), the first in the highest bits, so that sorting keys sorts
/// n-grams of one order lexicographically and keys of different orders never collide.
pub(crate) use artifact_file::pack;

/// The number of ids in a packed key.
fn key_order(key: u64) -> usize {
    (64 - key.leading_zeros() as usize).div_ceil(16)
}

/// The low `n` ids of a rolling key.
fn last_ids(window: u64, n: usize) -> u64 {
    if n >= 4 {
        window
    } else {
        window & ((1u64 << (16 * n)) - 1)
    }
}

pub(crate) fn check_code(code: &str) -> Result<(), LangIdError> {
    let valid = (1..=MAX_CODE_LEN).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(LangIdError::InvalidCode(code.to_string()))
    }
}

pub(crate) fn check_config(config: &TrainConfig) -> Result<(), LangIdError> {
    if !(1..=MAX_ORDER).contains(&config.order) {
        return Err(LangIdError::UnsupportedOrder(config.order));
    }
    if config.min_count == 0 {
        return Err(LangIdError::InvalidMinCount(0));
    }
    if !(config.smoothing.is_finite() && config.smoothing > 0.0) {
        return Err(LangIdError::InvalidSmoothing(config.smoothing));
    }
    Ok(())
}

use policy::sha256_hex;

impl LangId {
    /// Trains on `slices`, each a slice code and its training text.
    pub fn train(slices: &[(&str, &str)], config: &TrainConfig) -> Result<LangId, LangIdError> {
        check_config(config)?;
        if slices.len() < 2 {
            return Err(LangIdError::TooFewSlices(slices.len()));
        }
        for (i, (code, text)) in slices.iter().enumerate() {
            check_code(code)?;
            if slices[..i].iter().any(|(other, _)| other == code) {
                return Err(LangIdError::DuplicateCode(code.to_string()));
            }
            if text.is_empty() {
                return Err(LangIdError::EmptySlice(code.to_string()));
            }
        }
        let mut alphabet: Vec<char> = slices.iter().flat_map(|(_, t)| t.chars()).collect();
        alphabet.sort_unstable();
        alphabet.dedup();
        if alphabet.len() > MAX_ALPHABET {
            return Err(LangIdError::AlphabetTooLarge(alphabet.len()));
        }
        let id = |c: char| alphabet.binary_search(&c).map_or(0, |i| i as u16 + 1);

        let classes = slices.len();
        let mut rows: FixedMap<usize> = FixedMap::default();
        let mut counts: Vec<u32> = Vec::new();
        for (class, (_, text)) in slices.iter().enumerate() {
            let ids: Vec<u16> = text.chars().map(id).collect();
            for n in 1..=config.order {
                for gram in ids.windows(n) {
                    let next = rows.len();
                    let row = *rows.entry(pack(gram)).or_insert(next);
                    if row == next {
                        counts.resize(counts.len() + classes, 0);
                    }
                    counts[row * classes + class] += 1;
                }
            }
        }
        let mut keys: Vec<(u64, usize)> = rows.into_iter().collect();
        keys.sort_unstable();
        let mut tables = vec![
            Table {
                grams: Vec::new(),
                counts: Vec::new(),
            };
            config.order
        ];
        for (key, row) in keys {
            let n = key_order(key);
            let gram_counts = &counts[row * classes..(row + 1) * classes];
            let total: u64 = gram_counts.iter().map(|&c| u64::from(c)).sum();
            if n == 1 || total >= u64::from(config.min_count) {
                tables[n - 1].grams.push(key);
                tables[n - 1].counts.extend_from_slice(gram_counts);
            }
        }
        let slices = slices
            .iter()
            .map(|(code, text)| Slice {
                code: code.to_string(),
                training_sha256: sha256_hex(text.as_bytes()),
            })
            .collect();
        Ok(LangId::from_parts(*config, slices, alphabet, tables))
    }

    /// Builds the derived lookups from what the file stores (already checked).
    pub(crate) fn from_parts(
        config: TrainConfig,
        slices: Vec<Slice>,
        alphabet: Vec<char>,
        tables: Vec<Table>,
    ) -> LangId {
        let classes = slices.len();
        let mut ascii = [0u16; 128];
        for (i, &c) in alphabet.iter().enumerate() {
            if c.is_ascii() {
                ascii[c as usize] = i as u16 + 1;
            }
        }
        let features: usize = tables.iter().map(|t| t.grams.len()).sum();
        let mut totals = vec![0f64; classes];
        for table in &tables {
            for gram_counts in table.counts.chunks(classes) {
                for (total, &count) in totals.iter_mut().zip(gram_counts) {
                    *total += f64::from(count);
                }
            }
        }
        let alpha = config.smoothing;
        let denominators: Vec<f64> = totals
            .iter()
            .map(|total| (total + alpha * features as f64).ln())
            .collect();
        let mut rows = FixedMap::default();
        let mut log_probs = Vec::with_capacity(features * classes);
        for table in &tables {
            for (&gram, gram_counts) in table.grams.iter().zip(table.counts.chunks(classes)) {
                rows.insert(gram, rows.len() as u32);
                for (&count, denominator) in gram_counts.iter().zip(&denominators) {
                    log_probs.push((f64::from(count) + alpha).ln() - denominator);
                }
            }
        }
        LangId {
            config,
            slices,
            alphabet,
            tables,
            ascii,
            rows,
            log_probs,
        }
    }

    /// The settings it was trained with.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// The slices, in training order (the order ties are broken in).
    pub fn slices(&self) -> &[Slice] {
        &self.slices
    }

    /// The characters seen in training, in increasing order.
    pub fn alphabet(&self) -> &[char] {
        &self.alphabet
    }

    /// Kept n-grams per order, order 1 first.
    pub fn ngrams_per_order(&self) -> Vec<usize> {
        self.tables.iter().map(|t| t.grams.len()).collect()
    }

    /// The id of a character, or 0 for one never seen.
    fn id(&self, c: char) -> u16 {
        if c.is_ascii() {
            self.ascii[c as usize]
        } else {
            self.alphabet.binary_search(&c).map_or(0, |i| i as u16 + 1)
        }
    }

    /// ln P(text | c) for each slice in training order, and how many n-grams were scored.
    pub fn log_likelihoods(&self, text: &str) -> (Vec<f64>, usize) {
        let classes = self.slices.len();
        let mut scores = vec![0f64; classes];
        let mut scored = 0;
        // The last (up to four) ids, newest lowest, and how many of them are characters seen
        // in training since the last unseen one: only those n-grams can be kept.
        let mut window = 0u64;
        let mut run = 0usize;
        for c in text.chars() {
            let id = self.id(c);
            if id == 0 {
                run = 0;
                continue;
            }
            window = (window << 16) | u64::from(id);
            run += 1;
            // Every character of the alphabet is a kept unigram, and the unigrams come first
            // in `log_probs`, in id order: no lookup needed.
            let unigram = usize::from(id - 1);
            let longer = (2..=run.min(self.config.order))
                .filter_map(|n| self.rows.get(&last_ids(window, n)).map(|&row| row as usize));
            for row in std::iter::once(unigram).chain(longer) {
                let row = row * classes;
                for (score, lp) in scores.iter_mut().zip(&self.log_probs[row..row + classes]) {
                    *score += lp;
                }
                scored += 1;
            }
        }
        (scores, scored)
    }

    /// The most likely slice of `text`; `None` when no n-gram of it is kept.
    pub fn classify(&self, text: &str) -> Classification<'_> {
        let (scores, ngrams) = self.log_likelihoods(text);
        if ngrams == 0 {
            return Classification {
                code: None,
                log_odds: 0.0,
                ngrams,
            };
        }
        let mut best = 0;
        for (i, &score) in scores.iter().enumerate() {
            if score > scores[best] {
                best = i;
            }
        }
        let runner_up = scores
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != best)
            .map(|(_, &s)| s)
            .fold(f64::NEG_INFINITY, f64::max);
        Classification {
            code: Some(&self.slices[best].code),
            log_odds: scores[best] - runner_up,
            ngrams,
        }
    }

    /// The bytes of `text` in characters or n-grams (of the model's order) unseen in
    /// training.
    pub fn novelty(&self, text: &str) -> Novelty {
        let chars: Vec<(u16, usize)> = text.chars().map(|c| (self.id(c), c.len_utf8())).collect();
        let unseen_char_bytes = chars
            .iter()
            .filter(|&&(id, _)| id == 0)
            .map(|&(_, len)| len)
            .sum();
        let n = self.config.order.min(chars.len());
        // Character i is covered when a kept n-gram starts at some j in i + 1 − n ..= i; the
        // starts are visited in increasing order, so the latest kept start is all we need.
        let mut latest_kept: Option<usize> = None;
        let mut unseen_ngram_bytes = 0;
        for (i, &(_, len)) in chars.iter().enumerate() {
            if i + n <= chars.len() {
                let gram = &chars[i..i + n];
                let key = gram.iter().try_fold(0u64, |key, &(id, _)| {
                    (id != 0).then_some((key << 16) | u64::from(id))
                });
                if key.is_some_and(|key| self.rows.contains_key(&key)) {
                    latest_kept = Some(i);
                }
            }
            if latest_kept.is_none_or(|j| j + n <= i) {
                unseen_ngram_bytes += len;
            }
        }
        Novelty {
            bytes: text.len(),
            unseen_char_bytes,
            unseen_ngram_bytes,
        }
    }
}

#[cfg(test)]
mod tests;
