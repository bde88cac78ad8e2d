//! The one error type of the model crate: every variant names the offending value.

use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq)]
pub enum ModelError {
    #[error("the model config is not valid JSON for this model: {0}")]
    ConfigJson(String),
    #[error("the model config is inconsistent: {0}")]
    ConfigInvalid(String),
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
    #[error("{needed} tokens do not fit in the context of {context} tokens")]
    ContextFull { needed: usize, context: usize },
}
