//! What the model does with sizes and values it must not trust: shapes beyond their stated
//! maxima, a tokenizer of another vocabulary, weights that disagree with the config or with
//! their own format, and finite weights so large that the forward pass overflows.

use std::collections::HashMap;

use model::{Linear, ModelConfig, ModelError, Transformer, Weights};
use serde_json::Value;

const RELEASED: &str = include_str!("../../../models/decode-lab-tiny-v1/config.json");

/// The released config with `field` set to the JSON `value`, parsed.
fn released_with(field: &str, value: &str) -> Result<ModelConfig, ModelError> {
    let mut json: Value = serde_json::from_str(RELEASED).unwrap();
    json[field] = serde_json::from_str(value).unwrap();
    ModelConfig::from_json(&json.to_string())
}

fn message(field: &str, value: &str) -> String {
    released_with(field, value).unwrap_err().to_string()
}

#[test]
fn every_size_in_config_json_is_held_to_its_maximum_before_allocation() {
    assert_eq!(
        message("context_len", "1000000000000"),
        "context_len 1000000000000 is more than the maximum 65536"
    );
    assert_eq!(
        message("context_len", "18446744073709551615"),
        "context_len 18446744073709551615 is more than the maximum 65536"
    );
    for (field, value, max) in [
        ("vocab_size", "262145", "262144"),
        ("d_model", "1048576", "16384"),
        ("n_layers", "100000", "256"),
        ("n_heads", "512", "256"),
        ("n_kv_heads", "4096", "256"),
        ("d_ff", "4294967296", "65536"),
    ] {
        assert_eq!(
            message(field, value),
            format!("{field} {value} is more than the maximum {max}")
        );
    }
    assert_eq!(
        message("rope_theta", "1e13"),
        "the model config is inconsistent: rope_theta 1e13 must be a number from 1 to 1e12"
    );
    assert_eq!(
        message("rope_theta", "0.5"),
        "the model config is inconsistent: rope_theta 0.5 must be a number from 1 to 1e12"
    );
    assert_eq!(
        message("norm_eps", "1e30"),
        "the model config is inconsistent: norm_eps 1e30 must be a number above 0 and at most 1"
    );
    assert_eq!(
        message("norm_eps", "0"),
        "the model config is inconsistent: norm_eps 0 must be a number above 0 and at most 1"
    );
    // Each within its maximum, together too large: the totals are checked as well.
    let mut json: Value = serde_json::from_str(RELEASED).unwrap();
    json["vocab_size"] = 262_144.into();
    json["d_model"] = 16_384.into();
    assert_eq!(
        ModelConfig::from_json(&json.to_string())
            .unwrap_err()
            .to_string(),
        "the parameters in f32 would take 30342184960 bytes, more than the maximum of \
         1073741824 bytes"
    );
    assert_eq!(
        message("context_len", "65536"),
        "the KV cache, rotary tables, activations and logits of a whole context would take \
         731906048 bytes, more than the maximum of 536870912 bytes"
    );
    // The released model is far inside every limit, and its KV cache is what the working
    // memory counts for it.
    let c = ModelConfig::from_json(RELEASED).unwrap();
    let cache = model::KvCache::new(&c).allocated_bytes() as u64;
    assert_eq!(cache, 2 * 4 * 256 * 64 * 4);
    assert!(c.working_bytes().unwrap() > cache);
    assert_eq!(c.parameter_bytes(), Some(3_346_944));
}

#[test]
fn the_tokenizer_must_have_the_models_vocabulary() {
    let c = ModelConfig::from_json(RELEASED).unwrap();
    assert_eq!(c.check_vocabulary(768), Ok(()));
    let e = c.check_vocabulary(601).unwrap_err();
    assert_eq!(
        e,
        ModelError::VocabularyMismatch {
            tokenizer: 601,
            model: 768
        }
    );
    assert_eq!(
        e.to_string(),
        "the tokenizer has 601 tokens, but the model gives 768 logits (vocab_size): they must \
         be the same vocabulary"
    );
    assert!(c.check_vocabulary(769).is_err());
}

fn config() -> ModelConfig {
    ModelConfig {
        name: "limits".into(),
        vocab_size: 20,
        d_model: 16,
        n_layers: 2,
        n_heads: 2,
        n_kv_heads: 1,
        d_ff: 24,
        context_len: 8,
        rope_theta: 10_000.0,
        norm_eps: 1e-5,
        files: Vec::new(),
    }
}

/// Weights whose every value is `value(i)` for the i-th value made.
fn weights(c: &ModelConfig, mut value: impl FnMut(usize) -> f32) -> Weights {
    let mut i = 0;
    let mut next = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                i += 1;
                value(i)
            })
            .collect()
    };
    Weights::from_fn(c, |rows, cols| Linear::F32 {
        rows,
        cols,
        data: next(rows * cols),
    })
}

fn small(i: usize) -> f32 {
    ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 0.5
}

/// Every weight 3e38 used to give logits of exactly 0 at every step, a uniform draw: the
/// embedding's squares overflow, RMSNorm's mean square is +inf, its scale 1/sqrt(inf) is
/// exactly 0, so every normalised vector, and so every logit, was exactly 0. Now the
/// overflow is carried to the logits as NaN and the pass is an error naming the position.
#[test]
fn absurd_finite_weights_are_an_error_naming_the_position_never_a_uniform_draw() {
    let c = config();
    let huge = weights(&c, |_| 3e38);
    for w in [huge.clone(), huge.quantized()] {
        let mut m = Transformer::new(c.clone(), w, "huge".into());
        assert!(matches!(
            m.prefill(&[1, 2, 3]),
            Err(ModelError::NonFiniteLogit { position: 2, .. })
        ));
        assert!(matches!(
            m.prefill_all(&[1, 2, 3]),
            Err(ModelError::NonFiniteLogit { position: 0, .. })
        ));
        let e = m.prefill(&[4]).unwrap_err().to_string();
        assert!(
            e.starts_with("the forward pass gave a non-finite logit (NaN) at position 0"),
            "{e}"
        );
    }
    // Only the query projection overflows: the scores are infinite, and the attention's
    // softmax used to turn them into an even average of the values (its exp clamped a NaN
    // to e^-87), finite logits from a broken pass.
    let mut w = weights(&c, small);
    for layer in &mut w.layers {
        layer.q = weights(&c, |_| 3e38).layers[0].q.clone();
    }
    let mut m = Transformer::new(c.clone(), w.clone(), "q".into());
    assert!(matches!(
        m.prefill(&[1, 2]),
        Err(ModelError::NonFiniteLogit { position: 1, .. })
    ));
    // A failed step does not count: the cache keeps only the positions that succeeded.
    let mut fine = Transformer::new(c.clone(), weights(&c, small), "fine".into());
    let logits = fine.prefill(&[1, 2]).unwrap().to_vec();
    assert!(logits.iter().all(|v| v.is_finite()));
    assert_eq!(fine.cache().len(), 2);
    assert_eq!(m.cache().len(), 0);
}

#[test]
fn check_logits_names_the_first_non_finite_position_and_id() {
    assert_eq!(model::check_logits(&[0.0, 1.0, -3.0, 2.0], 2, 5), Ok(()));
    assert_eq!(
        model::check_logits(&[0.0, 1.0, f32::INFINITY, 2.0], 2, 5),
        Err(ModelError::NonFiniteLogit {
            position: 6,
            id: 0,
            value: f32::INFINITY
        })
    );
}

/// The file with one more tensor, `name`, of shape `[2]` in F32.
fn with_extra_tensor(bytes: &[u8], name: &str) -> Vec<u8> {
    let file = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let extra = [0u8; 8];
    let mut views: HashMap<String, safetensors::tensor::TensorView<'_>> =
        file.tensors().into_iter().collect();
    views.insert(
        name.to_string(),
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], &extra).unwrap(),
    );
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn weights_must_match_the_config_and_their_own_format_exactly() {
    let c = config();
    let w = weights(&c, small);
    let bytes = w.to_safetensors().unwrap();
    assert_eq!(Weights::from_safetensors(&c, &bytes).unwrap(), w);
    assert_eq!(
        Weights::from_safetensors(&c, &with_extra_tensor(&bytes, "lm_head.weight")),
        Err(ModelError::UnexpectedTensor("lm_head.weight".into()))
    );
    // One int8 matrix among f32 ones: the file would be neither precision.
    let mut mixed = w.clone();
    mixed.layers[1].up = mixed.layers[1].up.quantized();
    assert_eq!(
        Weights::from_safetensors(&c, &mixed.to_safetensors().unwrap())
            .unwrap_err()
            .to_string(),
        "tensor \"layers.1.mlp.up.weight\" is stored as I8, but this model reads F32, as \
         embed.weight is"
    );
    let q = w.quantized();
    assert_eq!(
        Weights::from_safetensors(&c, &q.to_safetensors().unwrap()),
        Ok(q.clone())
    );
    let mut below = q.clone();
    if let Linear::Int8 { data, .. } = &mut below.layers[0].k {
        data[5] = i8::MIN;
    }
    assert_eq!(
        Weights::from_safetensors(&c, &below.to_safetensors().unwrap()),
        Err(ModelError::Int8OutOfRange {
            name: "layers.0.attn.k.weight".into(),
            index: 5
        })
    );
    let mut zero = q;
    if let Linear::Int8 { scales, .. } = &mut zero.embed {
        scales[3] = -1e-30;
    }
    assert_eq!(
        Weights::from_safetensors(&c, &zero.to_safetensors().unwrap())
            .unwrap_err()
            .to_string(),
        "tensor \"embed.scale\" holds the scale -1e-30 at index 3, but scales are positive"
    );
    // A row too small for a positive f32 scale quantises to zeros with scale 1.
    let tiny = Linear::F32 {
        rows: 1,
        cols: 2,
        data: vec![1e-44, 0.0],
    };
    assert_eq!(
        tiny.quantized(),
        Linear::Int8 {
            rows: 1,
            cols: 2,
            data: vec![0, 0],
            scales: vec![1.0]
        }
    );
}

#[test]
fn a_value_of_the_wrong_type_is_named_with_its_field() {
    for (field, value, expected) in [
        (
            "context_len",
            "-1",
            "context_len -1: invalid value: integer `-1`, expected usize",
        ),
        (
            "n_layers",
            "18446744073709551616",
            "n_layers 18446744073709552000: invalid type: floating point \
             `1.8446744073709552e+19`, expected usize",
        ),
        (
            "d_model",
            "\"wide\"",
            "d_model \"wide\": invalid type: string \"wide\", expected usize",
        ),
        (
            "norm_eps",
            "1e300",
            "norm_eps 1e300: it does not fit in a 32-bit float",
        ),
        ("rope_theta", "null", "rope_theta null: expected a number"),
    ] {
        assert_eq!(
            message(field, value),
            format!("the model config is not valid JSON for this model: {expected}")
        );
    }
    // A missing field or a broken text keeps serde's own message.
    assert!(message("name", "3").contains("name 3: expected a string"));
    assert!(ModelConfig::from_json("{")
        .unwrap_err()
        .to_string()
        .contains("EOF"));
}

/// The bad-input table's fixture model (`decode-lab generate --model` on it must fail): the
/// released tokenizer, a config of the same vocabulary, and every matrix 3e38.
#[test]
fn the_bad_input_tables_huge_weights_fixture_is_a_non_finite_logit_error() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/bad_input/files/huge-weights");
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let c = ModelConfig::from_json(&text).unwrap();
    let bytes = std::fs::read(dir.join("model.f32.safetensors")).unwrap();
    c.verify("weights-f32", &bytes).unwrap();
    let mut m = Transformer::from_safetensors(c, &bytes).unwrap();
    assert!(matches!(
        m.prefill(&[71, 72]),
        Err(ModelError::NonFiniteLogit { position: 1, .. })
    ));
}
