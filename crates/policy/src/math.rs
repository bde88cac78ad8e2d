//! The arithmetic behind every probability a step reports, identical on every machine.
//!
//! - `exp`, `ln` and `log2` are FreeBSD's msun as the `libm` crate ports it: the code the
//!   standard library itself runs in WebAssembly. The platform's own (glibc's) `exp`
//!   differs from it in the last bit for about one argument in ten, so a record written in
//!   the browser would not replay bit for bit natively if the policy used the platform's.
//! - [`weigh`] is the softmax numerator of a whole list, e^s per value with the exponent
//!   s = (v − max) / t ([`Scale`]), vectorised and bit for bit `exp`'s. [`sum`]
//!   adds weights in eight fixed lanes. Both run the same lane code on every instruction
//!   set (the wider ones only do more lanes at once; nothing is fused), so the bits do not
//!   depend on the machine.

// In WebAssembly the standard library's functions are these same `libm` ones (the
// compiler's builtins carry them), so the page calls them rather than link a second copy.

/// e^x, FreeBSD's `e_exp.c` (less than 1 ulp from the true value).
pub fn exp(x: f64) -> f64 {
    #[cfg(target_arch = "wasm32")]
    return x.exp();
    #[cfg(not(target_arch = "wasm32"))]
    return libm::exp(x);
}

/// The natural logarithm, FreeBSD's `e_log.c`.
pub fn ln(x: f64) -> f64 {
    #[cfg(target_arch = "wasm32")]
    return x.ln();
    #[cfg(not(target_arch = "wasm32"))]
    return libm::log(x);
}

/// The base-2 logarithm, FreeBSD's `e_log2.c`.
pub fn log2(x: f64) -> f64 {
    #[cfg(target_arch = "wasm32")]
    return x.log2();
    #[cfg(not(target_arch = "wasm32"))]
    return libm::log2(x);
}

/// Lanes of [`sum`].
const LANES: usize = 8;
/// Values per block of the exp kernels: several registers' worth, so that the blocks'
/// long chains of dependent operations (the polynomial, then the division) overlap. In
/// WebAssembly, which the page builds without packed instructions, one: there the kernel is
/// [`exp`] itself, and the code stays small.
const BLOCK: usize = if cfg!(target_arch = "wasm32") { 1 } else { 32 };

/// The exponent of a value's weight, s = (v − max) / t, as every weight of a step takes
/// it: (v − max) · (1 / t) whenever 1 / t is a finite float (every t ≥ 2^-1024), else by
/// the division. A multiplication, because the division unit is the exp kernels'
/// bottleneck (`e_exp.c` divides once per value already); the two differ by at most an ulp
/// of s. The form is chosen once per list.
#[derive(Clone, Copy)]
enum Scale {
    Reciprocal { max: f64, inv_t: f64 },
    Divide { max: f64, t: f64 },
}

impl Scale {
    fn new(max: f64, t: f64) -> Scale {
        let inv_t = 1.0 / t;
        if inv_t.is_finite() {
            Scale::Reciprocal { max, inv_t }
        } else {
            Scale::Divide { max, t }
        }
    }
}

/// One of [`Scale`]'s forms as its own type, so that each kernel is compiled for one form
/// with no choice inside its loop.
trait Exponent: Copy {
    fn of(self, v: f64) -> f64;
}

#[derive(Clone, Copy)]
struct Reciprocal {
    max: f64,
    inv_t: f64,
}

impl Exponent for Reciprocal {
    #[inline(always)]
    fn of(self, v: f64) -> f64 {
        (v - self.max) * self.inv_t
    }
}

#[derive(Clone, Copy)]
struct Divide {
    max: f64,
    t: f64,
}

impl Exponent for Divide {
    #[inline(always)]
    fn of(self, v: f64) -> f64 {
        (v - self.max) / self.t
    }
}

/// Runs `$run` with `$e` bound to `scale`'s form as its own [`Exponent`] type.
macro_rules! with_exponent {
    ($scale:expr, $e:ident => $run:expr) => {
        match $scale {
            Scale::Reciprocal { max, inv_t } => {
                let $e = Reciprocal { max, inv_t };
                $run
            }
            Scale::Divide { max, t } => {
                let $e = Divide { max, t };
                $run
            }
        }
    };
}

/// Defines `$name` to run `$kernel` (`#[inline(always)]`, with the generic parameters in
/// brackets) compiled for the widest instruction set this CPU has. The kernels are loops
/// over independent values, which the compiler turns into as many packed operations as the
/// instruction set holds: the same operations, so the same bits.
macro_rules! widest {
    ($name:ident [$($g:tt)*] = $kernel:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        fn $name<$($g)*>($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512<$($g)*>($($arg: $ty),*) -> $ret {
                    $kernel($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2<$($g)*>($($arg: $ty),*) -> $ret {
                    $kernel($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F, checked on the line above.
                    #[allow(unsafe_code)]
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2, checked on the line above.
                    #[allow(unsafe_code)]
                    return unsafe { avx2($($arg),*) };
                }
            }
            $kernel($($arg),*)
        }
    };
}

pub(crate) use widest;

widest!(weigh_widest [T: Copy, F: Fn(T) -> f64 + Copy, E: Exponent]
    = weigh_lanes(values: &[T], value: F, e: E, out: &mut [f64]) -> f64);
widest!(sum_exp_widest [T: Copy, F: Fn(T) -> f64 + Copy, E: Exponent]
    = sum_exp_lanes(values: &[T], value: F, e: E) -> f64);
widest!(masks_widest [] = masks_lanes(weights: &[f64], lo: f64, hi: f64, out: &mut Vec<u64>) -> ());
widest!(buckets_widest []
    = buckets_lanes(weights: &[f64], floor: u64, shift: u32, top: u32, out: &mut [u32]) -> ());

/// One mask per 64 weights: bit j of mask k is set when `lo ≤ weights[64k + j] < hi`.
/// The compares are packed; a caller walks only the set bits.
pub(crate) fn masks(weights: &[f64], lo: f64, hi: f64, out: &mut Vec<u64>) {
    masks_widest(weights, lo, hi, out);
}

#[inline(always)]
fn masks_lanes(weights: &[f64], lo: f64, hi: f64, out: &mut Vec<u64>) {
    out.clear();
    let mask = |block: &[f64]| {
        let mut mask = 0u64;
        for (j, &w) in block.iter().enumerate() {
            mask |= u64::from(w >= lo && w < hi) << j;
        }
        mask
    };
    // Natively in blocks of exactly 64, which the compiler packs; in WebAssembly as one
    // loop, which it does not unroll.
    if cfg!(target_arch = "wasm32") {
        out.extend(weights.chunks(64).map(mask));
        return;
    }
    let blocks = weights.chunks_exact(64);
    let tail = blocks.remainder();
    out.extend(blocks.map(mask));
    if !tail.is_empty() {
        out.push(mask(tail));
    }
}

/// The indices whose bits are set in [`masks`]' output, in order.
pub(crate) fn set_bits(masks: &[u64]) -> impl Iterator<Item = usize> + '_ {
    masks.iter().enumerate().flat_map(|(k, &mask)| {
        let mut mask = mask;
        std::iter::from_fn(move || {
            (mask != 0).then(|| {
                let bit = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                64 * k + bit
            })
        })
    })
}

/// Each weight's bucket of a logarithmic histogram: 0 below the weight whose bits are
/// `floor`, then one bucket per 2^`shift` values of the bits (the bits of positive floats
/// are in the order of their values), at most `top`.
pub(crate) fn buckets(weights: &[f64], floor: u64, shift: u32, top: u32, out: &mut Vec<u32>) {
    out.resize(weights.len(), 0);
    buckets_widest(weights, floor, shift, top, out);
}

/// One weight's bucket for [`buckets`], before the cap at `top`.
#[inline(always)]
pub(crate) fn bucket(w: f64, floor: u64, shift: u32) -> u64 {
    let bits = w.to_bits();
    if bits < floor {
        0
    } else {
        ((bits - floor) >> shift) + 1
    }
}

#[inline(always)]
fn buckets_lanes(weights: &[f64], floor: u64, shift: u32, top: u32, out: &mut [u32]) {
    for (o, &w) in out.iter_mut().zip(weights) {
        *o = bucket(w, floor, shift).min(u64::from(top)) as u32;
    }
}

/// Sets `out` to e^s, s the exponent of `value(v)` ([`Scale`]), for each `v` of `values`,
/// each bit for bit [`exp`]'s; returns their [`sum`].
pub(crate) fn weigh<T: Copy>(
    values: &[T],
    value: impl Fn(T) -> f64 + Copy,
    max: f64,
    t: f64,
    out: &mut Vec<f64>,
) -> f64 {
    // Only what the buffer gains is zeroed: a buffer reused at the same length is not.
    out.resize(values.len(), 0.0);
    with_exponent!(Scale::new(max, t), e => weigh_widest(values, value, e, out))
}

/// [`weigh`]'s sum without storing the weights.
pub(crate) fn sum_exp<T: Copy>(
    values: &[T],
    value: impl Fn(T) -> f64 + Copy,
    max: f64,
    t: f64,
) -> f64 {
    with_exponent!(Scale::new(max, t), e => sum_exp_widest(values, value, e))
}

#[inline(always)]
fn sum_exp_lanes<T: Copy>(values: &[T], value: impl Fn(T) -> f64 + Copy, e: impl Exponent) -> f64 {
    exp_lanes(values, value, e, |_, _| {})
}

#[inline(always)]
fn weigh_lanes<T: Copy>(
    values: &[T],
    value: impl Fn(T) -> f64 + Copy,
    e: impl Exponent,
    out: &mut [f64],
) -> f64 {
    exp_lanes(values, value, e, |at, w| {
        out[at..at + w.len()].copy_from_slice(w)
    })
}

/// The weights of `values` in blocks, each handed to `store` with the index of its first
/// weight; returns their [`sum`].
#[inline(always)]
fn exp_lanes<T: Copy>(
    values: &[T],
    value: impl Fn(T) -> f64 + Copy,
    e: impl Exponent,
    mut store: impl FnMut(usize, &[f64]),
) -> f64 {
    let mut acc = [0.0; LANES];
    let blocks = values.chunks_exact(BLOCK);
    let tail = blocks.remainder();
    let done = values.len() - tail.len();
    for (k, block) in blocks.enumerate() {
        let w = exp_block(block, value, e);
        for j in 0..BLOCK {
            acc[(k * BLOCK + j) % LANES] += w[j];
        }
        store(k * BLOCK, &w);
    }
    for (i, &v) in tail.iter().enumerate() {
        let w = exp(e.of(value(v)));
        acc[(done + i) % LANES] += w;
        store(done + i, &[w]);
    }
    add_lanes(acc)
}

/// The weights of one block of [`BLOCK`] values.
#[inline(always)]
fn exp_block<T: Copy>(
    block: &[T],
    value: impl Fn(T) -> f64 + Copy,
    e: impl Exponent,
) -> [f64; BLOCK] {
    let mut w = [0.0; BLOCK];
    if BLOCK == 1 {
        w[0] = exp(e.of(value(block[0])));
        return w;
    }
    let mut special = false;
    for j in 0..BLOCK {
        let (x, s) = exp_lane(e.of(value(block[j])));
        w[j] = x;
        special |= s;
    }
    if special {
        for j in 0..BLOCK {
            w[j] = exp(e.of(value(block[j])));
        }
    }
    w
}

/// Σ w·s over `weights` and their exponents s ([`Scale`]), in [`sum`]'s order: the weighted mean
/// exponent that gives an entropy without a logarithm per weight.
pub(crate) fn weighted_sum<T: Copy>(
    values: &[T],
    value: impl Fn(T) -> f64,
    max: f64,
    t: f64,
    weights: &[f64],
) -> f64 {
    with_exponent!(Scale::new(max, t), e => {
        let mut acc = [0.0; LANES];
        for (i, (&v, &w)) in values.iter().zip(weights).enumerate() {
            acc[i % LANES] += w * e.of(value(v));
        }
        add_lanes(acc)
    })
}

/// The sum of `weights`, in eight lanes (weight i into lane i mod 8) that are then added
/// pairwise: a fixed order that vectorises.
pub(crate) fn sum(weights: &[f64]) -> f64 {
    let mut acc = [0.0; LANES];
    let blocks = weights.chunks_exact(LANES);
    let tail = blocks.remainder();
    for block in blocks {
        for j in 0..LANES {
            acc[j] += block[j];
        }
    }
    for (a, &w) in acc.iter_mut().zip(tail) {
        *a += w;
    }
    add_lanes(acc)
}

/// The lanes' sums, added pairwise.
#[inline(always)]
fn add_lanes(acc: [f64; LANES]) -> f64 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

// FreeBSD's `e_exp.c` constants, by their bits as `e_exp.c` gives them.
const LN2HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const INVLN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
const P1: f64 = f64::from_bits(0x3fc5_5555_5555_553e);
const P2: f64 = f64::from_bits(0xbf66_c16c_16be_bd93);
const P3: f64 = f64::from_bits(0x3f11_566a_af25_de2c);
const P4: f64 = f64::from_bits(0xbebb_bd41_c5d2_6bf1);
const P5: f64 = f64::from_bits(0x3e66_3769_72be_a4d0);
/// 1.5 · 2^52: adding it rounds a value below 2^51 to an integer, kept in the low bits.
const SHIFT: f64 = 6755399441055744.0;

/// `e_exp.c` without its branches, so that lanes vectorise: (e^x, whether x is outside
/// the range this handles and must go through [`exp`]). The branches become selects of
/// the same operations, `(int)` truncation is done by rounding through [`SHIFT`], and
/// `scalbn(y, k)` is one multiplication by 2^k, which is what `scalbn` does when k ≥ −1022
/// (true wherever |x| < 708.39).
#[inline(always)]
fn exp_lane(x: f64) -> (f64, bool) {
    let ax = x.abs();
    // |x| ≥ 708.39 (or NaN): overflow, subnormal results and NaN take the scalar path.
    let special = ax >= f64::from_bits(0x4086_232b_0000_0000) || ax.is_nan();
    // |x| > 0.5 ln 2: reduce by k = trunc(x / ln 2 ± 1/2), or by ±1 below 1.5 ln 2.
    let reduce = ax >= f64::from_bits(0x3fd6_2e43_0000_0000);
    let far = ax >= f64::from_bits(0x3ff0_a2b2_0000_0000);
    // |x| ≤ 2^-28: e^x is 1 + x.
    let tiny = ax < f64::from_bits(0x3e30_0001_0000_0000);
    let negative = x < 0.0;
    let v = INVLN2 * x + if negative { -0.5 } else { 0.5 };
    let rounded = (v + SHIFT) - SHIFT;
    // Truncation toward zero from rounding to nearest.
    let truncated = if negative {
        rounded + if rounded < v { 1.0 } else { 0.0 }
    } else {
        rounded - if rounded > v { 1.0 } else { 0.0 }
    };
    let k = if far {
        truncated
    } else if reduce {
        if negative {
            -1.0
        } else {
            1.0
        }
    } else {
        0.0
    };
    // With k = 0 these are hi = x, lo = 0 and r = x, as `e_exp.c` sets them.
    let hi = x - k * LN2HI;
    let lo = k * LN2LO;
    let r = hi - lo;
    let rr = r * r;
    let c = r - rr * (P1 + rr * (P2 + rr * (P3 + rr * (P4 + rr * P5))));
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    let k_bits = (k + SHIFT).to_bits().wrapping_sub(SHIFT.to_bits());
    let scale = f64::from_bits(k_bits.wrapping_add(0x3ff) << 52);
    (if tiny { 1.0 + x } else { y * scale }, special)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments across every branch of `e_exp.c`: the reduction thresholds, both signs,
    /// the tiny range, the edges of the vector range and beyond it, and random ones.
    fn arguments() -> Vec<f64> {
        let mut xs = vec![
            0.0,
            -0.0,
            1e-300,
            -1e-300,
            f64::MIN_POSITIVE,
            3e-9,
            -3e-9,
            3.7252902984e-09,
            -3.7252902984e-09,
            0.3465,
            -0.3465,
            0.34657359027997264,
            -0.34657359027997264,
            1.0397,
            -1.0397,
            1.0397207708399179,
            -1.0397207708399179,
            -708.39,
            -708.3964185322641,
            -708.4,
            -720.0,
            -745.13,
            -745.2,
            -1e300,
            709.0,
            709.79,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NAN,
        ];
        for bits in [
            0x3fd6_2e42_ffff_ffffu64,
            0x3fd6_2e43_0000_0000,
            0x3ff0_a2b1_ffff_ffff,
        ] {
            xs.push(f64::from_bits(bits));
            xs.push(-f64::from_bits(bits));
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            // Most weights: exponents in [-750, 0]; some across [-2, 2] and positive ones.
            xs.push(match i % 4 {
                0 | 1 => -750.0 * u,
                2 => 4.0 * u - 2.0,
                _ => 710.0 * u,
            });
        }
        xs
    }

    /// [`Scale`]'s exponent of one value.
    fn exponent(v: f64, max: f64, t: f64) -> f64 {
        match Scale::new(max, t) {
            Scale::Reciprocal { max, inv_t } => (v - max) * inv_t,
            Scale::Divide { max, t } => (v - max) / t,
        }
    }

    /// The exponent of x at max 0 and temperature 1: x itself.
    const ONE: Reciprocal = Reciprocal {
        max: 0.0,
        inv_t: 1.0,
    };

    #[test]
    fn the_vector_exp_is_libm_bit_for_bit() {
        let xs = arguments();
        let mut out = Vec::new();
        weigh(&xs, |x| x, 0.0, 1.0, &mut out);
        for (&x, &w) in xs.iter().zip(&out) {
            let want = libm::exp(x);
            assert!(
                w.to_bits() == want.to_bits() || (w.is_nan() && want.is_nan()),
                "exp({x:e}) = {w:e}, libm {want:e}"
            );
        }
        // And the baseline instruction set, which the dispatch above does not run here
        // when the CPU has a wider one.
        let mut lanes = vec![0.0; xs.len()];
        weigh_lanes(&xs, |x| x, ONE, &mut lanes);
        let same = |lanes: &[f64]| {
            lanes
                .iter()
                .zip(&out)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
        };
        assert!(same(&lanes), "the baseline instruction set");
        // And each wider one this CPU has, as `widest!` compiles them.
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        {
            #[target_feature(enable = "avx2")]
            fn avx2(xs: &[f64], out: &mut [f64]) {
                weigh_lanes(xs, |x| x, ONE, out);
            }
            #[target_feature(enable = "avx512f")]
            fn avx512(xs: &[f64], out: &mut [f64]) {
                weigh_lanes(xs, |x| x, ONE, out);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                lanes.fill(0.0);
                // SAFETY: the CPU has AVX2, checked on the line above.
                unsafe { avx2(&xs, &mut lanes) };
                assert!(same(&lanes), "AVX2");
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                lanes.fill(0.0);
                // SAFETY: the CPU has AVX-512F, checked on the line above.
                unsafe { avx512(&xs, &mut lanes) };
                assert!(same(&lanes), "AVX-512");
            }
        }
    }

    #[test]
    fn weigh_shifts_and_scales_before_the_exp() {
        let logits = [1.0f32, 3.0, 2.0, -1e30, 2.5, 0.0, 1.5, 2.25, 2.75, -4.0];
        let mut out = Vec::new();
        weigh(&logits, f64::from, 3.0, 0.7, &mut out);
        for (&l, &w) in logits.iter().zip(&out) {
            let s = (f64::from(l) - 3.0) * (1.0 / 0.7);
            assert_eq!(s.to_bits(), exponent(f64::from(l), 3.0, 0.7).to_bits());
            assert_eq!(w.to_bits(), exp(s).to_bits());
        }
        assert_eq!(out[1], 1.0);
        assert_eq!(out[3], 0.0);
        // Below 2^-1024 the reciprocal overflows and the temperature divides.
        let t = 1e-310;
        weigh(&logits, f64::from, 3.0, t, &mut out);
        for (&l, &w) in logits.iter().zip(&out) {
            let s = (f64::from(l) - 3.0) / t;
            assert_eq!(s.to_bits(), exponent(f64::from(l), 3.0, t).to_bits());
            assert_eq!(w.to_bits(), exp(s).to_bits());
        }
        assert_eq!(out[1], 1.0);
    }

    #[test]
    fn sum_exp_is_weigh_then_sum() {
        let logits: Vec<f32> = (0..1003)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0)
            .collect();
        let mut weights = Vec::new();
        let total = weigh(&logits, f64::from, 27.0, 0.9, &mut weights);
        let summed = sum_exp(&logits, f64::from, 27.0, 0.9);
        assert_eq!(summed.to_bits(), sum(&weights).to_bits());
        assert_eq!(total.to_bits(), summed.to_bits());
    }

    #[test]
    fn the_sum_has_a_fixed_order() {
        let weights: Vec<f64> = (0..21).map(|i| 1.0 / (i as f64 + 1.0)).collect();
        let mut lanes = [0.0; LANES];
        for (i, w) in weights.iter().enumerate() {
            lanes[i % LANES] += w;
        }
        let want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
            + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        assert_eq!(sum(&weights).to_bits(), want.to_bits());
        assert_eq!(sum(&[]), 0.0);
        assert_eq!(sum(&[0.25]), 0.25);
    }
}
