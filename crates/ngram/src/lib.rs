//! An interpolated Kneser–Ney n-gram model over token ids: the cheap draft of speculative
//! decoding, and the statistical baseline the tiny transformer is measured against.
//!
//! The smoothing follows NLTK's `KneserNeyInterpolated` (interpolated Kneser–Ney as Chen and
//! Goodman, 1998, describe it):
//!
//! - the highest order uses raw counts c(ctx w); each lower order uses continuation counts
//!   N1+(• ctx w), the number of distinct tokens seen before `ctx w`;
//! - p_n(w | ctx) = max(a(ctx w) − D_n, 0) / a(ctx •) + D_n · N1+(ctx •) / a(ctx •) · p_{n−1}(w | ctx'),
//!   where ctx' drops the oldest token, and a context never seen defers wholly to the next
//!   order down;
//! - unlike NLTK, whose unigram level gives an unseen token probability 0, the unigram
//!   level is discounted too and interpolated with the uniform 1/V, as kenlm does, so every
//!   token of the vocabulary has a probability above 0 and every distribution sums to 1.
//!
//! The discount of each order is the estimate D = n1 / (n1 + 2 n2) (Ney, Essen and Kneser
//! 1994, as Chen and Goodman use it) from the counts-of-counts of that order's (raw or
//! continuation) counts, or one fixed value. Where an order has no n-gram counted once or none
//! counted twice (a small vocabulary's unigram level: every token follows many others), the
//! estimate is undefined and D is 0.5, the value kenlm's `--discount_fallback` gives the
//! count-1 discount.
//! Training is deterministic: the same streams give the same model, byte for byte
//! ([`NgramModel::to_bytes`]; the format is in [`format`]).
//!
//! ```
//! use ngram::{train, Discounts, TrainConfig};
//!
//! let text = [0u32, 1, 2, 0, 1, 3, 0, 1, 2, 2, 1, 0];
//! let config = TrainConfig {
//!     order: 3,
//!     vocab: 5,
//!     tokenizer_sha256: "0".repeat(64),
//!     discounts: Discounts::Fixed(0.75),
//! };
//! let model = train(&[&text], &config)?;
//! let mut p = Vec::new();
//! model.next_distribution(&[0, 1], &mut p)?;
//! assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
//! assert!(p[4] > 0.0, "a token never seen still has a probability");
//! # Ok::<(), ngram::NgramError>(())
//! ```

#![forbid(unsafe_code)]

mod crc32;
mod error;
pub mod format;

use std::collections::HashMap;

pub use error::NgramError;

/// The highest order supported: four 16-bit ids fill one `u64` key.
pub const MAX_ORDER: usize = 4;
/// The largest vocabulary: ids are packed in 16 bits.
pub const MAX_VOCAB: u64 = 1 << 16;
/// The discount of an order whose counts give no estimate (kenlm's fallback for D1).
pub const FALLBACK_DISCOUNT: f64 = 0.5;

/// How each order's discount D is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Discounts {
    /// D = n1 / (n1 + 2 n2), per order, from that order's counts
    /// ([`FALLBACK_DISCOUNT`] where that is undefined).
    Estimated,
    /// One value for every order (NLTK's form; its default is 0.1).
    Fixed(f64),
}

/// What to train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    pub order: usize,
    pub vocab: u32,
    /// The SHA-256 (lowercase hex) of the tokenizer that made the ids; recorded in the file
    /// and checked when it is read.
    pub tokenizer_sha256: String,
    pub discounts: Discounts,
}

/// The n-grams of one order, sorted by their packed ids, with their (raw or continuation)
/// counts. This is all the file stores; everything else is derived from it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub(crate) grams: Vec<u64>,
    pub(crate) counts: Vec<u32>,
}

/// The followers of one context in its order's table: `grams[start..end]`, their count
/// total a(ctx •) and how many there are, N1+(ctx •).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    total: f64,
}

/// A trained model.
#[derive(Clone, Debug)]
pub struct NgramModel {
    vocab: u32,
    tokenizer_sha256: String,
    discounts: Vec<f64>,
    tables: Vec<Table>,
    /// p_1 over the vocabulary.
    unigram: Vec<f64>,
    /// For order n ≥ 2 (index n − 2), each context's span in `tables[n − 1]`.
    contexts: Vec<HashMap<u64, Span>>,
}

/// Packs ids (each below 2^16), the first in the highest bits, so that sorting keys sorts
/// the n-grams lexicographically.
fn pack(ids: &[u32]) -> u64 {
    ids.iter().fold(0, |key, &id| (key << 16) | u64::from(id))
}

/// The last id of a packed n-gram.
fn last_id(key: u64) -> u32 {
    (key & 0xFFFF) as u32
}

/// Counts each distinct key of a sorted list.
fn runs(sorted: &[u64]) -> Table {
    let mut table = Table {
        grams: Vec::new(),
        counts: Vec::new(),
    };
    for run in sorted.chunk_by(|a, b| a == b) {
        table.grams.push(run[0]);
        table.counts.push(run.len() as u32);
    }
    table
}

fn check_hash(hash: &str) -> Result<(), NgramError> {
    if hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(NgramError::InvalidTokenizerHash(hash.to_string()))
    }
}

/// Trains a model on token streams; no n-gram spans two streams.
pub fn train(streams: &[&[u32]], config: &TrainConfig) -> Result<NgramModel, NgramError> {
    let order = config.order;
    if !(1..=MAX_ORDER).contains(&order) {
        return Err(NgramError::UnsupportedOrder(order));
    }
    if config.vocab == 0 || u64::from(config.vocab) > MAX_VOCAB {
        return Err(NgramError::UnsupportedVocabulary(u64::from(config.vocab)));
    }
    check_hash(&config.tokenizer_sha256)?;
    for &id in streams.iter().flat_map(|s| s.iter()) {
        if id >= config.vocab {
            return Err(NgramError::TokenOutOfRange {
                id,
                vocab: config.vocab,
            });
        }
    }
    let sorted = |n: usize| {
        let mut keys: Vec<u64> = streams
            .iter()
            .flat_map(|s| s.windows(n).map(pack))
            .collect();
        keys.sort_unstable();
        keys
    };
    // Each lower order n: N1+(• g), one for every distinct (n + 1)-gram of the text that
    // ends in g; the highest order: raw counts.
    let mut tables: Vec<Table> = (1..order)
        .map(|n| {
            let mut above = sorted(n + 1);
            above.dedup();
            let mask = (1u64 << (16 * n)) - 1;
            let mut suffixes: Vec<u64> = above.iter().map(|&g| g & mask).collect();
            suffixes.sort_unstable();
            runs(&suffixes)
        })
        .collect();
    tables.push(runs(&sorted(order)));
    let discounts = match config.discounts {
        Discounts::Fixed(d) => vec![d; order],
        Discounts::Estimated => tables
            .iter()
            .map(|t| estimate_discount(&t.counts))
            .collect(),
    };
    NgramModel::from_parts(
        config.vocab,
        config.tokenizer_sha256.clone(),
        discounts,
        tables,
    )
}

/// D = n1 / (n1 + 2 n2), from how many n-grams have count 1 and 2.
fn estimate_discount(counts: &[u32]) -> f64 {
    let n1 = counts.iter().filter(|&&c| c == 1).count() as u64;
    let n2 = counts.iter().filter(|&&c| c == 2).count() as u64;
    if n1 == 0 || n2 == 0 {
        FALLBACK_DISCOUNT
    } else {
        n1 as f64 / (n1 + 2 * n2) as f64
    }
}

impl NgramModel {
    /// Builds the lookup structures over checked tables (sorted, ids in range, counts > 0).
    pub(crate) fn from_parts(
        vocab: u32,
        tokenizer_sha256: String,
        discounts: Vec<f64>,
        tables: Vec<Table>,
    ) -> Result<NgramModel, NgramError> {
        if let Some(&d) = discounts.iter().find(|d| !(**d > 0.0 && **d < 1.0)) {
            return Err(NgramError::InvalidDiscount(d));
        }
        let v = vocab as usize;
        let mut unigram = vec![0.0; v];
        let first = &tables[0];
        let total: f64 = first.counts.iter().map(|&c| f64::from(c)).sum();
        if total == 0.0 {
            // Nothing was seen: the uniform distribution is all there is.
            unigram.fill(1.0 / v as f64);
        } else {
            let d = discounts[0];
            let spread = d * first.grams.len() as f64 / total / v as f64;
            unigram.fill(spread);
            for (&g, &c) in first.grams.iter().zip(&first.counts) {
                unigram[g as usize] += (f64::from(c) - d).max(0.0) / total;
            }
        }
        let contexts = tables[1..]
            .iter()
            .map(|table| {
                let mut spans = HashMap::new();
                let mut start = 0;
                for run in table.grams.chunk_by(|a, b| a >> 16 == b >> 16) {
                    let end = start + run.len();
                    let total = table.counts[start..end].iter().map(|&c| f64::from(c)).sum();
                    spans.insert(run[0] >> 16, Span { start, end, total });
                    start = end;
                }
                spans
            })
            .collect();
        Ok(NgramModel {
            vocab,
            tokenizer_sha256,
            discounts,
            tables,
            unigram,
            contexts,
        })
    }

    pub fn order(&self) -> usize {
        self.tables.len()
    }

    pub fn vocab(&self) -> u32 {
        self.vocab
    }

    /// The SHA-256 of the tokenizer the model was trained with.
    pub fn tokenizer_sha256(&self) -> &str {
        &self.tokenizer_sha256
    }

    /// Each order's discount, order 1 first.
    pub fn discounts(&self) -> &[f64] {
        &self.discounts
    }

    /// How many n-grams each order stores, order 1 first.
    pub fn sizes(&self) -> Vec<usize> {
        self.tables.iter().map(|t| t.grams.len()).collect()
    }

    fn check_context(&self, context: &[u32]) -> Result<(), NgramError> {
        match context.iter().find(|&&id| id >= self.vocab) {
            Some(&id) => Err(NgramError::TokenOutOfRange {
                id,
                vocab: self.vocab,
            }),
            None => Ok(()),
        }
    }

    /// The spans of the contexts `context` ends with, order 2 first, while they were seen:
    /// (order's discount, span, table).
    fn seen_contexts<'a>(
        &'a self,
        context: &'a [u32],
    ) -> impl Iterator<Item = (f64, Span, &'a Table)> + 'a {
        (2..=self.order())
            .take_while(move |&n| context.len() >= n - 1)
            .filter_map(move |n| {
                let key = pack(&context[context.len() - (n - 1)..]);
                self.contexts[n - 2]
                    .get(&key)
                    .filter(|span| span.total > 0.0)
                    .map(|&span| (self.discounts[n - 1], span, &self.tables[n - 1]))
            })
    }

    /// p(token | context); only the last `order − 1` ids of `context` matter.
    pub fn prob(&self, context: &[u32], token: u32) -> Result<f64, NgramError> {
        self.check_context(context)?;
        self.check_context(&[token])?;
        let mut p = self.unigram[token as usize];
        for (d, span, table) in self.seen_contexts(context) {
            let grams = &table.grams[span.start..span.end];
            let count = grams
                .binary_search_by_key(&token, |&g| last_id(g))
                .map_or(0.0, |at| f64::from(table.counts[span.start + at]));
            let gamma = d * (span.end - span.start) as f64 / span.total;
            p = (count - d).max(0.0) / span.total + gamma * p;
        }
        Ok(p)
    }

    /// The whole next-token distribution after `context` into `out` (length V): O(V) plus
    /// the followers of each seen context.
    pub fn next_distribution(&self, context: &[u32], out: &mut Vec<f64>) -> Result<(), NgramError> {
        self.check_context(context)?;
        out.clear();
        out.extend_from_slice(&self.unigram);
        for (d, span, table) in self.seen_contexts(context) {
            let gamma = d * (span.end - span.start) as f64 / span.total;
            out.iter_mut().for_each(|p| *p *= gamma);
            for at in span.start..span.end {
                let w = last_id(table.grams[at]) as usize;
                out[w] += (f64::from(table.counts[at]) - d).max(0.0) / span.total;
            }
        }
        Ok(())
    }
}
