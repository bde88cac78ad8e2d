//! The one error type of the model crate: every variant names the offending value.

use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq)]
pub enum ModelError {
    #[error("the model config is not valid JSON for this model: {0}")]
    ConfigJson(String),
    #[error("the model config is inconsistent: {0}")]
    ConfigInvalid(String),
    #[error("{field} {value} is more than the maximum {max}")]
    ConfigTooLarge {
        field: &'static str,
        value: usize,
        max: usize,
    },
    #[error("{what} would take {}, more than the maximum of {max} bytes", bytes_text(.bytes))]
    MemoryTooLarge {
        what: &'static str,
        /// `None` when the count does not even fit in 64 bits.
        bytes: Option<u64>,
        max: u64,
    },
    #[error(
        "the tokenizer has {tokenizer} tokens, but the model gives {model} logits \
         (vocab_size): they must be the same vocabulary"
    )]
    VocabularyMismatch { tokenizer: usize, model: usize },
    #[error("the weights file is not a valid safetensors file: {0}")]
    Safetensors(String),
    #[error("the weights file has no tensor named {0:?}")]
    MissingTensor(String),
    #[error("tensor {name:?} has shape {got:?}, but the config needs {expected:?}")]
    Shape {
        name: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error("tensor {name:?} is stored as {got}, but this model reads {expected}")]
    Dtype {
        name: String,
        expected: &'static str,
        got: String,
    },
    #[error("tensor {name:?} holds a non-finite value ({value}) at index {index}")]
    NonFiniteWeight {
        name: String,
        index: usize,
        value: f32,
    },
    #[error(
        "tensor {name:?} holds the scale {} at index {index}, but scales are positive",
        policy::Shortest(*.value)
    )]
    NonPositiveScale {
        name: String,
        index: usize,
        value: f32,
    },
    #[error(
        "tensor {name:?} holds -128 at index {index}, outside the symmetric int8 range -127..=127"
    )]
    Int8OutOfRange { name: String, index: usize },
    #[error("the weights file has a tensor {0:?} that this model does not have")]
    UnexpectedTensor(String),
    #[error("the {role} file has SHA-256 {got}, but the config records {expected}")]
    HashMismatch {
        role: String,
        expected: String,
        got: String,
    },
    #[error("token id {id} is out of range for a vocabulary of {vocab} tokens")]
    TokenOutOfRange { id: u32, vocab: usize },
    #[error("the prompt is empty: the model needs at least one token")]
    EmptyPrompt,
    #[error(
        "the forward pass gave a non-finite logit ({value}) at position {position} (for \
         vocabulary id {id}): the weights or activations overflowed f32"
    )]
    NonFiniteLogit {
        position: usize,
        id: usize,
        value: f32,
    },
    #[error("{needed} tokens do not fit in the context of {context} tokens")]
    ContextFull { needed: usize, context: usize },
}

fn bytes_text(bytes: &Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{b} bytes"),
        None => "more than 2^64 bytes".to_string(),
    }
}
