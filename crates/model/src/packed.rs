//! Weight matrices repacked for the forward pass: transposed to `[cols][rows]`, rows padded
//! to a multiple of eight, so that eight output rows are the eight lanes of a vector and a
//! product is a sum of broadcast inputs times weight vectors: no horizontal reductions and
//! no scalar tails.
//!
//! Every output is `Σ_c x[c] · w[r][c]` summed over `c` in order, starting from 0 (then
//! times the row's scale for int8), whatever the tile it falls in, the number of positions
//! in the block, the thread that computes it or the CPU's vector width.

use crate::simd::{Lanes, Portable};
use crate::{Linear, Weights};

/// The matrices of the model, packed.
#[derive(Clone, Debug)]
pub(crate) struct PackedWeights {
    pub(crate) layers: Vec<PackedLayer>,
    /// The tied embedding, as the output projection.
    pub(crate) embed: Packed,
}

#[derive(Clone, Debug)]
pub(crate) struct PackedLayer {
    pub(crate) q: Packed,
    pub(crate) k: Packed,
    pub(crate) v: Packed,
    pub(crate) o: Packed,
    pub(crate) gate: Packed,
    pub(crate) up: Packed,
    pub(crate) down: Packed,
}

impl PackedWeights {
    pub(crate) fn new(w: &Weights) -> PackedWeights {
        PackedWeights {
            layers: w
                .layers
                .iter()
                .map(|l| PackedLayer {
                    q: Packed::new(&l.q),
                    k: Packed::new(&l.k),
                    v: Packed::new(&l.v),
                    o: Packed::new(&l.o),
                    gate: Packed::new(&l.gate),
                    up: Packed::new(&l.up),
                    down: Packed::new(&l.down),
                })
                .collect(),
            embed: Packed::new(&w.embed),
        }
    }
}

/// A [`Linear`] transposed and padded.
#[derive(Clone, Debug)]
pub(crate) struct Packed {
    rows: usize,
    cols: usize,
    /// `rows` rounded up to a multiple of 8: the stride of `data`.
    padded: usize,
    data: PackedData,
}

#[derive(Clone, Debug)]
enum PackedData {
    F32(Vec<f32>),
    Int8 { data: Vec<i8>, scales: Vec<f32> },
}

impl Packed {
    pub(crate) fn new(m: &Linear) -> Packed {
        let (rows, cols) = (m.rows(), m.cols());
        let padded = rows.next_multiple_of(8);
        fn transpose<T: Copy + Default>(
            d: &[T],
            rows: usize,
            cols: usize,
            padded: usize,
        ) -> Vec<T> {
            let mut t = vec![T::default(); cols * padded];
            for r in 0..rows {
                for c in 0..cols {
                    t[c * padded + r] = d[r * cols + c];
                }
            }
            t
        }
        let data = match m {
            Linear::F32 { data, .. } => PackedData::F32(transpose(data, rows, cols, padded)),
            Linear::Int8 { data, scales, .. } => {
                let mut s = scales.clone();
                s.resize(padded, 0.0);
                PackedData::Int8 {
                    data: transpose(data, rows, cols, padded),
                    scales: s,
                }
            }
        };
        Packed {
            rows,
            cols,
            padded,
            data,
        }
    }

    /// `out[t][r] = row_r · xs[t]` for a block of positions (`xs` is `[n][cols]`, `out`
    /// `[n][rows]`).
    pub(crate) fn matmul(&self, xs: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX, checked just above.
            return unsafe { self.matmul_avx(xs, out) };
        }
        self.matmul_with::<Portable>(xs, out);
    }

    /// `matmul` compiled for AVX: the same lane operations, so the same bits.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn matmul_avx(&self, xs: &[f32], out: &mut [f32]) {
        self.matmul_with::<Portable>(xs, out);
    }

    /// What `matmul` runs without AVX (tests compare the two).
    pub(crate) fn matmul_portable(&self, xs: &[f32], out: &mut [f32]) {
        self.matmul_with::<Portable>(xs, out);
    }

    #[inline(always)]
    fn matmul_with<V: Lanes>(&self, xs: &[f32], out: &mut [f32]) {
        match &self.data {
            PackedData::F32(w) => self.gemm::<V, f32>(w, None, xs, out),
            PackedData::Int8 { data, scales } => self.gemm::<V, i8>(data, Some(scales), xs, out),
        }
    }

    #[inline(always)]
    fn gemm<V: Lanes, W: Weight>(
        &self,
        w: &[W],
        scales: Option<&[f32]>,
        xs: &[f32],
        out: &mut [f32],
    ) {
        let (rows, cols, padded) = (self.rows, self.cols, self.padded);
        let n = xs.len() / cols;
        assert!(w.len() >= cols * padded && xs.len() >= n * cols && out.len() >= n * rows);
        assert!(scales.is_none_or(|s| s.len() >= padded));
        let mut t = 0;
        while t + P <= n {
            let mut r = 0;
            while r + 8 * R <= padded {
                let acc = tile::<V, W, P, R>(w, padded, cols, xs, t, r);
                store::<V, P, R>(&acc, scales, out, rows, t, r);
                r += 8 * R;
            }
            while r < padded {
                let acc = tile::<V, W, P, 1>(w, padded, cols, xs, t, r);
                store::<V, P, 1>(&acc, scales, out, rows, t, r);
                r += 8;
            }
            t += P;
        }
        while t < n {
            let mut r = 0;
            while r + 8 * R1 <= padded {
                let acc = tile::<V, W, 1, R1>(w, padded, cols, xs, t, r);
                store::<V, 1, R1>(&acc, scales, out, rows, t, r);
                r += 8 * R1;
            }
            while r < padded {
                let acc = tile::<V, W, 1, 1>(w, padded, cols, xs, t, r);
                store::<V, 1, 1>(&acc, scales, out, rows, t, r);
                r += 8;
            }
            t += 1;
        }
    }
}

/// Positions and row vectors (of eight rows) per tile in blocks, and row vectors for lone
/// positions.
const P: usize = 4;
const R: usize = 2;
const R1: usize = 4;

/// A weight type the kernels read eight at a time.
pub(crate) trait Weight: Copy {
    /// # Safety
    /// Eight values must be readable at `p`.
    unsafe fn lanes<V: Lanes>(p: *const Self) -> V;
}

impl Weight for f32 {
    #[inline(always)]
    unsafe fn lanes<V: Lanes>(p: *const f32) -> V {
        // SAFETY: forwarded from the caller.
        unsafe { V::load_ptr(p) }
    }
}

impl Weight for i8 {
    #[inline(always)]
    unsafe fn lanes<V: Lanes>(p: *const i8) -> V {
        // SAFETY: forwarded from the caller.
        unsafe { V::load_i8_ptr(p) }
    }
}

/// Sums for positions `t..t + PT` and rows `r..r + 8 · RT`.
#[inline(always)]
fn tile<V: Lanes, W: Weight, const PT: usize, const RT: usize>(
    w: &[W],
    padded: usize,
    cols: usize,
    xs: &[f32],
    t: usize,
    r: usize,
) -> [[V; RT]; PT] {
    assert!(r + 8 * RT <= padded && (t + PT) * cols <= xs.len() && cols * padded <= w.len());
    let (wp, xp) = (w.as_ptr(), xs.as_ptr());
    let mut acc = [[V::zero(); RT]; PT];
    for c in 0..cols {
        let mut wv = [V::zero(); RT];
        for (k, wv) in wv.iter_mut().enumerate() {
            // SAFETY: c < cols and r + 8 · RT <= padded (asserted).
            *wv = unsafe { W::lanes(wp.add(c * padded + r + 8 * k)) };
        }
        for (p, acc) in acc.iter_mut().enumerate() {
            // SAFETY: t + p < n and c < cols (asserted).
            let x = V::splat(unsafe { *xp.add((t + p) * cols + c) });
            for (a, wv) in acc.iter_mut().zip(&wv) {
                *a = a.add(x.mul(*wv));
            }
        }
    }
    acc
}

#[inline(always)]
fn store<V: Lanes, const PT: usize, const RT: usize>(
    acc: &[[V; RT]; PT],
    scales: Option<&[f32]>,
    out: &mut [f32],
    rows: usize,
    t: usize,
    r: usize,
) {
    for (p, acc) in acc.iter().enumerate() {
        for (k, acc) in acc.iter().enumerate() {
            let at = r + 8 * k;
            let v = match scales {
                Some(s) => V::load(&s[at..at + 8]).mul(*acc),
                None => *acc,
            };
            let v = v.to_array();
            let keep = rows.saturating_sub(at).min(8);
            let row = (t + p) * rows;
            out[row + at..row + at + keep].copy_from_slice(&v[..keep]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_checks::bit_identical;

    /// Whatever the CPU, the dispatched kernel gives exactly the portable sums; a position
    /// gets the same bits in a block as alone; and the sums are the plain ones.
    #[test]
    fn packed_kernels_are_bit_identical_everywhere() {
        bit_identical(
            Packed::new,
            Packed::matmul,
            Packed::matmul_portable,
            Packed::matmul,
            |m, x, alone| {
                let cols = m.cols();
                let plain: Vec<f32> = (0..m.rows())
                    .map(|r| {
                        let (w, scale) = match m {
                            Linear::F32 { data, .. } => {
                                (data[r * cols..(r + 1) * cols].to_vec(), None)
                            }
                            Linear::Int8 { data, scales, .. } => (
                                data[r * cols..(r + 1) * cols]
                                    .iter()
                                    .map(|&q| f32::from(q))
                                    .collect(),
                                Some(scales[r]),
                            ),
                        };
                        let mut s = 0.0f32;
                        for (w, x) in w.iter().zip(x) {
                            s += x * w;
                        }
                        scale.map_or(s, |k| k * s)
                    })
                    .collect();
                assert_eq!(plain, alone);
            },
        );
    }
}
