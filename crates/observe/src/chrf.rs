//! chrF (Popović, 2015): the character n-gram F-score the outcome rule of `decode-lab
//! traffic` and `eval --alternatives` uses to decide whether a continuation was good enough.
//!
//! As sacreBLEU computes it (`sacrebleu/metrics/chrf.py`, read at commit 2ae1366): white
//! space removed; for n = 1 … 6, the counts of the hypothesis's and the reference's
//! character n-grams and of their overlap (the multiset intersection); precision and recall
//! averaged over the orders where both sides have n-grams; then
//! F_β = (1 + β²) · P · R / (β² · P + R) with β = 2, on a 0–100 scale. Statistics of several
//! pairs add up before the score ([`ChrfStats::add`]), as sacreBLEU's corpus score does.

use std::collections::HashMap;

/// Character n-gram orders, and the weight of recall (sacreBLEU's defaults).
pub const ORDER: usize = 6;
pub const BETA: f64 = 2.0;

/// Per order: hypothesis n-grams, reference n-grams, and n-grams in common.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChrfStats {
    pub counts: [[u64; 3]; ORDER],
}

impl ChrfStats {
    /// The statistics of one hypothesis against one reference.
    pub fn of(hypothesis: &str, reference: &str) -> ChrfStats {
        let squeeze = |s: &str| -> Vec<char> { s.chars().filter(|c| !c.is_whitespace()).collect() };
        let (h, r) = (squeeze(hypothesis), squeeze(reference));
        let mut stats = ChrfStats::default();
        for n in 1..=ORDER {
            let (hg, rg) = (grams(&h, n), grams(&r, n));
            let common = hg
                .iter()
                .map(|(g, &c)| c.min(rg.get(g).copied().unwrap_or(0)))
                .sum();
            stats.counts[n - 1] = [hg.values().sum(), rg.values().sum(), common];
        }
        stats
    }

    pub fn add(&mut self, other: &ChrfStats) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }

    /// chrF on a 0–100 scale; 0 when no order has n-grams on both sides.
    pub fn score(&self) -> f64 {
        let (mut p, mut r, mut orders) = (0.0, 0.0, 0u32);
        for &[hyp, reference, common] in &self.counts {
            if hyp > 0 && reference > 0 {
                p += common as f64 / hyp as f64;
                r += common as f64 / reference as f64;
                orders += 1;
            }
        }
        if orders == 0 {
            return 0.0;
        }
        let (p, r) = (p / orders as f64, r / orders as f64);
        if p + r == 0.0 {
            return 0.0;
        }
        let b2 = BETA * BETA;
        100.0 * (1.0 + b2) * p * r / (b2 * p + r)
    }
}

/// The character n-grams of `s` and their counts.
fn grams(s: &[char], n: usize) -> HashMap<&[char], u64> {
    let mut m = HashMap::new();
    for g in s.windows(n) {
        *m.entry(g).or_insert(0) += 1;
    }
    m
}

/// chrF of one hypothesis against one reference.
pub fn chrf(hypothesis: &str, reference: &str) -> f64 {
    ChrfStats::of(hypothesis, reference).score()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two examples of the chrF metric card of Hugging Face's `datasets` (computed there
    /// with sacreBLEU): one sentence, and a corpus of two.
    #[test]
    fn matches_sacrebleu_on_its_published_examples() {
        let one = chrf(
            "The relationship between Obama and Netanyahu is not exactly friendly.",
            "The ties between Obama and Netanyahu are not particularly friendly.",
        );
        assert!((one - 61.576379378113785).abs() < 1e-9, "{one}");
        let mut corpus = ChrfStats::of(
            "The relationship between cats and dogs is not exactly friendly.",
            "The relationship between dogs and cats is not exactly friendly.",
        );
        corpus.add(&ChrfStats::of(
            "a good bookshop is just a genteel black hole that knows how to read.",
            "A good bookshop is just a genteel Black Hole that knows how to read.",
        ));
        assert!(
            (corpus.score() - 84.64214891738334).abs() < 1e-9,
            "{}",
            corpus.score()
        );
    }

    #[test]
    fn identical_text_scores_100_and_nothing_in_common_0() {
        assert!((chrf("Hautatu taula", "Hautatu  taula") - 100.0).abs() < 1e-12);
        assert_eq!(chrf("abc", "xyz"), 0.0);
        assert_eq!(chrf("", "abc"), 0.0);
    }
}
