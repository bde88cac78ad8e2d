//! The one error type of the policy crate: every variant names the offending value.

use thiserror::Error;

/// Why a policy step (or a policy configuration) was refused.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum PolicyError {
    #[error("the vocabulary is empty: there are no logits to choose from")]
    EmptyVocabulary,
    #[error("logit {index} is {value}, but every logit must be a finite number")]
    NonFiniteLogit { index: usize, value: f64 },
    #[error(
        "logit {index} divided by temperature {temperature} is {value}, too large for a float"
    )]
    ScaledLogitOverflow {
        index: usize,
        value: f64,
        temperature: f64,
    },
    #[error("temperature {0} is invalid: it must be a number at least 0 (0 means greedy)")]
    InvalidTemperature(f64),
    #[error("top-p {0} is invalid: it must be greater than 0 and at most 1")]
    InvalidTopP(f64),
    #[error("min-p {0} is invalid: it must be between 0 and 1")]
    InvalidMinP(f64),
    #[error("top-k {top_k} is invalid here: it must be between 1 and the vocabulary size {vocab}")]
    InvalidTopK { top_k: usize, vocab: usize },
    #[error("repetition penalty {0} is invalid: it must be a number greater than 0 (1 is off)")]
    InvalidRepetitionPenalty(f64),
    #[error("{name} {value} is invalid: it must be a finite number")]
    NonFiniteParameter { name: &'static str, value: f64 },
    #[error("{role} token id {id} is out of range for a vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        role: &'static str,
        id: u32,
        vocab: usize,
    },
    #[error("every one of the {vocab} tokens is forbidden or masked, so nothing can be chosen")]
    AllTokensMasked { vocab: usize },
}
