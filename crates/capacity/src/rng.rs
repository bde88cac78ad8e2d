//! The planner's only randomness: SplitMix64 (Steele, Lea and Flood 2014), seeded by the
//! caller, so the same seed gives the same trace on every run and every target.

#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe to take the logarithm of.
    pub fn uniform_open(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Exponential with the given rate (mean 1 / rate).
    pub fn exponential(&mut self, rate: f64) -> f64 {
        -self.uniform_open().ln() / rate
    }

    /// Standard normal by Box–Muller (one of the pair; the other is discarded so a draw
    /// always consumes exactly two numbers).
    pub fn normal(&mut self) -> f64 {
        let r = (-2.0 * self.uniform_open().ln()).sqrt();
        let theta = std::f64::consts::TAU * self.uniform();
        r * theta.cos()
    }

    /// Uniform integer in [min, max], inclusive.
    pub fn between(&mut self, min: u64, max: u64) -> u64 {
        let span = max - min + 1;
        if span == 0 {
            return self.next_u64();
        }
        min + ((self.next_u64() as u128 * span as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_splitmix64_sequence() {
        // Rosetta Code's "Pseudo-random numbers/Splitmix64" task: seed 1234567.
        let mut rng = SplitMix64::new(1234567);
        let expected = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for e in expected {
            assert_eq!(rng.next_u64(), e);
        }
    }

    #[test]
    fn exponential_has_its_mean() {
        let mut rng = SplitMix64::new(9);
        let n = 200_000;
        let mean = (0..n).map(|_| rng.exponential(4.0)).sum::<f64>() / n as f64;
        assert!((mean - 0.25).abs() < 0.25 * 0.01, "{mean}");
    }
}
