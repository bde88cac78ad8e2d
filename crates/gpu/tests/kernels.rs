//! Each kernel against a CPU formula (sums in f64), on the model's shapes and on awkward
//! ones that are not multiples of the workgroup or tile sizes. Declared tolerances:
//! - gathers and cache writes move values and must be exact;
//! - sums (matmul, RMSNorm, attention, softmax) may differ from the f64 formula by
//!   `SUM_TOLERANCE` times the sum of the absolute values of their terms (f32 rounding in
//!   another order);
//! - element-wise maths (rope, SwiGLU) by `ELEMENT_TOLERANCE` relative.

mod common;

use common::{gpu, Random};
use gpu::ops::Ops;
use model::Linear;

const SUM_TOLERANCE: f64 = 2e-6;
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
                let term = f64::from(a) * f64::from(b);
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
    let ops = Ops::new(&device);
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

#[test]
fn matmul_accumulates_onto_the_residual_stream() {
    let Some(device) = gpu("matmul_accumulate") else {
        return;
    };
    let ops = Ops::new(&device);
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

#[test]
fn rope_turns_each_pair_by_the_tables_angle() {
    let Some(device) = gpu("rope") else { return };
    let ops = Ops::new(&device);
    let mut random = Random::new(5);
    let config = common::config();
    let (cos, sin) = config.rope_tables();
    let head_dim = config.head_dim();
    let half = head_dim / 2;
    for (n, heads, start) in [(1, 4, 0), (1, 2, 255), (7, 4, 100), (13, 3, 3)] {
        let v = random.f32s(n * heads * head_dim, 2.0);
        let got = pollster::block_on(ops.rope(&v, heads, head_dim, start, (&cos, &sin))).unwrap();
        for t in 0..n {
            for h in 0..heads {
                let base = (t * heads + h) * head_dim;
                for i in 0..half {
                    let at = (start + t) * half + i;
                    let (c, s) = (f64::from(cos[at]), f64::from(sin[at]));
                    let (a, b) = (f64::from(v[base + i]), f64::from(v[base + i + half]));
                    for (index, value) in
                        [(base + i, a * c - b * s), (base + i + half, a * s + b * c)]
                    {
                        let allowed = ELEMENT_TOLERANCE * (a.abs() + b.abs()).max(1e-3);
                        assert!(
                            (f64::from(got[index]) - value).abs() <= allowed,
                            "rope n={n} heads={heads} start={start} at {index}: {} vs {value}",
                            got[index]
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn kv_store_writes_the_documented_layout() {
    let Some(device) = gpu("kv_store") else {
        return;
    };
    let ops = Ops::new(&device);
    let mut random = Random::new(6);
    let (layers, kv_heads, head_dim, context) = (3, 2, 5, 11);
    let size = layers * kv_heads * context * head_dim;
    let (k_cache, v_cache) = (random.f32s(size, 1.0), random.f32s(size, 1.0));
    let (n, layer, start) = (4, 1, 6);
    let k = random.f32s(n * kv_heads * head_dim, 1.0);
    let v = random.f32s(n * kv_heads * head_dim, 1.0);
    let (keys, values) = pollster::block_on(ops.kv_store(
        &k,
        &v,
        (&k_cache, &v_cache),
        layer,
        kv_heads,
        head_dim,
        context,
        start,
    ))
    .unwrap();
    let (mut expected_k, mut expected_v) = (k_cache.clone(), v_cache.clone());
    for t in 0..n {
        for h in 0..kv_heads {
            for i in 0..head_dim {
                let at = ((layer * kv_heads + h) * context + start + t) * head_dim + i;
                expected_k[at] = k[(t * kv_heads + h) * head_dim + i];
                expected_v[at] = v[(t * kv_heads + h) * head_dim + i];
            }
        }
    }
    assert_eq!(keys, expected_k);
    assert_eq!(values, expected_v);
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
                    let k = &k_cache[base + p * head_dim..base + (p + 1) * head_dim];
                    qh.iter()
                        .zip(k)
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
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
    for len in [352, 1, 1001] {
        let (gate, up) = (random.f32s(len, 6.0), random.f32s(len, 2.0));
        let got = pollster::block_on(ops.swiglu(&gate, &up)).unwrap();
        for i in 0..len {
            let g = f64::from(gate[i]);
            let expected = g / (1.0 + (-g).exp()) * f64::from(up[i]);
            let allowed = ELEMENT_TOLERANCE * expected.abs().max(1e-3);
            assert!(
                (f64::from(got[i]) - expected).abs() <= allowed,
                "swiglu[{i}]: {} vs {expected}",
                got[i]
            );
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
