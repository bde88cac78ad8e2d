//! Eight f32 lanes as a plain array. Kernels written over them are compiled twice: as is
//! (SSE2 on x86_64, wasm32) and inside `#[target_feature(enable = "avx")]` functions chosen
//! at run time, where the compiler turns each lane-wise operation into one 256-bit
//! instruction. No intrinsics: they would not inline into helpers compiled without the
//! feature. Every operation is one IEEE-754 operation per lane (no fused multiply-add, no
//! approximate reciprocals), so both builds give the same bits: runs replay on any machine.

/// Eight f32 lanes and the lane-wise operations the kernels use.
pub(crate) trait Lanes: Copy {
    fn zero() -> Self;
    fn splat(v: f32) -> Self;
    /// Reads `s[..8]`.
    fn load(s: &[f32]) -> Self;
    /// Reads `p[..8]`.
    ///
    /// # Safety
    /// Eight values must be readable at `p`.
    unsafe fn load_ptr(p: *const f32) -> Self;
    /// Reads `p[..8]` widened to f32.
    ///
    /// # Safety
    /// Eight values must be readable at `p`.
    unsafe fn load_i8_ptr(p: *const i8) -> Self;
    /// Writes the lanes to `s[..8]`.
    fn store(self, s: &mut [f32]);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// `if self > o { self } else { o }` per lane (as `maxps`).
    fn max(self, o: Self) -> Self;
    /// `if self < o { self } else { o }` per lane (as `minps`).
    fn min(self, o: Self) -> Self;
    /// `2^n` for lanes holding whole numbers in −126..=127.
    fn pow2(n: Self) -> Self;
    fn to_array(self) -> [f32; 8];
}

/// The portable lanes: plain arrays, which the compiler vectorises as it can.
#[derive(Clone, Copy)]
pub(crate) struct Portable([f32; 8]);

/// A lane-wise binary operation as a plain loop (closures might not be inlined into the
/// AVX-compiled callers, and would then run without AVX).
macro_rules! lanewise {
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {{
        let (mut out, other) = ($a.0, $b.0);
        for j in 0..8 {
            let ($x, $y) = (out[j], other[j]);
            out[j] = $body;
        }
        Portable(out)
    }};
}

impl Lanes for Portable {
    #[inline(always)]
    fn zero() -> Self {
        Portable([0.0; 8])
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        Portable([v; 8])
    }
    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        let mut a = [0.0; 8];
        a.copy_from_slice(&s[..8]);
        Portable(a)
    }
    #[inline(always)]
    unsafe fn load_ptr(p: *const f32) -> Self {
        // SAFETY: the caller guarantees eight readable values.
        Portable(unsafe { p.cast::<[f32; 8]>().read_unaligned() })
    }
    #[inline(always)]
    unsafe fn load_i8_ptr(p: *const i8) -> Self {
        // SAFETY: the caller guarantees eight readable values.
        let q = unsafe { p.cast::<[i8; 8]>().read_unaligned() };
        let mut out = [0.0; 8];
        for (o, q) in out.iter_mut().zip(q) {
            *o = f32::from(q);
        }
        Portable(out)
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        s[..8].copy_from_slice(&self.0);
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        lanewise!(self, o, |a, b| a + b)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        lanewise!(self, o, |a, b| a - b)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        lanewise!(self, o, |a, b| a * b)
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        lanewise!(self, o, |a, b| a / b)
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        lanewise!(self, o, |a, b| if a > b { a } else { b })
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        lanewise!(self, o, |a, b| if a < b { a } else { b })
    }
    #[inline(always)]
    fn pow2(n: Self) -> Self {
        // 2^23 + 127 + n has 127 + n in its low mantissa bits (exactly: it lies in
        // 2^23..2^24, where the spacing is 1); shifted up, they are the exponent of 2^n.
        // No float-to-int conversion, which would not vectorise.
        let mut out = n.0;
        for v in &mut out {
            *v = f32::from_bits((*v + 8_388_735.0).to_bits() << 23);
        }
        Portable(out)
    }
    #[inline(always)]
    fn to_array(self) -> [f32; 8] {
        self.0
    }
}

/// `e^x` per lane, to about 2 ulp (Cephes' `expf`: Cody–Waite reduction by ln 2 and a
/// degree-6 polynomial), from additions and multiplications only so that every target
/// gives the same bits. Inputs are clamped to −87..=88, so it never returns 0 or ∞.
#[inline(always)]
pub(crate) fn exp<V: Lanes>(x: V) -> V {
    // Adding then subtracting 1.5 · 2^23 rounds to the nearest whole number.
    const ROUND: f32 = 12_582_912.0;
    // The bound first, so that a NaN lane stays NaN (`max` and `min` return their second
    // operand when a lane compares false) instead of becoming e^-87: attention over a NaN
    // score must not quietly turn into an average. Finite lanes are unchanged.
    let x = V::splat(88.0).min(V::splat(-87.0).max(x));
    let n = x
        .mul(V::splat(std::f32::consts::LOG2_E))
        .add(V::splat(ROUND))
        .sub(V::splat(ROUND));
    let r = x
        .sub(n.mul(V::splat(0.693_359_4)))
        .sub(n.mul(V::splat(-2.121_944_4e-4)));
    let mut p = V::splat(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = p.mul(r).add(V::splat(c));
    }
    p.mul(r.mul(r)).add(r).add(V::splat(1.0)).mul(V::pow2(n))
}

/// The lanes summed left to right, then `tail`: how every dot product here ends. The
/// tail is 0 when the length is a multiple of eight.
#[inline(always)]
pub(crate) fn finish(lanes: [f32; 8], tail: f32) -> f32 {
    let mut s = lanes[0];
    for v in &lanes[1..] {
        s += v;
    }
    s + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_close_to_the_library_one() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = exp(Portable::splat(x)).to_array()[0] as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.013;
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert_eq!(exp(Portable::splat(0.0)).to_array()[0], 1.0);
        assert!(exp(Portable::splat(-1000.0)).to_array()[0] > 0.0);
        assert!(exp(Portable::splat(1000.0)).to_array()[0].is_finite());
        // A NaN stays NaN (attention over a NaN score must not look like an average).
        assert!(exp(Portable::splat(f32::NAN)).to_array()[0].is_nan());
        assert!(exp(Portable::splat(f32::INFINITY)).to_array()[0].is_finite());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx_exp_equals_the_portable_one() {
        if !std::is_x86_feature_detected!("avx") {
            return;
        }
        #[target_feature(enable = "avx")]
        fn run(xs: &[f32], out: &mut [f32]) {
            for (x, o) in xs.chunks_exact(8).zip(out.chunks_exact_mut(8)) {
                exp(Portable::load(x)).store(o);
            }
        }
        let xs: Vec<f32> = (0..8000).map(|i| (i as f32 - 4000.0) * 0.0271).collect();
        let mut fast = vec![0.0; xs.len()];
        // SAFETY: AVX was detected above.
        unsafe { run(&xs, &mut fast) };
        let portable: Vec<f32> = xs
            .chunks_exact(8)
            .flat_map(|x| exp(Portable::load(x)).to_array())
            .collect();
        assert_eq!(fast, portable);
    }
}
