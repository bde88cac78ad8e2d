//! The check that the matrix kernels of [`Linear`] and of its packed form share: a kernel
//! dispatched to the CPU's widest lanes gives exactly the portable sums, so a run replays
//! bit for bit on any machine, and a position gets the same bits in a block (prefill) as
//! alone (decode).

use crate::Linear;

/// A kernel of a matrix `K`: `out[t][r] = row_r · xs[t]` for positions `xs` (`[n][cols]`).
pub(crate) type Kernel<K> = fn(&K, &[f32], &mut [f32]);

/// A `rows × cols` matrix of values in [-0.5, 0.5] spread by `seed`.
fn matrix(rows: usize, cols: usize, seed: u32) -> Linear {
    let data = (0..rows * cols)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
        .collect();
    Linear::F32 { rows, cols, data }
}

/// For a few shapes, odd ones among them, of f32 and of int8 weights, each made into a `K`
/// by `make`: the `dispatched` kernel gives exactly the sums of the `portable` one on a block
/// of positions, and each position the same bits as `alone` gives it (decode);
/// `also(matrix, x, out)` then checks each position's output further.
pub(crate) fn bit_identical<K>(
    make: impl Fn(&Linear) -> K,
    dispatched: Kernel<K>,
    portable: Kernel<K>,
    alone: Kernel<K>,
    also: impl Fn(&Linear, &[f32], &[f32]),
) {
    for (rows, cols, n) in [(37, 24, 11), (128, 128, 9), (352, 128, 6), (5, 13, 7)] {
        for m in [matrix(rows, cols, 7), matrix(rows, cols, 7).quantized()] {
            let k = make(&m);
            let xs: Vec<f32> = (0..n * cols).map(|i| (i as f32 * 0.37).sin()).collect();
            let (mut fast, mut slow) = (vec![0.0; n * rows], vec![0.0; n * rows]);
            dispatched(&k, &xs, &mut fast);
            portable(&k, &xs, &mut slow);
            assert_eq!(fast, slow);
            for t in 0..n {
                let x = &xs[t * cols..(t + 1) * cols];
                let mut out = vec![0.0; rows];
                alone(&k, x, &mut out);
                assert_eq!(out, &fast[t * rows..(t + 1) * rows]);
                also(&m, x, &out);
            }
        }
    }
}
