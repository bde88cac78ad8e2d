//! The one error type of the language identifier: training on bad input, and reading a
//! damaged, truncated or foreign model file. Every variant names the offending value.

use thiserror::Error;

/// Why a language identifier could not be trained or read.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum LangIdError {
    #[error("{0} language slices were given: a language identifier needs at least 2")]
    TooFewSlices(usize),
    #[error(
        "slice code {0:?} is invalid: a code is 1 to {max} ASCII letters, digits, '-' or '_'",
        max = crate::MAX_CODE_LEN
    )]
    InvalidCode(String),
    #[error("slice code {0:?} is given twice")]
    DuplicateCode(String),
    #[error("the training text of slice {0:?} is empty")]
    EmptySlice(String),
    #[error("order {0} is not supported: the n-grams here are 1 to {max} characters long", max = crate::MAX_ORDER)]
    UnsupportedOrder(usize),
    #[error("smoothing {0} is invalid: the additive smoothing must be finite and above 0")]
    InvalidSmoothing(f64),
    #[error("minimum count {0} is invalid: an n-gram must be seen at least once to be kept")]
    InvalidMinCount(u32),
    #[error(
        "the training text has {0} distinct characters: at most {max} are supported",
        max = crate::MAX_ALPHABET
    )]
    AlphabetTooLarge(usize),
    #[error(
        "the file does not start with the language identifier's magic bytes (found {found:?})"
    )]
    BadMagic { found: Vec<u8> },
    #[error(
        "language identifier file format version {found} is not supported: this build reads version {supported}"
    )]
    UnsupportedVersion { found: u32, supported: u32 },
    #[error("the file is truncated: its header records {expected} bytes, but there are {found}")]
    Truncated { expected: u64, found: u64 },
    #[error("the file has {extra} bytes after the {expected} its header records")]
    TrailingBytes { expected: u64, extra: u64 },
    #[error(
        "the file is damaged: its SHA-256 trailer is {stored}, but its contents give {computed}"
    )]
    ChecksumMismatch { stored: String, computed: String },
    /// The checksum matched but the contents break the format's rules: written by another
    /// program, or by a bug.
    #[error("the file is malformed at byte {offset}: {problem}")]
    Malformed { offset: usize, problem: String },
}
