//! Peers and floors for the policy benchmarks: the shared, deterministic input that the
//! policy crate, candle's `LogitsProcessor` and a plain memory-read floor all measure on.

#![forbid(unsafe_code)]

/// Deterministic pseudo-random logits of length `vocab`, roughly normal with mean 0 and
/// standard deviation `std` (a real model's final-position spread is about 2).
///
/// A xorshift64* stream feeds a sum of four uniforms (Irwin-Hall), rescaled to unit
/// variance: no dependency, identical on every platform, and the same for every
/// contender given the same `seed`.
pub fn logits(vocab: usize, seed: u64, std: f32) -> Vec<f32> {
    let mut rng = XorShift64Star::new(seed);
    // The sum of 4 U(0,1) has mean 2 and variance 4/12 = 1/3.
    let scale = std * 3f32.sqrt();
    (0..vocab)
        .map(|_| {
            let sum: f32 = (0..4).map(|_| rng.next_unit()).sum();
            (sum - 2.0) * scale
        })
        .collect()
}

/// Marsaglia's xorshift64* generator; never zero-seeded.
#[derive(Clone, Debug)]
pub struct XorShift64Star(u64);

impl XorShift64Star {
    pub fn new(seed: u64) -> XorShift64Star {
        // SplitMix64's first draw (its finaliser of `seed` plus one step) mixes small seeds
        // well; xorshift needs a non-zero state.
        let z = policy::SplitMix64::new(seed).next_u64();
        XorShift64Star(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform in [0, 1) with 24 bits of precision.
    pub fn next_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logits_are_deterministic_with_the_requested_spread() {
        let a = logits(100_000, 42, 2.0);
        assert_eq!(a, logits(100_000, 42, 2.0));
        assert_ne!(a, logits(100_000, 43, 2.0));
        let n = a.len() as f64;
        let mean = a.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = a
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((var.sqrt() - 2.0).abs() < 0.05, "std {}", var.sqrt());
    }
}
