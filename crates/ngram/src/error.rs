//! The one error type of the n-gram crate: training on bad input, and reading a damaged,
//! truncated or foreign model file. Every variant names the offending value.

use thiserror::Error;

/// Why a model could not be trained or read.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum NgramError {
    #[error("order {0} is not supported: an n-gram model here has order 1 to {max}", max = crate::MAX_ORDER)]
    UnsupportedOrder(usize),
    #[error(
        "vocabulary size {0} is not supported: it must be 1 to {max} tokens",
        max = crate::MAX_VOCAB
    )]
    UnsupportedVocabulary(u64),
    #[error("token id {id} is out of range for a vocabulary of {vocab} tokens")]
    TokenOutOfRange { id: u32, vocab: u32 },
    #[error(
        "discount {0} is invalid: a Kneser-Ney discount must be greater than 0 and less than 1"
    )]
    InvalidDiscount(f64),
    #[error("tokenizer SHA-256 {0:?} is not 64 lowercase hexadecimal digits")]
    InvalidTokenizerHash(String),
    #[error("the file does not start with the n-gram model's magic bytes (found {found:?})")]
    BadMagic { found: Vec<u8> },
    #[error(
        "n-gram file format version {found} is not supported: this build reads version {supported}"
    )]
    UnsupportedVersion { found: u32, supported: u32 },
    #[error("the file is truncated: its header records {expected} bytes, but there are {found}")]
    Truncated { expected: u64, found: u64 },
    #[error("the file has {extra} bytes after the {expected} its header records")]
    TrailingBytes { expected: u64, extra: u64 },
    #[error(
        "the file is damaged: its checksum is {stored:08x}, but its contents give {computed:08x}"
    )]
    ChecksumMismatch { stored: u32, computed: u32 },
    #[error(
        "the model was trained with the tokenizer whose SHA-256 is {found}, \
         but the tokenizer in use has {expected}: retrain it for this tokenizer"
    )]
    WrongTokenizer { expected: String, found: String },
    /// The checksum matched but the contents break the format's rules: written by another
    /// program, or by a bug.
    #[error("the file is malformed at byte {offset}: {problem}")]
    Malformed { offset: usize, problem: String },
}
