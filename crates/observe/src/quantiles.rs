//! Nearest-rank quantiles in bounded memory: exact while a group holds at most
//! [`EXACT_LIMIT`] values, then a log-bucketed histogram whose answer is within
//! [`RELATIVE_RESOLUTION`] of the exact one.
//!
//! The nearest-rank p-quantile of n sorted values is the value at rank ⌈p · n⌉ (1-based),
//! as `capacity`'s percentiles and the chapter's p99 use it. A histogram bucket covers
//! [b^k, b^(k+1)) with b = 1 + [`RELATIVE_RESOLUTION`]; its answer is the bucket's
//! geometric middle, within b^½ − 1 of any value in it. Zero and below share one bucket.

use serde::{Deserialize, Serialize};

/// Values a group keeps exactly before it folds them into the histogram.
pub const EXACT_LIMIT: usize = 65_536;

/// The width of a histogram bucket, relative to its lower edge.
pub const RELATIVE_RESOLUTION: f64 = 1.0 / 256.0;

/// Nearest-rank quantiles of a stream of non-negative values.
#[derive(Clone, Debug, Default)]
pub struct Quantiles {
    exact: Vec<f64>,
    /// Counts by bucket index once folded; `zeros` counts values at or below 0.
    buckets: std::collections::BTreeMap<i32, u64>,
    zeros: u64,
    count: u64,
    folded: bool,
}

/// A quantile as reported: the value, and whether it is exact.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quantile {
    pub value: f64,
    pub exact: bool,
}

impl Quantiles {
    pub fn push(&mut self, value: f64) {
        self.count += 1;
        if self.folded {
            self.add_to_histogram(value);
            return;
        }
        self.exact.push(value);
        if self.exact.len() > EXACT_LIMIT {
            self.folded = true;
            for v in std::mem::take(&mut self.exact) {
                self.add_to_histogram(v);
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    fn add_to_histogram(&mut self, value: f64) {
        if value > 0.0 {
            *self.buckets.entry(bucket(value)).or_insert(0) += 1;
        } else {
            self.zeros += 1;
        }
    }

    /// The nearest-rank `p`-quantile (p in (0, 1]); `None` for no values.
    pub fn quantile(&self, p: f64) -> Option<Quantile> {
        if self.count == 0 {
            return None;
        }
        let rank = policy::nearest_rank(p, self.count);
        if !self.folded {
            let mut sorted = self.exact.clone();
            sorted.sort_unstable_by(f64::total_cmp);
            return Some(Quantile {
                value: sorted[(rank - 1) as usize],
                exact: true,
            });
        }
        let mut seen = self.zeros;
        if rank <= seen {
            return Some(Quantile {
                value: 0.0,
                exact: false,
            });
        }
        for (&k, &n) in &self.buckets {
            seen += n;
            if rank <= seen {
                return Some(Quantile {
                    value: middle(k),
                    exact: false,
                });
            }
        }
        None
    }
}

fn base() -> f64 {
    1.0 + RELATIVE_RESOLUTION
}

fn bucket(value: f64) -> i32 {
    (value.ln() / base().ln()).floor() as i32
}

fn middle(k: i32) -> f64 {
    base().powf(k as f64 + 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(values: &[f64], p: f64) -> f64 {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
    }

    #[test]
    fn few_values_are_exact_nearest_rank() {
        let mut q = Quantiles::default();
        for v in [5.0, 1.0, 4.0, 2.0, 3.0] {
            q.push(v);
        }
        // n = 5: p50 is rank 3, p99 rank 5, p20 rank 1.
        assert_eq!(
            q.quantile(0.5),
            Some(Quantile {
                value: 3.0,
                exact: true
            })
        );
        assert_eq!(q.quantile(0.99).unwrap().value, 5.0);
        assert_eq!(q.quantile(0.2).unwrap().value, 1.0);
        assert_eq!(Quantiles::default().quantile(0.5), None);
    }

    #[test]
    fn many_values_are_within_the_resolution_of_the_direct_computation() {
        // A deterministic spread over four decades, past the exact limit.
        let values: Vec<f64> = (0..EXACT_LIMIT as u64 * 3)
            .map(|i| {
                0.01 * 10f64.powf((i.wrapping_mul(2_654_435_761) % 1_000_003) as f64 / 250_000.0)
            })
            .collect();
        let mut q = Quantiles::default();
        for &v in &values {
            q.push(v);
        }
        for p in [0.5, 0.9, 0.99, 0.999] {
            let got = q.quantile(p).unwrap();
            assert!(!got.exact);
            let want = direct(&values, p);
            let bound = (1.0 + RELATIVE_RESOLUTION).sqrt() - 1.0;
            assert!(
                (got.value / want - 1.0).abs() <= bound + 1e-12,
                "p{p}: {} vs {want}",
                got.value
            );
        }
    }
}
