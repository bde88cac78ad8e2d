//! The CPU reference pass against an independent, deliberately naive transformer written
//! here (no cache, no blocks, one position at a time from scratch), and the properties the
//! lab relies on: cache equivalence, GQA head mapping, int8 tolerance, cache size, errors.

use model::{Layer, Linear, ModelConfig, ModelError, Transformer, Weights};

/// Logits of the cached pass and the naive one agree to this (f32 arithmetic, ~10 layers
/// of sums in different orders).
const TOLERANCE: f32 = 1e-4;

fn config(n_heads: usize, n_kv_heads: usize) -> ModelConfig {
    ModelConfig {
        name: "test-tiny".into(),
        vocab_size: 37,
        d_model: 24,
        n_layers: 2,
        n_heads,
        n_kv_heads,
        d_ff: 40,
        context_len: 16,
        rope_theta: 10_000.0,
        norm_eps: 1e-5,
        files: Vec::new(),
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.6
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }

    fn linear(&mut self, rows: usize, cols: usize) -> Linear {
        Linear::F32 {
            rows,
            cols,
            data: self.vec(rows * cols),
        }
    }
}

fn random_weights(c: &ModelConfig, seed: u64) -> Weights {
    let mut r = Rng(seed);
    let (d, kv, ff) = (c.d_model, c.kv_dim(), c.d_ff);
    Weights {
        embed: r.linear(c.vocab_size, d),
        layers: (0..c.n_layers)
            .map(|_| Layer {
                attn_norm: r.vec(d).iter().map(|x| 1.0 + x).collect(),
                q: r.linear(d, d),
                k: r.linear(kv, d),
                v: r.linear(kv, d),
                o: r.linear(d, d),
                mlp_norm: r.vec(d).iter().map(|x| 1.0 + x).collect(),
                gate: r.linear(ff, d),
                up: r.linear(ff, d),
                down: r.linear(d, ff),
            })
            .collect(),
        norm: r.vec(d).iter().map(|x| 1.0 + x).collect(),
    }
}

fn f32s(m: &Linear) -> &[f32] {
    match m {
        Linear::F32 { data, .. } => data,
        Linear::Int8 { .. } => panic!("the naive reference reads f32 weights"),
    }
}

/// Logits after the last of `tokens`, recomputed from nothing.
fn naive(c: &ModelConfig, w: &Weights, tokens: &[u32]) -> Vec<f32> {
    let d = c.d_model;
    let hd = c.head_dim();
    let matvec = |m: &Linear, x: &[f32]| -> Vec<f32> {
        let data = f32s(m);
        (0..m.rows())
            .map(|r| (0..m.cols()).map(|j| data[r * m.cols() + j] * x[j]).sum())
            .collect()
    };
    let norm = |x: &[f32], g: &[f32]| -> Vec<f32> {
        let ms: f32 = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
        x.iter()
            .zip(g)
            .map(|(v, g)| v / (ms + c.norm_eps).sqrt() * g)
            .collect()
    };
    let rotate = |v: &[f32], pos: usize| -> Vec<f32> {
        let half = hd / 2;
        let mut out = v.to_vec();
        for i in 0..half {
            let angle = pos as f64 * (c.rope_theta as f64).powf(-2.0 * i as f64 / hd as f64);
            let (cos, sin) = (angle.cos() as f32, angle.sin() as f32);
            out[i] = v[i] * cos - v[i + half] * sin;
            out[i + half] = v[i] * sin + v[i + half] * cos;
        }
        out
    };
    let embed = f32s(&w.embed);
    let mut xs: Vec<Vec<f32>> = tokens
        .iter()
        .map(|&t| embed[t as usize * d..(t as usize + 1) * d].to_vec())
        .collect();
    for layer in &w.layers {
        let normed: Vec<Vec<f32>> = xs.iter().map(|x| norm(x, &layer.attn_norm)).collect();
        let qs: Vec<Vec<f32>> = normed.iter().map(|x| matvec(&layer.q, x)).collect();
        let ks: Vec<Vec<f32>> = normed.iter().map(|x| matvec(&layer.k, x)).collect();
        let vs: Vec<Vec<f32>> = normed.iter().map(|x| matvec(&layer.v, x)).collect();
        let mut next = xs.clone();
        for t in 0..xs.len() {
            let mut attended = vec![0.0f32; d];
            for h in 0..c.n_heads {
                let g = h * c.n_kv_heads / c.n_heads;
                let q = rotate(&qs[t][h * hd..(h + 1) * hd], t);
                let scores: Vec<f32> = (0..=t)
                    .map(|p| {
                        let k = rotate(&ks[p][g * hd..(g + 1) * hd], p);
                        q.iter().zip(&k).map(|(a, b)| a * b).sum::<f32>() / (hd as f32).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f32 = e.iter().sum();
                for p in 0..=t {
                    for i in 0..hd {
                        attended[h * hd + i] += e[p] / total * vs[p][g * hd + i];
                    }
                }
            }
            let o = matvec(&layer.o, &attended);
            for i in 0..d {
                next[t][i] += o[i];
            }
        }
        for x in next.iter_mut() {
            let n = norm(x, &layer.mlp_norm);
            let gate = matvec(&layer.gate, &n);
            let up = matvec(&layer.up, &n);
            let act: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let down = matvec(&layer.down, &act);
            for i in 0..d {
                x[i] += down[i];
            }
        }
        xs = next;
    }
    let last = norm(xs.last().unwrap(), &w.norm);
    matvec(&w.embed, &last)
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

const TOKENS: [u32; 11] = [3, 17, 0, 36, 5, 5, 12, 29, 8, 1, 20];

#[test]
fn prefill_then_decode_matches_the_naive_recompute() {
    for (heads, kv_heads) in [(4, 2), (4, 4), (4, 1), (6, 3)] {
        let c = config(heads, kv_heads);
        let w = random_weights(&c, 7 + heads as u64 * 10 + kv_heads as u64);
        let mut m = Transformer::new(c.clone(), w.clone(), "test".into());
        let prompt = 4;
        let mut got = vec![m.prefill(&TOKENS[..prompt]).unwrap().to_vec()];
        for &t in &TOKENS[prompt..] {
            got.push(m.decode_step(t).unwrap().to_vec());
        }
        for (i, logits) in got.iter().enumerate() {
            let expected = naive(&c, &w, &TOKENS[..prompt + i]);
            let diff = max_diff(logits, &expected);
            assert!(
                diff <= TOLERANCE,
                "{heads} heads / {kv_heads} kv: position {} differs by {diff}",
                prompt + i
            );
        }
        // Prefill of every prefix (no decode) gives the same logits as the cached decode,
        // and so does one prefill that returns every position.
        let recomputed = m.logits_at_every_position(&TOKENS).unwrap();
        let every = m.prefill_all(&TOKENS).unwrap().to_vec();
        for (i, logits) in got.iter().enumerate() {
            let position = prompt - 1 + i;
            assert!(max_diff(logits, &recomputed[position]) <= 1e-5);
            assert!(max_diff(logits, &every[position * 37..(position + 1) * 37]) <= 1e-5);
        }
    }
}

#[test]
fn grouped_query_attention_equals_multi_head_with_shared_heads() {
    // GQA with 2 KV heads for 4 query heads is MHA whose KV heads come in identical pairs.
    let gqa = config(4, 2);
    let w = random_weights(&gqa, 99);
    let mha = config(4, 4);
    let mut shared = w.clone();
    let hd = gqa.head_dim();
    for layer in shared.layers.iter_mut() {
        for m in [&mut layer.k, &mut layer.v] {
            let Linear::F32 { data, cols, .. } = m else {
                unreachable!()
            };
            let cols = *cols;
            let rows: Vec<f32> = (0..4)
                .flat_map(|h| data[(h / 2) * hd * cols..(h / 2 + 1) * hd * cols].to_vec())
                .collect();
            *m = Linear::F32 {
                rows: 4 * hd,
                cols,
                data: rows,
            };
        }
    }
    let a = Transformer::new(gqa, w, "gqa".into())
        .logits_at_every_position(&TOKENS)
        .unwrap();
    let b = Transformer::new(mha, shared, "mha".into())
        .logits_at_every_position(&TOKENS)
        .unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert!(max_diff(x, y) <= 1e-5);
    }
}

#[test]
fn kv_cache_bytes_follow_the_formula() {
    let c = config(4, 2);
    let m = Transformer::new(c.clone(), random_weights(&c, 1), "t".into());
    let (l, b, s, h_kv, d_head, q) = (c.n_layers, 1, c.context_len, c.n_kv_heads, c.head_dim(), 4);
    assert_eq!(
        m.cache().allocated_bytes(),
        2 * l * b * s * h_kv * d_head * q
    );
}

#[test]
fn int8_agrees_with_f32_within_tolerance() {
    let c = config(4, 2);
    let w = random_weights(&c, 5);
    let q = w.quantized();
    assert_eq!(q.precision(), model::Precision::Int8);
    let a = Transformer::new(c.clone(), w, "f32".into())
        .logits_at_every_position(&TOKENS)
        .unwrap();
    let b = Transformer::new(c, q, "int8".into())
        .logits_at_every_position(&TOKENS)
        .unwrap();
    for (x, y) in a.iter().zip(&b) {
        let scale = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        // Per-row int8 keeps each weight within half a step (max|row| / 254): logits move
        // by a few percent of their range at most.
        assert!(
            max_diff(x, y) <= 0.05 * scale,
            "int8 differs by {} of {scale}",
            max_diff(x, y)
        );
    }
}

#[test]
fn safetensors_round_trip_in_both_precisions() {
    let c = config(4, 2);
    let w = random_weights(&c, 3);
    for weights in [w.clone(), w.quantized()] {
        let bytes = weights.to_safetensors().unwrap();
        assert_eq!(Weights::from_safetensors(&c, &bytes).unwrap(), weights);
    }
    let mut m = Transformer::from_safetensors(c.clone(), &w.to_safetensors().unwrap()).unwrap();
    assert_eq!(m.weights_hash().len(), 64);
    assert_eq!(
        m.prefill(&TOKENS).unwrap(),
        Transformer::new(c, w, "x".into()).prefill(&TOKENS).unwrap()
    );
}

#[test]
fn bad_weights_and_inputs_are_typed_errors() {
    let c = config(4, 2);
    let w = random_weights(&c, 3);
    let bytes = w.to_safetensors().unwrap();
    assert!(matches!(
        Weights::from_safetensors(&c, &bytes[..bytes.len() / 2]),
        Err(ModelError::Safetensors(_))
    ));
    assert!(matches!(
        Weights::from_safetensors(&c, b"not a file"),
        Err(ModelError::Safetensors(_))
    ));
    let wider = ModelConfig {
        d_ff: 41,
        ..c.clone()
    };
    assert_eq!(
        Weights::from_safetensors(&wider, &bytes)
            .unwrap_err()
            .to_string(),
        "tensor \"layers.0.mlp.gate.weight\" has shape [40, 24], but the config needs [41, 24]"
    );
    let deeper = ModelConfig {
        n_layers: 3,
        ..c.clone()
    };
    assert_eq!(
        Weights::from_safetensors(&deeper, &bytes),
        Err(ModelError::MissingTensor(
            "layers.2.attn_norm.weight".into()
        ))
    );
    let mut poisoned = w.clone();
    poisoned.norm[5] = f32::NAN;
    assert!(matches!(
        Weights::from_safetensors(&c, &poisoned.to_safetensors().unwrap()),
        Err(ModelError::NonFiniteWeight { index: 5, .. })
    ));
    let odd = ModelConfig {
        n_kv_heads: 3,
        ..c.clone()
    };
    assert_eq!(
        Weights::from_safetensors(&odd, &bytes)
            .unwrap_err()
            .to_string(),
        "the model config is inconsistent: n_kv_heads 3 does not divide n_heads 4"
    );
    assert!(matches!(
        ModelConfig::from_json("{\"name\": 3}"),
        Err(ModelError::ConfigJson(_))
    ));

    let mut m = Transformer::new(c.clone(), w, "t".into());
    assert_eq!(m.prefill(&[]).unwrap_err(), ModelError::EmptyPrompt);
    assert_eq!(
        m.prefill(&[40]).unwrap_err(),
        ModelError::TokenOutOfRange { id: 40, vocab: 37 }
    );
    assert_eq!(
        m.prefill(&[1; 17]).unwrap_err(),
        ModelError::ContextFull {
            needed: 17,
            context: 16
        }
    );
    m.prefill(&[1; 16]).unwrap();
    assert_eq!(
        m.decode_step(2).unwrap_err(),
        ModelError::ContextFull {
            needed: 17,
            context: 16
        }
    );
}
