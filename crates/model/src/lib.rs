//! The lab's tiny language model and its CPU reference forward pass.
//!
//! A decoder-only transformer: tied token embeddings, pre-norm RMSNorm, rotary position
//! embeddings (the "rotate half" convention), grouped-query attention (any `n_kv_heads`
//! that divides `n_heads`, so multi-head and multi-query attention are the same code), a
//! SwiGLU MLP and a final RMSNorm. [`Transformer`] runs it on the CPU in f32, or with int8
//! weights (symmetric, one f32 scale per output row), with a preallocated [`KvCache`]:
//! `prefill` takes the whole prompt in one pass under a causal mask, `decode_step` one token.
//!
//! This is the reference every faster path (WebGPU) is checked against. Its kernels are
//! written once over eight f32 lanes (`simd`), compiled plain and with AVX (chosen at run
//! time), and every sum has one fixed order, so the logits are bit-identical on every CPU,
//! with one thread or two (`parallel`: long prefills are split over a second thread), and
//! between prefill and decode. Nothing read from a file is trusted: every shape is held to a
//! stated maximum ([`MAX_CONTEXT_LEN`] and the others, see [`ModelConfig::validate`]) and the
//! weights to the config's shapes before anything is allocated, and a forward pass whose
//! logits are not all finite is an error ([`check_logits`]), never a distribution. It is pure (weights come in as bytes) and builds for wasm32,
//! where it runs on one thread.

mod config;
mod error;
mod forward;
#[cfg(test)]
mod kernel_checks;
mod kv_cache;
mod packed;
mod parallel;
mod simd;
mod weights;

pub use config::{
    sha256_hex, ModelConfig, ModelFile, MAX_CONTEXT_LEN, MAX_D_FF, MAX_D_MODEL, MAX_HEADS,
    MAX_LAYERS, MAX_NORM_EPS, MAX_PARAMETER_BYTES, MAX_ROPE_THETA, MAX_VOCAB_SIZE,
    MAX_WORKING_BYTES,
};
pub use error::ModelError;
pub use forward::{check_logits, Transformer};
pub use kv_cache::KvCache;
pub use weights::{Layer, Linear, Precision, Weights};
