//! Seeded mutations of the released model's files (`config.json`, both safetensors files):
//! every case is a typed error or a value that passes the format's own checks, never a
//! panic or an abort. `MUTATION_CASES` and `MUTATION_SEED` run a longer campaign (see the
//! `mutation` crate).
//!
//! The weights campaigns mutate a small model cut from the released one, not the released
//! 3.3 MB file itself: the same tensor names, dtypes, layer count and header layout, every
//! matrix and norm the leading block of the released one (vocabulary 64, width 16, MLP 24),
//! 39 KB in f32, 17 KB in int8. Mutating 3.3 MB takes about 30 ms a case in a debug build
//! (copies and scans of the whole file), and almost every byte-level mutation would land in
//! float data rather than in the header; the released `config.json` is mutated as it is, and each of its cases that
//! parses loads the released f32 weights.
//!
//! The weights are parsed with [`Weights::from_safetensors`] and wrapped with
//! [`Transformer::new`], not [`Transformer::from_safetensors`], which also hashes the bytes
//! for the run record: hashing is not parsing, and 1,000 SHA-256 digests of 3.3 MB in a
//! debug build would take most of the campaign's time.

use std::path::PathBuf;

use model::{
    Linear, ModelConfig, ModelError, Transformer, Weights, MAX_PARAMETER_BYTES, MAX_WORKING_BYTES,
};
use mutation::{campaign, Kind};

fn released(file: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/decode-lab-tiny-v1")
        .join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn released_config() -> ModelConfig {
    ModelConfig::from_json(&String::from_utf8(released("config.json")).unwrap()).unwrap()
}

/// The config's shapes, the part the weights must agree with.
fn shapes(c: &ModelConfig) -> [usize; 7] {
    [
        c.vocab_size,
        c.d_model,
        c.n_layers,
        c.n_heads,
        c.n_kv_heads,
        c.d_ff,
        c.context_len,
    ]
}

/// Weights that loaded must have the config's shapes, only finite values, positive int8
/// scales, survive a write and a read unchanged, and run: a short prefill gives finite
/// logits of the vocabulary's length, or a non-finite-logit error.
fn check_weights(c: &ModelConfig, w: Weights) -> Result<(), String> {
    let (d, kv, ff) = (c.d_model, c.kv_dim(), c.d_ff);
    let mut matrices = vec![("embed", &w.embed, c.vocab_size, d)];
    if w.layers.len() != c.n_layers {
        return Err(format!(
            "{} layers for n_layers {}",
            w.layers.len(),
            c.n_layers
        ));
    }
    let mut norms = vec![&w.norm];
    for l in &w.layers {
        norms.extend([&l.attn_norm, &l.mlp_norm]);
        for ((name, m), (rows, cols)) in l.matrices().into_iter().zip([
            (d, d),
            (kv, d),
            (kv, d),
            (d, d),
            (ff, d),
            (ff, d),
            (d, ff),
        ]) {
            matrices.push((name, m, rows, cols));
        }
    }
    if let Some(n) = norms
        .iter()
        .find(|n| n.len() != d || !n.iter().all(|v| v.is_finite()))
    {
        return Err(format!("a norm of {} values, or not finite", n.len()));
    }
    for (name, m, rows, cols) in matrices {
        if (m.rows(), m.cols()) != (rows, cols) {
            return Err(format!("{name} is {}x{}", m.rows(), m.cols()));
        }
        let fine = match m {
            Linear::F32 { data, .. } => {
                data.len() == rows * cols && data.iter().all(|v| v.is_finite())
            }
            Linear::Int8 { data, scales, .. } => {
                data.len() == rows * cols
                    && scales.len() == rows
                    && scales.iter().all(|s| s.is_finite() && *s > 0.0)
                    && data.iter().all(|&q| q != i8::MIN)
            }
        };
        if !fine {
            return Err(format!("{name} holds values outside its format"));
        }
    }
    let written = w.to_safetensors().map_err(|e| e.to_string())?;
    if Weights::from_safetensors(c, &written).as_ref() != Ok(&w) {
        return Err("the weights do not survive a write and a read".into());
    }
    let mut m = Transformer::new(c.clone(), w, "mutated".into());
    // Three tokens, or as many as the context holds.
    let prompt = &[1, 2, 3][..c.context_len.min(3)];
    match m.prefill(prompt) {
        Ok(logits) if logits.len() == c.vocab_size && logits.iter().all(|v| v.is_finite()) => {
            Ok(())
        }
        Ok(logits) => Err(format!("{} logits, or not all finite", logits.len())),
        Err(ModelError::NonFiniteLogit { position, .. }) if position + 1 == prompt.len() => Ok(()),
        Err(e) => Err(format!("a valid prompt failed: {e}")),
    }
}

#[test]
fn mutated_configs_are_typed_errors_or_consistent() {
    let valid = released("config.json");
    let weights = released("model.f32.safetensors");
    let original = released_config();
    let mut loaded = 0;
    campaign("config.json", &valid, Kind::Json, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(());
        };
        let Ok(c) = ModelConfig::from_json(text) else {
            return Ok(());
        };
        loaded += 1;
        let (parameters, working) = (c.parameter_bytes(), c.working_bytes());
        if parameters.is_none_or(|b| b > MAX_PARAMETER_BYTES)
            || working.is_none_or(|b| b > MAX_WORKING_BYTES)
        {
            return Err(format!("accepted {parameters:?} and {working:?} bytes"));
        }
        if c.head_dim() % 2 != 0 || c.n_heads % c.n_kv_heads != 0 {
            return Err("accepted inconsistent heads".into());
        }
        // Small enough to build: the cache and rotary tables have the sizes the shapes say.
        if working.is_some_and(|b| b <= 32 << 20) {
            let cache = model::KvCache::new(&c).allocated_bytes();
            if cache != 2 * c.n_layers * c.context_len * c.kv_dim() * 4 {
                return Err(format!("a KV cache of {cache} bytes"));
            }
            let (cos, sin) = c.rope_tables();
            let pairs = c.context_len * c.head_dim() / 2;
            if cos.len() != pairs || sin.len() != pairs {
                return Err("rotary tables of the wrong size".into());
            }
            if !cos.iter().chain(&sin).all(|v| v.is_finite()) {
                return Err("rotary tables that are not finite".into());
            }
        }
        // The released weights load only under the released shapes.
        match Weights::from_safetensors(&c, &weights) {
            Ok(w) if shapes(&c)[..6] == shapes(&original)[..6] => check_weights(&c, w),
            Ok(_) => Err(format!(
                "weights loaded under other shapes {:?}",
                shapes(&c)
            )),
            // The context length is not in the weights.
            Err(_) if shapes(&c)[..6] != shapes(&original)[..6] => Ok(()),
            Err(e) => Err(format!(
                "the released weights fail under a good config: {e}"
            )),
        }
    });
    assert!(loaded > 0, "no mutated config.json loaded");
    eprintln!("config.json: {loaded} mutated files loaded and passed the checks");
}

/// The leading `rows` × `cols` block of a matrix (and its leading scales).
fn cut(m: &Linear, rows: usize, cols: usize) -> Linear {
    let block = |data: &[f32]| -> Vec<f32> {
        data.chunks_exact(m.cols())
            .take(rows)
            .flat_map(|row| row[..cols].to_vec())
            .collect()
    };
    match m {
        Linear::F32 { data, .. } => Linear::F32 {
            rows,
            cols,
            data: block(data),
        },
        Linear::Int8 { data, scales, .. } => Linear::Int8 {
            rows,
            cols,
            data: data
                .chunks_exact(m.cols())
                .take(rows)
                .flat_map(|row| row[..cols].to_vec())
                .collect(),
            scales: scales[..rows].to_vec(),
        },
    }
}

/// The small model cut from the released `file` (see the module's documentation).
fn small_model(file: &str) -> (ModelConfig, Vec<u8>) {
    let big = released_config();
    let weights = Weights::from_safetensors(&big, &released(file)).unwrap();
    let c = ModelConfig {
        vocab_size: 64,
        d_model: 16,
        d_ff: 24,
        ..big.clone()
    };
    let (d, kv, ff) = (c.d_model, c.kv_dim(), c.d_ff);
    let small = Weights {
        embed: cut(&weights.embed, c.vocab_size, d),
        layers: weights
            .layers
            .iter()
            .map(|l| model::Layer {
                attn_norm: l.attn_norm[..d].to_vec(),
                q: cut(&l.q, d, d),
                k: cut(&l.k, kv, d),
                v: cut(&l.v, kv, d),
                o: cut(&l.o, d, d),
                mlp_norm: l.mlp_norm[..d].to_vec(),
                gate: cut(&l.gate, ff, d),
                up: cut(&l.up, ff, d),
                down: cut(&l.down, d, ff),
            })
            .collect(),
        norm: weights.norm[..d].to_vec(),
    };
    assert_eq!(small.precision(), weights.precision());
    (c, small.to_safetensors().unwrap())
}

fn weights_campaign(file: &str) {
    let (config, valid) = small_model(file);
    check_weights(&config, Weights::from_safetensors(&config, &valid).unwrap()).unwrap();
    let mut loaded = 0;
    campaign(
        file,
        &valid,
        Kind::Safetensors,
        |bytes| match Weights::from_safetensors(&config, bytes) {
            Err(_) => Ok(()),
            Ok(w) => {
                loaded += 1;
                check_weights(&config, w)
            }
        },
    );
    // Damage that leaves a valid file (a flipped bit in a weight) reaches the checks too.
    assert!(loaded > 0, "no mutated {file} loaded");
    eprintln!(
        "{file} (cut to {} bytes): {loaded} mutated files loaded and ran",
        valid.len()
    );
}

#[test]
fn mutated_f32_weights_are_typed_errors_or_consistent() {
    weights_campaign("model.f32.safetensors");
}

#[test]
fn mutated_int8_weights_are_typed_errors_or_consistent() {
    weights_campaign("model.int8.safetensors");
}
