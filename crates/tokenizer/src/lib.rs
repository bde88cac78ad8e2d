//! A byte-level BPE tokenizer: 256 byte tokens, learned merges and `<|endoftext|>`, stored in
//! the Hugging Face `tokenizer.json` format so that standard tools read the same file.
//!
//! * [`Tokenizer`] loads and writes `tokenizer.json` ([`Tokenizer::from_json`],
//!   [`Tokenizer::to_json`]), encodes text exactly as the `tokenizers` crate does
//!   ([`Tokenizer::encode`]), encodes arbitrary bytes ([`Tokenizer::encode_bytes`]) and decodes
//!   ids back to bytes ([`Tokenizer::decode`]). It implements [`policy::Vocabulary`].
//! * [`StreamDecoder`] turns ids into text one token at a time without ever emitting half a
//!   character: the bytes of an unfinished UTF-8 sequence wait for the next token.
//! * [`train`] learns the merges from texts, deterministically.
//!
//! # Pre-tokenizer: the GPT-2 split pattern
//!
//! Text is first split by GPT-2's pattern (the Hugging Face `ByteLevel` pre-tokenizer with
//! `use_regex: true` and `add_prefix_space: false`):
//!
//! ```text
//! 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//! ```
//!
//! and BPE merges apply inside each piece only. We chose it over `use_regex: false` because
//! merges then never cross word boundaries: a vocabulary of under a thousand tokens is spent
//! on word pieces (` the`, `ing`, ` eta`) instead of on frequent junctions like `e t` or
//! `.\n`, and the same word gets the same tokens wherever it appears. The cost is that we must
//! reproduce the split exactly; [`pretokenize`] does so with a hand-written scanner (no
//! backtracking regex engine) whose character classes come from `regex-syntax`, the tables
//! the `tokenizers` crate's own regex engine uses. The parity test compares the two.
//!
//! # Ids
//!
//! A trained tokenizer has ids `0..=255` for the bytes `0..=255`, then one id per learned
//! token in the order it was learned, then `<|endoftext|>` (an added special token, also
//! listed in `model.vocab` as GPT-2 does). A loaded file may order its ids differently (GPT-2's
//! does); any dense numbering `0..n` is accepted.
//!
//! # Artifact id
//!
//! [`Tokenizer::artifact_id`] (and [`policy::Vocabulary::id`]) is a name and the SHA-256 (hex)
//! of the `tokenizer.json` text: the text the tokenizer was loaded from, or, for a trained
//! one, the text [`Tokenizer::to_json`] writes.
//!
//! The crate is pure computation: no I/O, no clocks, no randomness, and it builds for
//! `wasm32-unknown-unknown`. Bad input is a [`TokenizerError`] naming the value, never a
//! panic.

#![forbid(unsafe_code)]

mod bpe;
mod byte_level;
mod error;
mod json;
pub mod pretokenize;
mod stream;
mod train;

pub use bpe::{Tokenizer, DRY_BREAKERS, END_OF_TEXT};
pub use byte_level::{byte_to_char, char_to_byte};
pub use error::TokenizerError;
pub use json::{MAX_ADDED_TOKENS, MAX_MERGES, MAX_TOKEN_BYTES, MAX_VOCAB_SIZE};
pub use stream::StreamDecoder;
pub use train::{train, MIN_PAIR_COUNT};
