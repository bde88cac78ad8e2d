//! Scalar emulation of NumPy's `np.argpartition` for `float64` on x86-64
//! CPUs with AVX2 but without AVX-512 (NumPy 2.4.x, `X86_V3` dispatch).
//!
//! On that path NumPy's `argquickselect_dispatch` (`npysort/selection.cpp`)
//! hands a single `kth` to `x86_simd_argsort.dispatch.cpp`, which calls
//! x86-simd-sort's `avx2_argselect(arr, arg, kth, n, hasnan = true)`
//! (`xss-common-argsort.h`). The result is *not* a stable order: ties are
//! broken by the vector networks and by the vectorised partition. This
//! module replays every vector operation of that path lane by lane on
//! `[f64; 4]` / `[usize; 4]` arrays so that the returned index permutation
//! is bit-for-bit the one NumPy returns:
//!
//! * `argselect_64bit_`: quickselect over the index array; ranges of at most
//!   256 elements are fully sorted by `argsort_n<.., 256>`
//!   (`xss-network-keyvaluesort.hpp`), larger ranges are split by
//!   `partition_avx512_unrolled<.., 4>` around `get_pivot_64bit`, and once
//!   `2 * floor(log2 n)` iterations are used up the range is finished with
//!   `std_argsort` (libstdc++ `std::sort`).
//!
//! Inputs must be finite (the caller rejects NaN/inf), so the `hasnan` scan
//! never diverts to `std_argselect_withnan`.

/// Lanes of one AVX2 register of 64-bit elements.
const LANES: usize = 4;
/// `argsort_n<vtype, argtype, 256>`: ranges up to this size are sorted.
const NETWORK_MAX: usize = 256;
/// `partition_avx512_unrolled<vtype, argtype, 4>`: vectors per block.
const UNROLL: usize = 4;

type Keys = [f64; LANES];
type Idx = [usize; LANES];

/// `_mm256_permute4x64_*` immediates used by the networks, as lane sources.
const SWAP2: Idx = [1, 0, 3, 2]; // swap_n<2>, SHUFFLE_MASK(2, 3, 0, 1)
const SWAP4: Idx = [2, 3, 0, 1]; // swap_n<4>
const REVERSE: Idx = [3, 2, 1, 0]; // reverse, SHUFFLE_MASK(0, 1, 2, 3)
/// `seti(-1, 0, -1, 0)` and `seti(-1, -1, 0, 0)` (lane 0 first): max lanes.
const MASK_AA: [bool; LANES] = [false, true, false, true];
const MASK_CC: [bool; LANES] = [false, false, true, true];

/// Returns the permutation `np.argpartition(values, kth)` yields on the
/// NumPy 2.4 AVX2 path (`values` finite, `kth < values.len()`).
pub(crate) fn argpartition_x86_avx2(values: &[f64], kth: usize) -> Vec<usize> {
    let n = values.len();
    let mut arg: Vec<usize> = (0..n).collect();
    // avx2_argselect: `if (arrsize > 1)`, max_iters = 2 * (size_t)log2(n).
    if n > 1 && kth < n {
        argselect(values, &mut arg, kth, n - 1, 2 * n.ilog2() as usize);
    }
    arg
}

/// `argselect_64bit_` (tail recursion unrolled); `right` is inclusive.
fn argselect(v: &[f64], arg: &mut [usize], pos: usize, right: usize, iters: usize) {
    let (mut left, mut right, mut iters) = (0, right, iters);
    loop {
        if iters == 0 {
            std_sort(v, &mut arg[left..=right]);
            return;
        }
        if right + 1 - left <= NETWORK_MAX {
            argsort_n(v, &mut arg[left..=right]);
            return;
        }
        let pivot = get_pivot_64bit(v, arg, left, right);
        // `smallest` / `biggest` as the partition reduces them (exact values).
        let (smallest, biggest) = arg[left..=right]
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &i| {
                (lo.min(v[i]), hi.max(v[i]))
            });
        let pivot_index = partition_unrolled(v, arg, left, right + 1, pivot);
        if pivot != smallest && pos < pivot_index {
            right = pivot_index - 1;
        } else if pivot != biggest && pos >= pivot_index {
            left = pivot_index;
        } else {
            return;
        }
        iters -= 1;
    }
}

/// `get_pivot_64bit` for 4 lanes: the third smallest of four samples.
fn get_pivot_64bit(v: &[f64], arg: &[usize], left: usize, right: usize) -> f64 {
    let size = (right - left) / 4;
    let mut s = [1, 2, 3, 4].map(|k| v[arg[left + k * size]]);
    s.sort_by(f64::total_cmp); // `sort_vec`: only the value matters here
    s[2]
}

/// `partition_avx512_unrolled<avx2_vector<double>, avx2_vector<size_t>, 4>`
/// on `arg[left..right]`; returns the first index whose value is `>= pivot`.
/// (Ranges reaching it are > 256 long, so the `partition_avx512` branch for
/// ranges of at most 128 elements is never taken.)
fn partition_unrolled(
    v: &[f64],
    arg: &mut [usize],
    left: usize,
    right: usize,
    pivot: f64,
) -> usize {
    let (mut left, mut right) = (left, right);
    // Scalar pre-pass making the length a multiple of UNROLL * LANES.
    for _ in 0..(right - left) % (UNROLL * LANES) {
        if v[arg[left]] < pivot {
            left += 1;
        } else {
            right -= 1;
            arg.swap(left, right);
        }
    }
    let load =
        |arg: &[usize], at: usize| -> Idx { [arg[at], arg[at + 1], arg[at + 2], arg[at + 3]] };
    let vec_left: Vec<Idx> = (0..UNROLL).map(|i| load(arg, left + LANES * i)).collect();
    let vec_right: Vec<Idx> = (0..UNROLL)
        .map(|i| load(arg, right - LANES * (UNROLL - i)))
        .collect();
    let (mut l_store, mut r_store) = (left, right - LANES);
    left += UNROLL * LANES;
    right -= UNROLL * LANES;
    while right != left {
        // Load from the side with fewer stored elements.
        let from = if (r_store + LANES) - right < left - l_store {
            right -= UNROLL * LANES;
            right
        } else {
            left += UNROLL * LANES;
            left - UNROLL * LANES
        };
        let block: Vec<Idx> = (0..UNROLL).map(|i| load(arg, from + LANES * i)).collect();
        for ids in block {
            let ge = partition_vec(v, arg, l_store, r_store, ids, pivot);
            l_store += LANES - ge;
            r_store -= ge;
        }
    }
    for ids in vec_left.into_iter().chain(vec_right) {
        let ge = partition_vec(v, arg, l_store, r_store, ids, pivot);
        l_store += LANES - ge;
        r_store = r_store.wrapping_sub(ge); // may pass below 0 after the last store
    }
    l_store
}

/// `partition_vec_avx2` + `avx2_double_compressstore64`: lanes `< pivot`
/// packed to the front in lane order, lanes `>= pivot` packed to the back
/// in reverse lane order; the whole permuted register is stored both at
/// `l_store` and at `r_store` (in that order). Returns the `>=` count.
fn partition_vec(
    v: &[f64],
    arg: &mut [usize],
    l_store: usize,
    r_store: usize,
    ids: Idx,
    pivot: f64,
) -> usize {
    let mut out = [0; LANES];
    let (mut lt, mut ge) = (0, 0);
    for id in ids {
        if v[id] >= pivot {
            out[LANES - 1 - ge] = id;
            ge += 1;
        } else {
            out[lt] = id;
            lt += 1;
        }
    }
    arg[l_store..l_store + LANES].copy_from_slice(&out);
    arg[r_store..r_store + LANES].copy_from_slice(&out);
    ge
}

/// `argsort_n_vec<avx2_vector<double>, avx2_vector<size_t>, numVecs>`:
/// loads `arg` into the smallest power-of-two number of registers that
/// holds it (padding with key `+inf`, index `usize::MAX`), sorts each
/// register, runs the bitonic full merge and stores the real lanes back.
fn argsort_n(v: &[f64], arg: &mut [usize]) {
    let n = arg.len();
    let mut num_vecs = NETWORK_MAX / LANES;
    while num_vecs > 1 && n * 2 <= num_vecs * LANES {
        num_vecs /= 2;
    }
    let mut keys = vec![[f64::INFINITY; LANES]; num_vecs];
    let mut idx = vec![[usize::MAX; LANES]; num_vecs];
    for (p, &id) in arg.iter().enumerate() {
        keys[p / LANES][p % LANES] = v[id];
        idx[p / LANES][p % LANES] = id;
    }
    for (k, i) in keys.iter_mut().zip(idx.iter_mut()) {
        sort_ymm_64bit(k, i);
    }
    // bitonic_fullmerge_n_vec: merge groups of 2, 4, ..., num_vecs registers.
    let mut per = 2;
    while per <= num_vecs {
        for g in (0..num_vecs).step_by(per) {
            bitonic_merge_n_vec(&mut keys[g..g + per], &mut idx[g..g + per]);
        }
        per *= 2;
    }
    for (p, slot) in arg.iter_mut().enumerate() {
        *slot = idx[p / LANES][p % LANES];
    }
}

/// `bitonic_merge_n_vec`: compare register i with the reversed register
/// `n - 1 - i`, then `bitonic_clean_n_vec`, then `bitonic_merge_ymm_64bit`
/// inside every register.
fn bitonic_merge_n_vec(keys: &mut [Keys], idx: &mut [Idx]) {
    let n = keys.len();
    for i in 0..n / 2 {
        let j = n - 1 - i;
        keys[j] = permute(keys[j], REVERSE);
        idx[j] = permute(idx[j], REVERSE);
        coex(keys, idx, i, j);
        keys[j] = permute(keys[j], REVERSE);
        idx[j] = permute(idx[j], REVERSE);
    }
    let mut num = n / 2;
    while num >= 2 {
        for j in (0..n).step_by(num) {
            for i in 0..num / 2 {
                coex(keys, idx, i + j, i + j + num / 2);
            }
        }
        num /= 2;
    }
    for (k, i) in keys.iter_mut().zip(idx.iter_mut()) {
        cmp_merge(k, i, SWAP4, MASK_CC);
        cmp_merge(k, i, SWAP2, MASK_AA);
    }
}

/// Key-value `sort_ymm_64bit`: a 4-lane bitonic sorting network.
fn sort_ymm_64bit(k: &mut Keys, i: &mut Idx) {
    cmp_merge(k, i, SWAP2, MASK_AA);
    cmp_merge(k, i, REVERSE, MASK_CC);
    cmp_merge(k, i, SWAP2, MASK_AA);
}

/// Key-value `COEX` of registers `a` and `b`: `a` gets the lane-wise min,
/// `b` the max; an index stays put where `min(ka, kb) == ka` (ties keep).
fn coex(keys: &mut [Keys], idx: &mut [Idx], a: usize, b: usize) {
    let (ka, kb, ia, ib) = (keys[a], keys[b], idx[a], idx[b]);
    let (lo, hi) = (min_pd(ka, kb), max_pd(ka, kb));
    for l in 0..LANES {
        let keep = lo[l] == ka[l];
        idx[a][l] = if keep { ia[l] } else { ib[l] };
        idx[b][l] = if keep { ib[l] } else { ia[l] };
    }
    keys[a] = lo;
    keys[b] = hi;
}

/// Key-value `cmp_merge(in1, permuted in1, mask)`: lanes in `max_lanes`
/// take `max(in2, in1)`, the rest `min(in2, in1)`; a lane keeps its index
/// where the result equals its old key, otherwise takes the partner's.
fn cmp_merge(k: &mut Keys, i: &mut Idx, perm: Idx, max_lanes: [bool; LANES]) {
    let (k2, i2) = (permute(*k, perm), permute(*i, perm));
    let (lo, hi) = (min_pd(k2, *k), max_pd(k2, *k));
    for l in 0..LANES {
        let t = if max_lanes[l] { hi[l] } else { lo[l] };
        if t != k[l] {
            i[l] = i2[l];
        }
        k[l] = t;
    }
}

fn permute<T: Copy>(x: [T; LANES], src: Idx) -> [T; LANES] {
    src.map(|s| x[s])
}

/// `_mm256_min_pd(a, b)`: `a < b ? a : b` per lane.
fn min_pd(a: Keys, b: Keys) -> Keys {
    [0, 1, 2, 3].map(|l| if a[l] < b[l] { a[l] } else { b[l] })
}

/// `_mm256_max_pd(a, b)`: `a > b ? a : b` per lane.
fn max_pd(a: Keys, b: Keys) -> Keys {
    [0, 1, 2, 3].map(|l| if a[l] > b[l] { a[l] } else { b[l] })
}

/// `std_argsort`: libstdc++ `std::sort` (introsort, threshold 16, depth
/// `2 * floor(log2 n)`, heapsort fallback, final insertion sort) with the
/// comparator `arr[a] < arr[b]`.
fn std_sort(v: &[f64], a: &mut [usize]) {
    if a.len() > 1 {
        introsort_loop(v, a, 2 * a.len().ilog2() as usize);
        let n = a.len();
        for i in 1..n.min(16) {
            linear_insert(v, a, i, true);
        }
        for i in 16..n {
            linear_insert(v, a, i, false);
        }
    }
}

/// `__introsort_loop` (recursing on the right part, looping on the left).
fn introsort_loop(v: &[f64], a: &mut [usize], depth: usize) {
    let (mut end, mut depth) = (a.len(), depth);
    while end > 16 {
        if depth == 0 {
            heap_sort(v, &mut a[..end]);
            return;
        }
        depth -= 1;
        // __unguarded_partition_pivot: median of (1, mid, last) moved to 0.
        let s = &mut a[..end];
        let (x, y, z) = (1, end / 2, end - 1);
        let lt = |p: usize, q: usize| v[s[p]] < v[s[q]];
        let m = if lt(x, y) {
            if lt(y, z) {
                y
            } else if lt(x, z) {
                z
            } else {
                x
            }
        } else if lt(x, z) {
            x
        } else if lt(y, z) {
            z
        } else {
            y
        };
        s.swap(0, m);
        let pivot = v[s[0]];
        let (mut lo, mut hi) = (1, end);
        let cut = loop {
            while v[s[lo]] < pivot {
                lo += 1;
            }
            hi -= 1;
            while pivot < v[s[hi]] {
                hi -= 1;
            }
            if lo >= hi {
                break lo;
            }
            s.swap(lo, hi);
            lo += 1;
        };
        introsort_loop(v, &mut s[cut..], depth);
        end = cut;
    }
}

/// `__insertion_sort` (`guarded`: element smaller than the first moves to
/// the front) / `__unguarded_linear_insert` for position `i`.
fn linear_insert(v: &[f64], a: &mut [usize], i: usize, guarded: bool) {
    let val = a[i];
    if guarded && v[val] < v[a[0]] {
        a.copy_within(0..i, 1);
        a[0] = val;
        return;
    }
    let mut j = i;
    while j > 0 && v[val] < v[a[j - 1]] {
        a[j] = a[j - 1];
        j -= 1;
    }
    a[j] = val;
}

/// `__partial_sort(first, last, last)`: `__make_heap` then `__sort_heap`.
fn heap_sort(v: &[f64], a: &mut [usize]) {
    let len = a.len();
    for parent in (0..len / 2).rev() {
        let val = a[parent];
        adjust_heap(v, a, parent, len, val);
    }
    for last in (1..len).rev() {
        let val = a[last];
        a[last] = a[0];
        adjust_heap(v, &mut a[..last], 0, last, val);
    }
}

/// `__adjust_heap` followed by `__push_heap`.
fn adjust_heap(v: &[f64], a: &mut [usize], top: usize, len: usize, val: usize) {
    let (mut hole, mut child) = (top, top);
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if v[a[child]] < v[a[child - 1]] {
            child -= 1;
        }
        a[hole] = a[child];
        hole = child;
    }
    if len & 1 == 0 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    while hole > top {
        let parent = (hole - 1) / 2;
        if v[a[parent]] < v[val] {
            a[hole] = a[parent];
            hole = parent;
        } else {
            break;
        }
    }
    a[hole] = val;
}

#[cfg(test)]
mod tests {
    use super::argpartition_x86_avx2;

    #[test]
    fn chapter_example() {
        let values = [1.2, 0.1, 2.4, 1.7].map(|x: f64| x / 0.7);
        assert_eq!(argpartition_x86_avx2(&values, 1), vec![1, 0, 3, 2]);
    }

    #[test]
    fn trivial_sizes() {
        assert_eq!(argpartition_x86_avx2(&[3.0], 0), vec![0]);
        assert_eq!(argpartition_x86_avx2(&[2.0, 1.0], 0), vec![1, 0]);
        assert_eq!(argpartition_x86_avx2(&[1.0, 1.0], 1), vec![0, 1]);
    }

    #[test]
    fn result_is_a_partition() {
        let values: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 101) as f64 / 10.0)
            .collect();
        for kth in [0, 1, 499, 998, 999] {
            let p = argpartition_x86_avx2(&values, kth);
            let mut seen = p.clone();
            seen.sort_unstable();
            assert!(seen.iter().copied().eq(0..1000));
            let pivot = values[p[kth]];
            assert!(p[..kth].iter().all(|&i| values[i] <= pivot));
            assert!(p[kth..].iter().all(|&i| values[i] >= pivot));
        }
    }
}
