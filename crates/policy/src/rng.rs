//! The project's seeded generators, and its only randomness: a seed fully determines every
//! draw, on every target.
//!
//! - [`NumpyRng`]: NumPy's `default_rng`, bit for bit: PCG64 (XSL-RR) seeded through
//!   `SeedSequence`, `Generator.random()` doubles and `Generator.choice(a, p=...)`. The
//!   sampler draws from it, so a run record's seed is enough to replay a run.
//! - [`SplitMix64`]: small and fast, for what need not match NumPy: the capacity planner's
//!   traces, the trainer's weights and batches, the mutation campaigns of the parser tests.

/// The 128-bit LCG multiplier PCG64 uses (`PCG_DEFAULT_MULTIPLIER_128`).
const PCG_MULTIPLIER: u128 = (2549297995355413924u128 << 64) | 4865540595714422341u128;

/// Constants of NumPy's `SeedSequence` hash (numpy/random/bit_generator.pyx).
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

/// NumPy's `SeedSequence(entropy)` with no spawn key, reduced to what PCG64 needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

impl SeedSequence {
    /// Mixes an integer seed into the entropy pool exactly as NumPy does.
    pub fn new(entropy: u64) -> SeedSequence {
        // `_coerce_to_uint32_array`: little-endian 32-bit words, at least one word.
        let words: Vec<u32> = if entropy >> 32 == 0 {
            vec![entropy as u32]
        } else {
            vec![entropy as u32, (entropy >> 32) as u32]
        };
        let mut hash_const = INIT_A;
        let mut hashmix = |value: u32| -> u32 {
            let mut value = value ^ hash_const;
            hash_const = hash_const.wrapping_mul(MULT_A);
            value = value.wrapping_mul(hash_const);
            value ^ (value >> XSHIFT)
        };
        let mut pool = [0u32; POOL_SIZE];
        for (i, slot) in pool.iter_mut().enumerate() {
            *slot = hashmix(words.get(i).copied().unwrap_or(0));
        }
        for src in 0..POOL_SIZE {
            for dst in 0..POOL_SIZE {
                if src != dst {
                    let hashed = hashmix(pool[src]);
                    pool[dst] = mix(pool[dst], hashed);
                }
            }
        }
        // Entropy words beyond the pool size (never more than two here) are mixed in last.
        for &word in words.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                let hashed = hashmix(word);
                *slot = mix(*slot, hashed);
            }
        }
        SeedSequence { pool }
    }

    /// `generate_state(n_words, np.uint32)`.
    pub fn generate_state_u32(&self, n_words: usize) -> Vec<u32> {
        let mut hash_const = INIT_B;
        (0..n_words)
            .map(|i| {
                let mut value = self.pool[i % POOL_SIZE] ^ hash_const;
                hash_const = hash_const.wrapping_mul(MULT_B);
                value = value.wrapping_mul(hash_const);
                value ^ (value >> XSHIFT)
            })
            .collect()
    }

    /// `generate_state(n_words, np.uint64)`: pairs of 32-bit words, low word first.
    pub fn generate_state_u64(&self, n_words: usize) -> Vec<u64> {
        self.generate_state_u32(n_words * 2)
            .chunks_exact(2)
            .map(|pair| u64::from(pair[0]) | (u64::from(pair[1]) << 32))
            .collect()
    }
}

fn mix(x: u32, y: u32) -> u32 {
    let result = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    result ^ (result >> XSHIFT)
}

/// The PCG64 bit generator (128-bit LCG state, XSL-RR output), NumPy's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pcg64 {
    state: u128,
    increment: u128,
}

impl Pcg64 {
    /// `PCG64(SeedSequence(seed))`.
    pub fn from_seed_sequence(seq: &SeedSequence) -> Pcg64 {
        let words = seq.generate_state_u64(4);
        let initstate = (u128::from(words[0]) << 64) | u128::from(words[1]);
        let initseq = (u128::from(words[2]) << 64) | u128::from(words[3]);
        let mut rng = Pcg64 {
            state: 0,
            increment: (initseq << 1) | 1,
        };
        rng.step();
        rng.state = rng.state.wrapping_add(initstate);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self
            .state
            .wrapping_mul(PCG_MULTIPLIER)
            .wrapping_add(self.increment);
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let folded = ((self.state >> 64) as u64) ^ (self.state as u64);
        folded.rotate_right((self.state >> 122) as u32)
    }
}

/// `numpy.random.default_rng(seed)`: the generator a run's seed names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumpyRng {
    bits: Pcg64,
}

impl NumpyRng {
    /// `np.random.default_rng(seed)`.
    pub fn new(seed: u64) -> NumpyRng {
        NumpyRng {
            bits: Pcg64::from_seed_sequence(&SeedSequence::new(seed)),
        }
    }

    /// `Generator.random()`: a double in [0, 1) with 53 random bits.
    pub fn random(&mut self) -> f64 {
        (self.bits.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

/// The index `Generator.choice(len(p), p=p)` picks for the uniform draw `u`: cumulative
/// sum, normalised by its last element, then `searchsorted(u, side="right")`: the first
/// index whose bound ([`choice_bounds`]) exceeds `u`.
///
/// `weights` must be non-negative with a positive sum (the caller validated them).
pub fn choice_index(weights: impl IntoIterator<Item = f64> + Clone, u: f64) -> usize {
    let mut last = 0;
    for (i, bound) in choice_bounds(weights).enumerate() {
        if bound > u {
            return i;
        }
        last = i;
    }
    last
}

/// [`choice_index`] over a slice, bit for bit: the cumulative sums are taken once, into
/// `cumulative`, and searched by bisection (each bound is a cumulative sum over the last,
/// so the bounds do not decrease).
pub fn choice_index_of(weights: &[f64], u: f64, cumulative: &mut Vec<f64>) -> usize {
    cumulative.clear();
    let mut sum = 0.0;
    cumulative.extend(weights.iter().map(|&w| {
        sum += w;
        sum
    }));
    // The weights are finite and their sum positive, so no bound is NaN.
    let at = cumulative.partition_point(|&c| c / sum <= u);
    at.min(weights.len().saturating_sub(1))
}

/// The upper end of each index's interval of [0, 1) under `Generator.choice`: the cumulative
/// sum of the weights over their total. Index i takes the draws in [bound(i − 1), bound(i)),
/// which is how the lab draws the uniform landing on a token.
pub fn choice_bounds(weights: impl IntoIterator<Item = f64> + Clone) -> impl Iterator<Item = f64> {
    let total: f64 = weights.clone().into_iter().sum();
    weights.into_iter().scan(0.0, move |cumulative, w| {
        *cumulative += w;
        Some(*cumulative / total)
    })
}

/// SplitMix64 (Steele, Lea and Flood 2014): a 64-bit counter stepped by the golden gamma and
/// passed through a mixing finaliser. Its streams are part of what the project reproduces
/// (capacity traces, trained weights, mutation cases), so no method may change the draws it
/// makes or their order.
///
/// ```
/// use policy::SplitMix64;
///
/// let mut rng = SplitMix64::new(1234567);
/// assert_eq!(rng.next_u64(), 6457827717110365317);
/// assert!((0.0..1.0).contains(&rng.uniform()));
/// assert!(rng.below(10) < 10);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
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
    fn uniform_open(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Uniform in `0..n` by multiply-shift (Lemire), one draw each; the bias, below
    /// n / 2^64, is negligible for the ranges drawn here. `below(0)` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_index_of_is_choice_index() {
        let mut rng = NumpyRng::new(11);
        let mut cumulative = Vec::new();
        for n in [1usize, 2, 3, 7, 64, 1000] {
            for _ in 0..200 {
                // Some zero weights, and draws at every bound as well as random ones.
                let weights: Vec<f64> = (0..n)
                    .map(|_| {
                        let x = rng.random();
                        if x < 0.2 {
                            0.0
                        } else {
                            x
                        }
                    })
                    .map(|x| if n == 1 { x + 0.5 } else { x })
                    .collect();
                if weights.iter().sum::<f64>() == 0.0 {
                    continue;
                }
                let mut draws: Vec<f64> = choice_bounds(weights.iter().copied())
                    .filter(|&b| b < 1.0)
                    .collect();
                draws.extend([0.0, rng.random(), rng.random(), 1.0 - f64::EPSILON / 2.0]);
                for u in draws {
                    assert_eq!(
                        choice_index_of(&weights, u, &mut cumulative),
                        choice_index(weights.iter().copied(), u),
                        "{weights:?} at {u}"
                    );
                }
            }
        }
    }

    // Reference values printed by NumPy 2.4.6 for
    // `np.random.SeedSequence(s).generate_state(4)` and `np.random.default_rng(s).random(n)`.
    #[test]
    fn seed_sequence_matches_numpy() {
        assert_eq!(
            SeedSequence::new(7).generate_state_u32(4),
            [2083679832, 3939563265, 4185785210, 142198000]
        );
        // A seed above 2**32 takes two entropy words.
        assert_eq!(
            SeedSequence::new((1 << 40) + 5).generate_state_u32(4),
            [3767146251, 3672381269, 2127416108, 2216012776]
        );
    }

    #[test]
    fn random_matches_numpy() {
        let draws = |seed: u64, n: usize| {
            let mut rng = NumpyRng::new(seed);
            (0..n).map(|_| rng.random()).collect::<Vec<f64>>()
        };
        assert_eq!(
            draws(7, 3),
            [0.625095466604667, 0.8972138009695755, 0.7756856902451935]
        );
        assert_eq!(draws(0, 2), [0.6369616873214543, 0.2697867137638703]);
        assert_eq!(
            draws((1 << 40) + 5, 2),
            [0.004739459374490829, 0.3725845824112115]
        );
    }

    #[test]
    fn choice_searches_to_the_right() {
        // cdf = [0.25, 0.5, 1.0]: a draw equal to a boundary falls into the next bin.
        let weights = [0.25, 0.25, 0.5];
        assert_eq!(choice_index(weights, 0.0), 0);
        assert_eq!(choice_index(weights, 0.25), 1);
        assert_eq!(choice_index(weights, 0.49), 1);
        assert_eq!(choice_index(weights, 0.5), 2);
        assert_eq!(choice_index(weights, 0.999), 2);
    }
    #[test]
    fn splitmix64_matches_the_published_sequence() {
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
    fn splitmix64_distributions_have_their_moments() {
        let mut rng = SplitMix64::new(9);
        let n = 200_000;
        let mean = (0..n).map(|_| rng.exponential(4.0)).sum::<f64>() / n as f64;
        assert!((mean - 0.25).abs() < 0.25 * 0.01, "{mean}");

        let mut rng = SplitMix64::new(1);
        let n = 20_000;
        let xs: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }

    #[test]
    fn splitmix64_below_stays_in_range_and_zero_gives_zero() {
        let mut rng = SplitMix64::new(3);
        assert!((0..1000).all(|_| rng.below(5) < 5));
        assert_eq!(rng.below(0), 0);
        // Multiply-shift keeps the high bits: `below(2^32)` is the top half of the draw.
        let (mut a, mut b) = (SplitMix64::new(4), SplitMix64::new(4));
        assert_eq!(a.below(1 << 32), b.next_u64() >> 32);
    }
}
