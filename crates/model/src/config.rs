//! The model's shapes, read from the JSON file that sits beside the weights.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ModelError;

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
        let config: ModelConfig =
            serde_json::from_str(text).map_err(|e| ModelError::ConfigJson(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the relations between the shapes.
    pub fn validate(&self) -> Result<(), ModelError> {
        let fail = |why: String| Err(ModelError::ConfigInvalid(why));
        for (name, value) in [
            ("vocab_size", self.vocab_size),
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("d_ff", self.d_ff),
            ("context_len", self.context_len),
        ] {
            if value == 0 {
                return fail(format!("{name} is 0"));
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
        if !(self.rope_theta > 0.0 && self.norm_eps > 0.0) {
            return fail(format!(
                "rope_theta {} and norm_eps {} must be positive",
                self.rope_theta, self.norm_eps
            ));
        }
        Ok(())
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

/// SHA-256 of `bytes` as lower-case hex, the form the config records.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}
