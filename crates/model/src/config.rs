//! The model's shapes, read from the JSON file that sits beside the weights, and the limits
//! every shape read from a file is held to before anything is allocated.
//!
//! The limits are generous for a model that runs in a browser tab: a wasm32 page has at most
//! 4 GiB of memory, and the f32 weights are held twice (as read and packed for the kernels)
//! beside the file's bytes, so the parameters may take at most [`MAX_PARAMETER_BYTES`] and
//! the memory that grows with the context (KV cache, rotary tables, activations and the
//! logits of a whole-context prefill) at most [`MAX_WORKING_BYTES`]. Sizes are multiplied
//! with checked arithmetic in u64, so no shape can overflow on a 32-bit target either.

use serde::{Deserialize, Serialize};

use policy::Shortest;

use crate::ModelError;

/// The largest `vocab_size` (Gemma's vocabulary is 256 Ki tokens).
pub const MAX_VOCAB_SIZE: usize = 262_144;
/// The largest `d_model`.
pub const MAX_D_MODEL: usize = 16_384;
/// The largest `n_layers`.
pub const MAX_LAYERS: usize = 256;
/// The largest `n_heads` (and so `n_kv_heads`).
pub const MAX_HEADS: usize = 256;
/// The largest `d_ff`.
pub const MAX_D_FF: usize = 65_536;
/// The largest `context_len`.
pub const MAX_CONTEXT_LEN: usize = 65_536;
/// The largest `rope_theta` (published models use 10^4 to 10^7); the smallest is 1, below
/// which the higher rotary pairs would turn faster than the lower ones.
pub const MAX_ROPE_THETA: f32 = 1e12;
/// The largest `norm_eps`: it is added to a mean square, and typical values are 10^-5 or
/// 10^-6.
pub const MAX_NORM_EPS: f32 = 1.0;
/// The most bytes the parameters may take in f32 (1 GiB).
pub const MAX_PARAMETER_BYTES: u64 = 1 << 30;
/// The most bytes the context may take: KV cache, rotary tables, activations and the logits
/// of every position of a whole-context prefill, together (512 MiB).
pub const MAX_WORKING_BYTES: u64 = 1 << 29;

/// One file of a released model, named by its SHA-256 in the config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// What the file is: `weights-f32`, `weights-int8` or `tokenizer`.
    pub role: String,
    /// Path relative to the config file.
    pub path: String,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// A versioned name, for example `decode-lab-tiny-v1`.
    pub name: String,
    pub vocab_size: usize,
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    /// Hidden width of the SwiGLU MLP.
    pub d_ff: usize,
    pub context_len: usize,
    pub rope_theta: f32,
    pub norm_eps: f32,
    /// The released files and their hashes (empty for a model that was never released).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ModelFile>,
}

impl ModelConfig {
    pub fn from_json(text: &str) -> Result<ModelConfig, ModelError> {
        let config: ModelConfig = serde_json::from_str(text)
            .map_err(|e| ModelError::ConfigJson(field_error(text).unwrap_or(e.to_string())))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every shape against its limit (the `MAX_*` constants), the relations between
    /// the shapes, and the memory the model would take, before anything is allocated.
    pub fn validate(&self) -> Result<(), ModelError> {
        let fail = |why: String| Err(ModelError::ConfigInvalid(why));
        for (field, value, max) in [
            ("vocab_size", self.vocab_size, MAX_VOCAB_SIZE),
            ("d_model", self.d_model, MAX_D_MODEL),
            ("n_layers", self.n_layers, MAX_LAYERS),
            ("n_heads", self.n_heads, MAX_HEADS),
            ("n_kv_heads", self.n_kv_heads, MAX_HEADS),
            ("d_ff", self.d_ff, MAX_D_FF),
            ("context_len", self.context_len, MAX_CONTEXT_LEN),
        ] {
            if value == 0 {
                return fail(format!("{field} is 0"));
            }
            if value > max {
                return Err(ModelError::ConfigTooLarge { field, value, max });
            }
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return fail(format!(
                "d_model {} is not a multiple of n_heads {}",
                self.d_model, self.n_heads
            ));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return fail(format!(
                "n_kv_heads {} does not divide n_heads {}",
                self.n_kv_heads, self.n_heads
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return fail(format!(
                "the head dimension {} is odd, but rotary embeddings rotate pairs",
                self.head_dim()
            ));
        }
        // Written so that NaN fails too.
        if !(self.rope_theta >= 1.0 && self.rope_theta <= MAX_ROPE_THETA) {
            return fail(format!(
                "rope_theta {} must be a number from 1 to {}",
                Shortest(self.rope_theta),
                Shortest(MAX_ROPE_THETA)
            ));
        }
        if !(self.norm_eps > 0.0 && self.norm_eps <= MAX_NORM_EPS) {
            return fail(format!(
                "norm_eps {} must be a number above 0 and at most {}",
                Shortest(self.norm_eps),
                Shortest(MAX_NORM_EPS)
            ));
        }
        let parameters = self.parameter_bytes();
        if parameters.is_none_or(|b| b > MAX_PARAMETER_BYTES) {
            return Err(ModelError::MemoryTooLarge {
                what: "the parameters in f32",
                bytes: parameters,
                max: MAX_PARAMETER_BYTES,
            });
        }
        let working = self.working_bytes();
        if working.is_none_or(|b| b > MAX_WORKING_BYTES) {
            return Err(ModelError::MemoryTooLarge {
                what: "the KV cache, rotary tables, activations and logits of a whole context",
                bytes: working,
                max: MAX_WORKING_BYTES,
            });
        }
        Ok(())
    }

    /// Bytes of the parameters in f32: the tied embedding, every layer's matrices and norms,
    /// the final norm. `None` when the count overflows u64.
    pub fn parameter_bytes(&self) -> Option<u64> {
        let [v, d, l, kv, ff] = [
            self.vocab_size,
            self.d_model,
            self.n_layers,
            self.n_kv_heads.checked_mul(self.head_dim())?,
            self.d_ff,
        ]
        .map(|n| n as u64);
        // q and o are [d, d]; k and v [kv, d]; gate, up and down hold d · ff each.
        let layer = sum(&[
            d.checked_mul(d)?.checked_mul(2)?,
            kv.checked_mul(d)?.checked_mul(2)?,
            ff.checked_mul(d)?.checked_mul(3)?,
            d.checked_mul(2)?,
        ])?;
        sum(&[v.checked_mul(d)?, l.checked_mul(layer)?, d])?.checked_mul(4)
    }

    /// Bytes that grow with the context, at the whole context: the KV cache, the rotary
    /// tables, one block's activations and attention scores, and the logits of every
    /// position (what [`Transformer::prefill_all`](crate::Transformer::prefill_all) returns).
    /// `None` when the count overflows u64.
    pub fn working_bytes(&self) -> Option<u64> {
        let [v, d, l, ctx, hd, ff] = [
            self.vocab_size,
            self.d_model,
            self.n_layers,
            self.context_len,
            self.head_dim(),
            self.d_ff,
        ]
        .map(|n| n as u64);
        let kv = (self.n_kv_heads as u64).checked_mul(hd)?;
        let floats = sum(&[
            // Keys and values of every layer.
            l.checked_mul(kv)?.checked_mul(ctx)?.checked_mul(2)?,
            // cos and sin.
            ctx.checked_mul(hd)?,
            // x, normed, q, attended, projected; k, v; gate, up (see `forward::Block`).
            ctx.checked_mul(sum(&[
                d.checked_mul(5)?,
                kv.checked_mul(2)?,
                ff.checked_mul(2)?,
            ])?)?,
            // Two threads' scores of four query rows.
            ctx.checked_next_multiple_of(8)?.checked_mul(8)?,
            ctx.checked_mul(v)?,
        ])?;
        floats.checked_mul(4)
    }

    /// Checks that a tokenizer of `tokenizer_vocab` ids fits this model: the model gives one
    /// logit per id, so the two vocabularies must be the same size, or some logits would
    /// name no token (and ids past the tokenizer's would decode to nothing), or some tokens
    /// could never be drawn. Every loader of a model with its tokenizer calls this.
    pub fn check_vocabulary(&self, tokenizer_vocab: usize) -> Result<(), ModelError> {
        if tokenizer_vocab == self.vocab_size {
            Ok(())
        } else {
            Err(ModelError::VocabularyMismatch {
                tokenizer: tokenizer_vocab,
                model: self.vocab_size,
            })
        }
    }

    /// The file recorded for `role`.
    pub fn file(&self, role: &str) -> Result<&ModelFile, ModelError> {
        self.files
            .iter()
            .find(|f| f.role == role)
            .ok_or_else(|| ModelError::ConfigInvalid(format!("no file is recorded for {role}")))
    }

    /// Checks `bytes` against the hash recorded for `role`.
    pub fn verify(&self, role: &str, bytes: &[u8]) -> Result<(), ModelError> {
        let expected = &self.file(role)?.sha256;
        let got = sha256_hex(bytes);
        if *expected == got {
            Ok(())
        } else {
            Err(ModelError::HashMismatch {
                role: role.to_string(),
                expected: expected.clone(),
                got,
            })
        }
    }

    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Width of the key (and value) projection: all KV heads side by side.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim()
    }

    /// How many query heads share one KV head.
    pub fn group_size(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    /// Rotary embedding tables, "rotate half" convention: cos and sin of
    /// `position · theta^(-2i / head_dim)` for every position and pair i,
    /// `[context_len][head_dim / 2]`, computed in f64 and rounded once. Every forward pass
    /// (CPU and GPU) turns by these same f32 values.
    pub fn rope_tables(&self) -> (Vec<f32>, Vec<f32>) {
        let (half, head_dim) = (self.head_dim() / 2, self.head_dim() as f64);
        let mut cos = Vec::with_capacity(self.context_len * half);
        let mut sin = Vec::with_capacity(self.context_len * half);
        for position in 0..self.context_len {
            for i in 0..half {
                let exponent = -((2 * i) as f64) / head_dim;
                let angle = position as f64 * f64::from(self.rope_theta).powf(exponent);
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        (cos, sin)
    }
}

/// serde's message for a value of the wrong type or range names the value but not the
/// field ("invalid value: integer `-1`, expected usize"): the first field of `text` whose
/// value does not fit its type, named with its value.
fn field_error(text: &str) -> Option<String> {
    use serde::de::IntoDeserializer;
    use serde_json::Value;
    let value: Value = serde_json::from_str(text).ok()?;
    let shown = |v: &Value| {
        let text = match v.as_f64() {
            Some(x) if v.is_f64() => Shortest(x).to_string(),
            _ => v.to_string(),
        };
        match text.char_indices().nth(40) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    };
    value.as_object()?.iter().find_map(|(field, v)| {
        let fits = match field.as_str() {
            "vocab_size" | "d_model" | "n_layers" | "n_heads" | "n_kv_heads" | "d_ff"
            | "context_len" => usize::deserialize(v.clone().into_deserializer())
                .map(drop)
                .map_err(|e: serde_json::Error| e.to_string()),
            "rope_theta" | "norm_eps" => match v.as_f64() {
                Some(x) if x.abs() > f64::from(f32::MAX) => {
                    Err("it does not fit in a 32-bit float".to_string())
                }
                Some(_) => Ok(()),
                None => Err("expected a number".to_string()),
            },
            "name" => v
                .is_string()
                .then_some(())
                .ok_or_else(|| "expected a string".to_string()),
            _ => Ok(()),
        };
        fits.err().map(|why| format!("{field} {}: {why}", shown(v)))
    })
}

/// The sum of `terms`, `None` on overflow.
fn sum(terms: &[u64]) -> Option<u64> {
    terms
        .iter()
        .try_fold(0u64, |total, &t| total.checked_add(t))
}

/// SHA-256 of `bytes` as lower-case hex, the form the config records.
pub use policy::sha256_hex;
