//! Fixed histograms for distributions compared across versions (the same edges for every
//! version, so a drift statistic compares like with like).

use serde::{Deserialize, Serialize};

/// A histogram over fixed edges: bin i holds values in [edges[i], edges[i + 1]); the last
/// bin also holds everything at or past the last edge, and the first everything below.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bins {
    pub edges: Vec<f64>,
    pub counts: Vec<u64>,
}

impl Bins {
    /// Bins of `width` from `start`, `n` of them.
    pub fn linear(start: f64, width: f64, n: usize) -> Bins {
        Bins {
            edges: (0..=n).map(|i| start + width * i as f64).collect(),
            counts: vec![0; n],
        }
    }

    /// Bins [1, 2), [2, 4), … [2^(n−1), ∞): counts and lengths, which spread over decades.
    pub fn powers_of_two(n: usize) -> Bins {
        Bins {
            edges: (0..=n).map(|i| 2f64.powi(i as i32)).collect(),
            counts: vec![0; n],
        }
    }

    pub fn push(&mut self, value: f64) {
        let last = self.counts.len() - 1;
        // The edges are sorted: the bin is the number of inner edges at or below the value.
        let i = self.edges[1..self.edges.len() - 1]
            .partition_point(|&edge| edge <= value)
            .min(last);
        self.counts[i] += 1;
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The population stability index of `self` (the candidate) against `baseline`:
    /// Σ (c − b) · ln(c / b) over the bins' shares, each share floored at 1e-4 so an empty
    /// bin does not make it infinite (the convention of credit-scoring practice, where
    /// 0.1 is a moderate and 0.25 a large shift). `None` when either side is empty or the
    /// edges differ.
    pub fn psi(&self, baseline: &Bins) -> Option<f64> {
        let (n, m) = (self.total(), baseline.total());
        if n == 0 || m == 0 || self.edges != baseline.edges {
            return None;
        }
        let floor = 1e-4;
        Some(
            self.counts
                .iter()
                .zip(&baseline.counts)
                .map(|(&c, &b)| {
                    let c = (c as f64 / n as f64).max(floor);
                    let b = (b as f64 / m as f64).max(floor);
                    (c - b) * (c / b).ln()
                })
                .sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_their_bins_and_the_ends_catch_the_rest() {
        let mut b = Bins::linear(0.0, 0.5, 4);
        for v in [-1.0, 0.0, 0.49, 0.5, 1.99, 2.0, 100.0] {
            b.push(v);
        }
        assert_eq!(b.counts, [3, 1, 0, 3]);
        let mut p = Bins::powers_of_two(3);
        for v in [1.0, 2.0, 3.0, 4.0, 1000.0, 0.0] {
            p.push(v);
        }
        assert_eq!(p.counts, [2, 2, 2]);
    }

    #[test]
    fn psi_is_the_formula_and_zero_for_the_same_shape() {
        let mut a = Bins::linear(0.0, 1.0, 2);
        let mut b = Bins::linear(0.0, 1.0, 2);
        for _ in 0..3 {
            a.push(0.5);
        }
        a.push(1.5);
        b.push(0.5);
        b.push(1.5);
        // Shares (0.75, 0.25) against (0.5, 0.5).
        let want = (0.75 - 0.5) * (0.75f64 / 0.5).ln() + (0.25 - 0.5) * (0.25f64 / 0.5).ln();
        assert!((a.psi(&b).unwrap() - want).abs() < 1e-15);
        assert_eq!(b.psi(&b), Some(0.0));
        assert_eq!(a.psi(&Bins::linear(0.0, 2.0, 2)), None);
    }
}
