//! The crate's one error type: every variant names the offending value.

use thiserror::Error;

/// Why a `tokenizer.json` could not be loaded, or ids could not be decoded.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TokenizerError {
    /// The text is not JSON, or not the shape of a `tokenizer.json`.
    #[error("tokenizer.json is malformed: {0}")]
    Json(String),
    /// A setting this tokenizer does not implement (so it could not encode like the file says).
    #[error("unsupported tokenizer.json setting {field} = {value}")]
    Unsupported { field: String, value: String },
    /// A count beyond its stated maximum.
    #[error("{what}: {count} entries, more than the maximum {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    /// A token longer than [`crate::MAX_TOKEN_BYTES`].
    #[error("token id {id} has {bytes} bytes, more than the maximum {max}")]
    TokenTooLong { id: u32, bytes: usize, max: usize },
    /// Two vocabulary entries share an id.
    #[error("id {id} is given to both {first:?} and {second:?}")]
    DuplicateId {
        id: u32,
        first: String,
        second: String,
    },
    /// A vocabulary key appears twice.
    #[error("token {token:?} appears twice in model.vocab")]
    DuplicateToken { token: String },
    /// The ids are not dense: `missing` is unused although larger ids exist.
    #[error("no token has id {missing}, but ids go up to {max}")]
    IdGap { missing: u32, max: u32 },
    /// A vocabulary key uses a character outside GPT-2's byte-level alphabet.
    #[error("token {token:?} has the character {ch:?}, which is not in the byte-level alphabet")]
    NotByteLevel { token: String, ch: char },
    /// One of the 256 byte tokens is missing, so some input could not be encoded.
    #[error("the vocabulary has no token for byte 0x{byte:02X} ({ch:?})")]
    MissingByte { byte: u8, ch: char },
    /// A merge is not two tokens separated by one space.
    #[error("merge {merge:?} is not two tokens separated by a space")]
    MalformedMerge { merge: String },
    /// A merge names a token that is not in the vocabulary.
    #[error("merge {merge:?} names the unknown token {token:?}")]
    UnknownMergeToken { merge: String, token: String },
    /// A merge's result is not in the vocabulary.
    #[error("merge {merge:?} makes {result:?}, which is not in the vocabulary")]
    UnknownMergeResult { merge: String, result: String },
    /// The same pair is merged twice.
    #[error("merge {merge:?} is listed twice")]
    DuplicateMerge { merge: String },
    /// An added token disagrees with the model vocabulary or another added token.
    #[error("added token {content:?} with id {id} conflicts with {other:?}")]
    AddedTokenConflict {
        content: String,
        id: u32,
        other: String,
    },
    /// There is no special added token `<|endoftext|>`.
    #[error("tokenizer.json has no special added token \"<|endoftext|>\"")]
    MissingEndOfText,
    /// An id is not in the vocabulary.
    #[error("token id {id} is out of range for a vocabulary of {vocab_size} tokens")]
    IdOutOfRange { id: u32, vocab_size: usize },
}

impl From<serde_json::Error> for TokenizerError {
    fn from(e: serde_json::Error) -> Self {
        TokenizerError::Json(e.to_string())
    }
}
