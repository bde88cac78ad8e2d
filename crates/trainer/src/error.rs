//! The one error type of the trainer: every variant says what failed and on what.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum TrainError {
    #[error("candle failed: {0}")]
    Candle(#[from] candle_core::Error),
    #[error(transparent)]
    Model(#[from] model::ModelError),
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("the tokenizer failed: {0}")]
    Tokenizer(String),
    #[error("the corpus is unusable: {0}")]
    Corpus(String),
    #[error("bad argument: {0}")]
    Args(String),
    /// A command-line value its flag does not take.
    #[error("{value:?} is not {expected}")]
    BadValue {
        value: String,
        expected: &'static str,
    },
    #[error("the training state is broken: {0}")]
    State(String),
}

impl TrainError {
    /// An I/O error on `path` while doing `action` ("read", "write", ...).
    pub fn io(
        action: &'static str,
        path: impl AsRef<std::path::Path>,
        source: std::io::Error,
    ) -> Self {
        TrainError::Io {
            action,
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}
