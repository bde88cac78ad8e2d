//! Each kernel against a CPU formula (sums in f64), on the model's shapes and on awkward
//! ones that are not multiples of the workgroup or tile sizes. Declared tolerances:
//! - gathers and cache writes move values and must be exact;
//! - sums (matmul, RMSNorm, attention, softmax) may differ from the f64 formula by
//!   `SUM_TOLERANCE` times the sum of the absolute values of their terms (f32 rounding in
//!   another order);
//! - element-wise maths (rope, SwiGLU) by `ELEMENT_TOLERANCE` relative;
//! - the one-position kernels that fuse RMSNorm, a projection and what follows it (`qkv`,
//!   `gate_up`, `logits`) are checked against the composed formula: norm, sum, then rope
//!   or SwiGLU, all in f64.

mod common;

use common::{gpu, Random};
use gpu::ops::{Ops, Shape};
use model::Linear;

const SUM_TOLERANCE: f64 = 2e-6;

/// The one-position kernels split each output over 1 invocation on a CPU adapter and 8 on
/// a GPU: both variants (and 4) run here, whatever the adapter.
const SLICES: [u32; 3] = [1, 4, 8];
const ELEMENT_TOLERANCE: f64 = 2e-6;

fn matrix(rows: usize, cols: usize, random: &mut Random) -> Linear {
    Linear::F32 {
        rows,
        cols,
        data: random.f32s(rows * cols, 0.5),
    }
}

/// `out[t][r] = sum_c x[t][c] * w(r, c)` in f64, with the sum of |terms| for the tolerance.
fn matmul_reference(w: &Linear, xs: &[f32]) -> Vec<(f64, f64)> {
    let xs: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
    matmul_reference_f64(w, &xs)
}

fn matmul_reference_f64(w: &Linear, xs: &[f64]) -> Vec<(f64, f64)> {
    let (rows, cols) = (w.rows(), w.cols());
    let mut row = vec![0.0f32; cols];
    let mut out = vec![(0.0, 0.0); xs.len() / cols * rows];
    for r in 0..rows {
        // Int8 rows: scale · q, the value the CPU reference multiplies by.
        let scale = match w {
            Linear::F32 { .. } => 1.0,
            Linear::Int8 { scales, data, .. } => {
                for (o, &q) in row.iter_mut().zip(&data[r * cols..(r + 1) * cols]) {
                    *o = f32::from(q);
                }
                f64::from(scales[r])
            }
        };
        if let Linear::F32 { data, .. } = w {
            row.copy_from_slice(&data[r * cols..(r + 1) * cols]);
        }
        for (t, x) in xs.chunks_exact(cols).enumerate() {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for (&a, &b) in row.iter().zip(x) {
                let term = f64::from(a) * b;
                sum += term;
                magnitude += term.abs();
            }
            out[t * rows + r] = (sum * scale, magnitude * scale.abs());
        }
    }
    out
}

fn assert_sums(label: &str, got: &[f32], expected: &[(f64, f64)]) {
    assert_eq!(got.len(), expected.len(), "{label}: length");
    for (i, (&g, &(e, magnitude))) in got.iter().zip(expected).enumerate() {
        let allowed = SUM_TOLERANCE * magnitude.max(1e-3);
        assert!(
            (f64::from(g) - e).abs() <= allowed,
            "{label}[{i}]: gpu {g}, reference {e}, allowed {allowed:e}"
        );
    }
}

/// (positions, rows, cols): the model's shapes, then awkward ones; one position takes the
/// decode kernel.
const MATMUL_SHAPES: [(usize, usize, usize); 11] = [
    (1, 352, 128),
    (1, 5, 13),
    (1, 70, 50),
    (1, 128, 128),
    (16, 64, 128),
    (37, 352, 128),
    (5, 128, 352),
    (1, 768, 128),
    (5, 17, 13),
    (33, 7, 50),
    (3, 1, 1),
];

#[test]
fn matmul_f32_and_int8_match_the_formula() {
    let Some(device) = gpu("matmul") else { return };
    for slices in SLICES {
        let ops = Ops::with_slices(&device, slices);
        let mut random = Random::new(1);
        for (n, rows, cols) in MATMUL_SHAPES {
            let w = matrix(rows, cols, &mut random);
            let xs = random.f32s(n * cols, 2.0);
            for (precision, w) in [("f32", w.clone()), ("int8", w.quantized())] {
                let label = format!("matmul {precision} n={n} {rows}x{cols}");
                let got = pollster::block_on(ops.matmul(&w, &xs, None)).unwrap();
                assert_sums(&label, &got, &matmul_reference(&w, &xs));
            }
        }
    }
}

#[test]
fn matmul_accumulates_onto_the_residual_stream() {
    let Some(device) = gpu("matmul_accumulate") else {
        return;
    };
    for slices in SLICES {
        let ops = Ops::with_slices(&device, slices);
        let mut random = Random::new(2);
        for (n, rows, cols) in [(19, 40, 24), (1, 40, 22)] {
            let w = matrix(rows, cols, &mut random);
            let xs = random.f32s(n * cols, 1.0);
            let base = random.f32s(n * rows, 3.0);
            for w in [w.clone(), w.quantized()] {
                let got = pollster::block_on(ops.matmul(&w, &xs, Some(&base))).unwrap();
                let expected: Vec<(f64, f64)> = matmul_reference(&w, &xs)
                    .into_iter()
                    .zip(&base)
                    .map(|((s, m), &b)| (s + f64::from(b), m + f64::from(b).abs()))
                    .collect();
                assert_sums(&format!("matmul accumulate n={n}"), &got, &expected);
            }
        }
    }
}

#[test]
fn embedding_gathers_are_exact() {
    let Some(device) = gpu("embed") else { return };
    let ops = Ops::new(&device);
    let mut random = Random::new(3);
    for (vocab, cols) in [(768, 128), (50, 13)] {
        let table = matrix(vocab, cols, &mut random);
        let tokens: Vec<u32> = (0..23).map(|_| random.next_u32() % vocab as u32).collect();
        for table in [table.clone(), table.quantized()] {
            let got = pollster::block_on(ops.embed(&table, &tokens)).unwrap();
            let mut expected = vec![0.0; tokens.len() * cols];
            for (t, &id) in tokens.iter().enumerate() {
                table.row(id as usize, &mut expected[t * cols..(t + 1) * cols]);
            }
            assert_eq!(got, expected, "embed {vocab}x{cols}");
        }
    }
}

#[test]
fn rmsnorm_matches_the_formula() {
    let Some(device) = gpu("rmsnorm") else { return };
    let ops = Ops::new(&device);
    let mut random = Random::new(4);
    let eps = 1e-5f32;
    for (n, cols) in [(1, 128), (9, 128), (4, 37), (2, 200)] {
        let x = random.f32s(n * cols, 3.0);
        let weight = random.f32s(cols, 1.5);
        let got = pollster::block_on(ops.rmsnorm(&x, &weight, eps)).unwrap();
        let expected: Vec<(f64, f64)> = x
            .chunks_exact(cols)
            .flat_map(|row| {
                let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / cols as f64;
                let scale = 1.0 / (ms + f64::from(eps)).sqrt();
                row.iter()
                    .zip(&weight)
                    .map(move |(&v, &w)| {
                        let value = f64::from(v) * scale * f64::from(w);
                        (value, value.abs() * 4.0)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_sums(&format!("rmsnorm {n}x{cols}"), &got, &expected);
    }
}

/// RMSNorm of each row in f64: x / sqrt(mean(x²) + eps) * weight.
fn rmsnorm_reference(x: &[f32], weight: &[f32], eps: f32) -> Vec<f64> {
    x.chunks_exact(weight.len())
        .flat_map(|row| {
            let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / row.len() as f64;
            let scale = 1.0 / (ms + f64::from(eps)).sqrt();
            row.iter()
                .zip(weight)
                .map(move |(&v, &w)| f64::from(v) * scale * f64::from(w))
        })
        .collect()
}

/// RoPE of the pair (a, b), each a (value, magnitude), at table index `at`.
fn turn(a: (f64, f64), b: (f64, f64), at: usize, cos: &[f32], sin: &[f32]) -> [(f64, f64); 2] {
    let (c, s) = (f64::from(cos[at]), f64::from(sin[at]));
    let magnitude = a.1 + b.1;
    [
        (a.0 * c - b.0 * s, magnitude),
        (a.0 * s + b.0 * c, magnitude),
    ]
}

/// Where the queries, keys and values of one position's stacked projection `qkv` (each a
/// value and a magnitude) go: the rotated queries, and the caches with position `position`
/// written (values elsewhere kept, with magnitude 0: they must be exact).
#[allow(clippy::too_many_arguments)]
fn attention_inputs_reference(
    qkv: &[(f64, f64)],
    shape: &Shape,
    position: usize,
    (cos, sin): (&[f32], &[f32]),
    queries: &mut Vec<(f64, f64)>,
    k_cache: &mut [(f64, f64)],
    v_cache: &mut [(f64, f64)],
) {
    let (hd, half) = (shape.head_dim, shape.head_dim / 2);
    let (q_rows, kv) = (shape.heads * hd, shape.kv_heads * hd);
    let cache_at = |h: usize, i: usize| {
        ((shape.layer * shape.kv_heads + h) * shape.context + position) * hd + i
    };
    // Keys are transposed: [layer][kv_head][head_dim][position].
    let key_at = |h: usize, i: usize| {
        ((shape.layer * shape.kv_heads + h) * hd + i) * shape.context + position
    };
    for h in 0..shape.heads {
        let mut head = vec![(0.0, 0.0); hd];
        for i in 0..half {
            let r = h * hd + i;
            let [a, b] = turn(qkv[r], qkv[r + half], position * half + i, cos, sin);
            head[i] = a;
            head[i + half] = b;
        }
        queries.extend(head);
    }
    for h in 0..shape.kv_heads {
        for i in 0..half {
            let r = q_rows + h * hd + i;
            let [a, b] = turn(qkv[r], qkv[r + half], position * half + i, cos, sin);
            k_cache[key_at(h, i)] = a;
            k_cache[key_at(h, i + half)] = b;
        }
        for i in 0..hd {
            v_cache[cache_at(h, i)] = qkv[q_rows + kv + h * hd + i];
        }
    }
}

fn exact(values: &[f32]) -> Vec<(f64, f64)> {
    values.iter().map(|&v| (f64::from(v), 0.0)).collect()
}

/// (layer, heads, kv_heads, head_dim, context): the model's, then awkward ones.
/// The one-position `qkv` takes four rotary pairs at a time: head_dim is a multiple of 8.
const SHAPES: [(usize, usize, usize, usize, usize); 3] =
    [(2, 4, 2, 32, 256), (0, 3, 1, 8, 40), (1, 2, 2, 16, 17)];

fn shape(
    (layer, heads, kv_heads, head_dim, context): (usize, usize, usize, usize, usize),
) -> Shape {
    Shape {
        layer,
        heads,
        kv_heads,
        head_dim,
        context,
    }
}

fn tables(head_dim: usize, context: usize, random: &mut Random) -> (Vec<f32>, Vec<f32>) {
    let angles = random.f32s(context * head_dim / 2, 3.0);
    (
        angles.iter().map(|a| a.cos()).collect(),
        angles.iter().map(|a| a.sin()).collect(),
    )
}

#[test]
fn rope_store_turns_each_pair_and_writes_the_documented_layout() {
    let Some(device) = gpu("rope_store") else {
        return;
    };
    let ops = Ops::new(&device);
    let mut random = Random::new(5);
    for (case, (n, start)) in SHAPES.into_iter().zip([(7, 100), (1, 39), (13, 3)]) {
        let shape = shape(case);
        let (hd, context) = (shape.head_dim, shape.context);
        let (cos, sin) = tables(hd, context, &mut random);
        let width = (shape.heads + 2 * shape.kv_heads) * hd;
        let size = (shape.layer + 1) * shape.kv_heads * context * hd;
        let (k_cache, v_cache) = (random.f32s(size, 1.0), random.f32s(size, 1.0));
        let qkv = random.f32s(n * width, 2.0);
        let (queries, keys, values) = pollster::block_on(ops.rope_store(
            &qkv,
            &shape,
            (&cos, &sin),
            (&k_cache, &v_cache),
            start,
        ))
        .unwrap();
        let mut expected = (Vec::new(), exact(&k_cache), exact(&v_cache));
        for (t, row) in qkv.chunks_exact(width).enumerate() {
            let row: Vec<(f64, f64)> = row
                .iter()
                .map(|&v| (f64::from(v), v.abs().into()))
                .collect();
            attention_inputs_reference(
                &row,
                &shape,
                start + t,
                (&cos, &sin),
                &mut expected.0,
                &mut expected.1,
                &mut expected.2,
            );
        }
        let label = format!("rope_store {shape:?} n={n} start={start}");
        assert_elements(&format!("{label} queries"), &queries, &expected.0);
        assert_elements(&format!("{label} keys"), &keys, &expected.1);
        assert_elements(&format!("{label} values"), &values, &expected.2);
    }
}

/// Element-wise results within `ELEMENT_TOLERANCE` of their magnitude (0: exact).
fn assert_elements(label: &str, got: &[f32], expected: &[(f64, f64)]) {
    assert_eq!(got.len(), expected.len(), "{label}: length");
    for (i, (&g, &(e, magnitude))) in got.iter().zip(expected).enumerate() {
        let allowed = ELEMENT_TOLERANCE * magnitude;
        assert!(
            (f64::from(g) - e).abs() <= allowed,
            "{label}[{i}]: gpu {g}, reference {e}, allowed {allowed:e}"
        );
    }
}

#[test]
fn qkv_norms_projects_turns_and_stores_one_position() {
    let Some(device) = gpu("qkv") else { return };
    for slices in SLICES {
        let ops = Ops::with_slices(&device, slices);
        let mut random = Random::new(11);
        let eps = 1e-5f32;
        for (case, (cols, start)) in SHAPES.into_iter().zip([(128, 200), (37, 39), (6, 0)]) {
            let shape = shape(case);
            let (hd, context) = (shape.head_dim, shape.context);
            let (cos, sin) = tables(hd, context, &mut random);
            let rows = (shape.heads + 2 * shape.kv_heads) * hd;
            let size = (shape.layer + 1) * shape.kv_heads * context * hd;
            let (k_cache, v_cache) = (random.f32s(size, 1.0), random.f32s(size, 1.0));
            let x = random.f32s(cols, 3.0);
            let norm = random.f32s(cols, 1.5);
            let w = matrix(rows, cols, &mut random);
            for (precision, w) in [("f32", w.clone()), ("int8", w.quantized())] {
                let (queries, keys, values) = pollster::block_on(ops.qkv(
                    (&x, &norm, eps),
                    &w,
                    &shape,
                    (&cos, &sin),
                    (&k_cache, &v_cache),
                    start,
                ))
                .unwrap();
                let projected = matmul_reference_f64(&w, &rmsnorm_reference(&x, &norm, eps));
                let mut expected = (Vec::new(), exact(&k_cache), exact(&v_cache));
                attention_inputs_reference(
                    &projected,
                    &shape,
                    start,
                    (&cos, &sin),
                    &mut expected.0,
                    &mut expected.1,
                    &mut expected.2,
                );
                let label = format!("qkv {precision} {shape:?} cols={cols} start={start}");
                assert_sums(&format!("{label} queries"), &queries, &expected.0);
                assert_sums(&format!("{label} keys"), &keys, &expected.1);
                assert_sums(&format!("{label} values"), &values, &expected.2);
            }
        }
    }
}

#[test]
fn gate_up_norms_projects_and_gates_one_position() {
    let Some(device) = gpu("gate_up") else {
        return;
    };
    for slices in SLICES {
        let ops = Ops::with_slices(&device, slices);
        let mut random = Random::new(12);
        let eps = 1e-5f32;
        for (ff, cols) in [(352, 128), (4, 13), (68, 50)] {
            let x = random.f32s(cols, 3.0);
            let norm = random.f32s(cols, 1.5);
            let w = matrix(2 * ff, cols, &mut random);
            for (precision, w) in [("f32", w.clone()), ("int8", w.quantized())] {
                let got = pollster::block_on(ops.gate_up(&x, &norm, eps, &w)).unwrap();
                let projected = matmul_reference_f64(&w, &rmsnorm_reference(&x, &norm, eps));
                let expected: Vec<(f64, f64)> = (0..ff)
                    .map(|j| {
                        let ((g, gm), (u, um)) = (projected[j], projected[ff + j]);
                        let silu = g / (1.0 + (-g).exp());
                        // silu's slope is at most 1.1, so the gate's error passes through it.
                        (silu * u, gm * 1.1 * u.abs() + um * silu.abs())
                    })
                    .collect();
                assert_sums(&format!("gate_up {precision} {ff}x{cols}"), &got, &expected);
            }
        }
        let odd = matrix(10, 8, &mut random);
        let error = pollster::block_on(ops.gate_up(&[1.0; 8], &[1.0; 8], eps, &odd)).unwrap_err();
        assert!(error.to_string().contains("d_ff 5"), "{error}");
    }
}

#[test]
fn logits_norm_the_last_row_and_project_it() {
    let Some(device) = gpu("logits") else {
        return;
    };
    for slices in SLICES {
        let ops = Ops::with_slices(&device, slices);
        let mut random = Random::new(13);
        let eps = 1e-5f32;
        for (n, rows, cols) in [(1, 768, 128), (5, 768, 128), (3, 17, 13)] {
            let xs = random.f32s(n * cols, 3.0);
            let norm = random.f32s(cols, 1.5);
            let w = matrix(rows, cols, &mut random);
            for (precision, w) in [("f32", w.clone()), ("int8", w.quantized())] {
                let got = pollster::block_on(ops.logits(&xs, &norm, eps, &w)).unwrap();
                let last = &xs[(n - 1) * cols..];
                let expected = matmul_reference_f64(&w, &rmsnorm_reference(last, &norm, eps));
                assert_sums(
                    &format!("logits {precision} n={n} {rows}x{cols}"),
                    &got,
                    &expected,
                );
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn attention_reference(
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    layer: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    context: usize,
    start: usize,
) -> Vec<(f64, f64)> {
    let n = q.len() / (heads * head_dim);
    let scale = 1.0 / (head_dim as f64).sqrt();
    let mut out = vec![(0.0, 0.0); q.len()];
    for t in 0..n {
        let visible = start + t + 1;
        for h in 0..heads {
            let kv = h / (heads / kv_heads);
            let base = (layer * kv_heads + kv) * context * head_dim;
            let qh = &q[(t * heads + h) * head_dim..(t * heads + h + 1) * head_dim];
            let scores: Vec<f64> = (0..visible)
                .map(|p| {
                    // Keys transposed: [layer][kv_head][head_dim][position].
                    qh.iter()
                        .enumerate()
                        .map(|(i, &a)| f64::from(a) * f64::from(k_cache[base + i * context + p]))
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = exps.iter().sum();
            for i in 0..head_dim {
                let (mut acc, mut magnitude) = (0.0, 0.0);
                for (p, e) in exps.iter().enumerate() {
                    let term = e / total * f64::from(v_cache[base + p * head_dim + i]);
                    acc += term;
                    magnitude += term.abs();
                }
                // Scores carry rounding of their own: allow for it through the magnitude.
                out[(t * heads + h) * head_dim + i] = (acc, magnitude * 8.0);
            }
        }
    }
    out
}

#[test]
fn attention_is_causal_grouped_query_attention_over_the_cache() {
    let Some(device) = gpu("attention") else {
        return;
    };
    let ops = Ops::new(&device);
    let mut random = Random::new(7);
    // (heads, kv_heads, head_dim, context, layers, layer, start, n)
    let cases = [
        (4, 2, 32, 256, 4, 2, 0, 16),  // the model's prefill
        (4, 2, 32, 256, 4, 3, 200, 1), // the model's decode, deep in the cache
        (4, 2, 32, 256, 4, 0, 255, 1), // the last position
        (4, 4, 16, 70, 1, 0, 0, 70),   // multi-head, the whole context in one block
        (4, 1, 24, 90, 2, 1, 10, 5),   // multi-query, awkward head size
        (6, 3, 10, 33, 2, 1, 30, 3),   // awkward everything
    ];
    for (heads, kv_heads, head_dim, context, layers, layer, start, n) in cases {
        let size = layers * kv_heads * context * head_dim;
        let (k_cache, v_cache) = (random.f32s(size, 1.0), random.f32s(size, 1.0));
        let q = random.f32s(n * heads * head_dim, 1.5);
        let got = pollster::block_on(ops.attention(
            &q,
            (&k_cache, &v_cache),
            layer,
            heads,
            kv_heads,
            head_dim,
            context,
            start,
        ))
        .unwrap();
        let expected = attention_reference(
            &q, &k_cache, &v_cache, layer, heads, kv_heads, head_dim, context, start,
        );
        assert_sums(
            &format!("attention h={heads} kv={kv_heads} d={head_dim} start={start} n={n}"),
            &got,
            &expected,
        );
    }
}

#[test]
fn swiglu_is_silu_gate_times_up() {
    let Some(device) = gpu("swiglu") else { return };
    let ops = Ops::new(&device);
    let mut random = Random::new(8);
    for (n, ff) in [(1, 352), (3, 1), (2, 1001)] {
        let gate_up = random.f32s(n * 2 * ff, 6.0);
        let got = pollster::block_on(ops.swiglu(&gate_up, ff)).unwrap();
        for t in 0..n {
            for j in 0..ff {
                let g = f64::from(gate_up[t * 2 * ff + j]);
                let up = f64::from(gate_up[t * 2 * ff + ff + j]);
                let expected = g / (1.0 + (-g).exp()) * up;
                let allowed = ELEMENT_TOLERANCE * expected.abs().max(1e-3);
                let i = t * ff + j;
                assert!(
                    (f64::from(got[i]) - expected).abs() <= allowed,
                    "swiglu[{i}]: {} vs {expected}",
                    got[i]
                );
            }
        }
    }
}

#[test]
fn softmax_is_stable_and_matches_the_formula() {
    let Some(device) = gpu("softmax") else { return };
    let ops = Ops::new(&device);
    let mut random = Random::new(9);
    for (rows, cols, temperature, offset) in [
        (1, 768, 1.0, 0.0),
        (3, 768, 0.7, 0.0),
        (2, 1000, 1.3, 0.0),
        (4, 3, 1.0, 0.0),
        (1, 768, 1.0, 5e4),
    ] {
        let logits: Vec<f32> = random
            .f32s(rows * cols, 8.0)
            .iter()
            .map(|v| v + offset)
            .collect();
        let got = pollster::block_on(ops.softmax(&logits, cols, temperature)).unwrap();
        for (r, (row, probs)) in logits
            .chunks_exact(cols)
            .zip(got.chunks_exact(cols))
            .enumerate()
        {
            let scaled: Vec<f64> = row
                .iter()
                .map(|&v| f64::from(v) / f64::from(temperature))
                .collect();
            let max = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = scaled.iter().map(|s| (s - max).exp()).sum();
            let sum: f64 = probs.iter().map(|&p| f64::from(p)).sum();
            assert!(
                (sum - 1.0).abs() < 1e-5,
                "row {r}: probabilities sum to {sum}"
            );
            for (i, (&p, s)) in probs.iter().zip(&scaled).enumerate() {
                let expected = (s - max).exp() / total;
                // The logits themselves are f32: their rounding at large offsets moves the
                // exponent by up to |logit| * 2^-24 before the kernel sees it.
                let allowed = 1e-6 + expected * (1e-5 + f64::from(row[i].abs()) * 1.2e-7 * 2.0);
                assert!(
                    (f64::from(p) - expected).abs() <= allowed,
                    "softmax row {r} [{i}]: {p} vs {expected}"
                );
            }
        }
    }
}
