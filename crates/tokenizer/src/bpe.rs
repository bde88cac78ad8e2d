//! The tokenizer itself: vocabulary, merge ranks, encoding (the same merge order as the
//! `tokenizers` crate) and decoding.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use policy::ArtifactId;

use crate::byte_level::{char_to_byte, to_chars};
use crate::error::TokenizerError;
use crate::pretokenize;

/// The end-of-text special token.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// A token added on top of the BPE model (`added_tokens` in `tokenizer.json`): matched in the
/// text before pre-tokenization, never merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AddedToken {
    pub id: u32,
    pub content: String,
    pub special: bool,
    /// Matched in a second pass, after the tokens with `normalized: false` (there is no
    /// normalizer, so only the order differs).
    pub normalized: bool,
}

/// A byte-level BPE tokenizer. See the crate documentation.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    /// Bytes of each id.
    pub(crate) tokens: Vec<Vec<u8>>,
    /// Whether each id is a key of `model.vocab` (added tokens may be, as in GPT-2, or not).
    pub(crate) in_model: Vec<bool>,
    /// Merges in rank order, as pairs of ids.
    pub(crate) merges: Vec<(u32, u32)>,
    /// Pair → (rank, id of the merged token).
    pub(crate) merge_map: HashMap<(u32, u32), (u32, u32)>,
    /// Id of each byte's token.
    pub(crate) byte_ids: [u32; 256],
    /// `model.vocab` keys by their bytes (for `ignore_merges`).
    pub(crate) model_ids: HashMap<Vec<u8>, u32>,
    pub(crate) ignore_merges: bool,
    pub(crate) added: Vec<AddedToken>,
    pub(crate) eot: u32,
    pub(crate) name: String,
    pub(crate) hash: String,
}

/// Lower-case hex SHA-256 of `text`.
pub(crate) fn sha256_hex(text: &str) -> String {
    policy::sha256_hex(text.as_bytes())
}

/// The bytes the Hugging Face `ByteLevel` decoder gives for an added token: its characters
/// through the byte-level alphabet when they all are in it, else its UTF-8 text.
pub(crate) fn added_token_bytes(content: &str) -> Vec<u8> {
    content
        .chars()
        .map(char_to_byte)
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_else(|| content.as_bytes().to_vec())
}

#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    prev: isize,
    next: isize,
    len: usize,
}

/// llama.cpp's default DRY sequence breakers (`common_params_sampling`).
pub const DRY_BREAKERS: [&str; 4] = ["\n", ":", "\"", "*"];
/// llama.cpp's longest breaker tail (`MAX_SEQ_LEN` in `llama_sampler_init_dry`).
const DRY_MAX_TAIL: usize = 20;

impl Tokenizer {
    /// The number of ids, `<|endoftext|>` and other added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of `<|endoftext|>`.
    pub fn end_of_text(&self) -> u32 {
        self.eot
    }

    /// The number of merges.
    pub fn merge_count(&self) -> usize {
        self.merges.len()
    }

    /// The bytes of one token (a token may hold part of a UTF-8 character).
    pub fn token_bytes(&self, id: u32) -> Result<&[u8], TokenizerError> {
        self.tokens
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or(TokenizerError::IdOutOfRange {
                id,
                vocab_size: self.tokens.len(),
            })
    }

    /// The id of a token given by its bytes (a `model.vocab` entry or an added token's text).
    pub fn token_id(&self, bytes: &[u8]) -> Option<u32> {
        self.model_ids.get(bytes).copied().or_else(|| {
            self.added
                .iter()
                .find(|a| a.content.as_bytes() == bytes)
                .map(|a| a.id)
        })
    }

    /// The name and content hash of this tokenizer's `tokenizer.json`.
    pub fn artifact_id(&self) -> ArtifactId {
        ArtifactId {
            name: self.name.clone(),
            hash: self.hash.clone(),
        }
    }

    /// The same tokenizer under another name (the hash stays that of its JSON).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Encodes text as the `tokenizers` crate does with `add_special_tokens = false`: the text
    /// of an added token (such as `<|endoftext|>`) becomes that token; nothing is added.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for (segment, added) in self.split_added(text) {
            match added {
                Some(id) => out.push(id),
                None => self.encode_text(segment, &mut out),
            }
        }
        out
    }

    /// Encodes arbitrary bytes: each valid UTF-8 stretch as [`Tokenizer::encode`] does but
    /// with no added tokens recognised (the bytes are data), each byte of an invalid sequence
    /// as its byte token. `decode(encode_bytes(b)) == b` for every `b`.
    pub fn encode_bytes(&self, bytes: &[u8]) -> Vec<u32> {
        let mut out = Vec::with_capacity(bytes.len() / 3 + 1);
        for chunk in bytes.utf8_chunks() {
            self.encode_text(chunk.valid(), &mut out);
            out.extend(chunk.invalid().iter().map(|&b| self.byte_ids[b as usize]));
        }
        out
    }

    /// DRY's sequence breakers as token sequences: the strings given (llama.cpp's defaults,
    /// [`DRY_BREAKERS`], when none is; none for `none`), each found in the vocabulary by
    /// [`sequence_breakers`](Self::sequence_breakers), every sequence once. A run's record
    /// keeps the sequences, so a replay needs no tokenizer rule.
    pub fn dry_sequence_breakers(&self, given: &[String]) -> Vec<Vec<u32>> {
        let strings: Vec<&str> = match given {
            [] => DRY_BREAKERS.to_vec(),
            [none] if none == "none" => Vec::new(),
            given => given.iter().map(String::as_str).collect(),
        };
        let mut sequences: Vec<Vec<u32>> = Vec::new();
        for text in strings {
            for sequence in self.sequence_breakers(text, DRY_MAX_TAIL) {
                if !sequences.contains(&sequence) {
                    sequences.push(sequence);
                }
            }
        }
        sequences
    }

    /// A DRY sequence breaker's token sequences, as llama.cpp's
    /// `get_overlapping_token_sequences` (`src/llama-sampling.cpp`) finds them: every token
    /// whose bytes contain `text` is a breaker alone; every token whose bytes end with a
    /// prefix of `text` is a breaker followed by the encoding of the rest (at most
    /// `max_tail` tokens). `text` is cut to 40 bytes first, as llama.cpp cuts it. Each
    /// sequence is [head, tail…], heads in id order.
    pub fn sequence_breakers(&self, text: &str, max_tail: usize) -> Vec<Vec<u32>> {
        const MAX_BYTES: usize = 40;
        let text = &text.as_bytes()[..text.len().min(MAX_BYTES)];
        let mut out: Vec<Vec<u32>> = Vec::new();
        let Some(&first) = text.first() else {
            return out;
        };
        for (id, word) in self.tokens.iter().enumerate() {
            let id = id as u32;
            if word.windows(text.len()).any(|w| w == text) {
                out.push(vec![id]);
                continue;
            }
            let heads = out.len();
            for pos in (0..word.len()).filter(|&p| word[p] == first) {
                let overlap = (word.len() - pos).min(text.len());
                if word[pos..pos + overlap] != text[..overlap] {
                    continue;
                }
                let mut sequence = vec![id];
                let mut tail = self.encode_bytes(&text[overlap..]);
                tail.truncate(max_tail);
                sequence.extend(tail);
                if !out[heads..].contains(&sequence) {
                    out.push(sequence);
                }
            }
        }
        out
    }

    /// The bytes of `ids`, concatenated (added tokens give their text).
    pub fn decode(&self, ids: &[u32]) -> Result<Vec<u8>, TokenizerError> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(out)
    }

    /// [`Tokenizer::decode`] as text; a broken UTF-8 sequence becomes U+FFFD.
    pub fn decode_lossy(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        Ok(String::from_utf8_lossy(&self.decode(ids)?).into_owned())
    }

    /// The token's text in `tokenizer.json`'s byte-level alphabet (added tokens: their text).
    pub fn token_string(&self, id: u32) -> Result<String, TokenizerError> {
        let bytes = self.token_bytes(id)?;
        Ok(match self.added.iter().find(|a| a.id == id) {
            Some(a) => a.content.clone(),
            None => to_chars(bytes),
        })
    }

    /// Splits `text` around added tokens, leftmost-longest, first those with
    /// `normalized: false`, then the others in what remains (the `tokenizers` order).
    fn split_added<'t>(&self, text: &'t str) -> Vec<(&'t str, Option<u32>)> {
        let mut parts = vec![(text, None)];
        for normalized in [false, true] {
            let tokens: Vec<&AddedToken> = self
                .added
                .iter()
                .filter(|a| a.normalized == normalized && !a.content.is_empty())
                .collect();
            if tokens.is_empty() {
                continue;
            }
            let mut next = Vec::with_capacity(parts.len());
            for (segment, id) in parts {
                if id.is_some() {
                    next.push((segment, id));
                    continue;
                }
                let mut last = 0;
                let mut i = 0;
                let bytes = segment.as_bytes();
                while i < bytes.len() {
                    let longest = tokens
                        .iter()
                        .filter(|a| bytes[i..].starts_with(a.content.as_bytes()))
                        .max_by_key(|a| a.content.len());
                    match longest {
                        Some(a) => {
                            if last < i {
                                next.push((&segment[last..i], None));
                            }
                            let end = i + a.content.len();
                            next.push((&segment[i..end], Some(a.id)));
                            last = end;
                            i = end;
                        }
                        None => i += 1,
                    }
                }
                if last < bytes.len() {
                    next.push((&segment[last..], None));
                }
            }
            parts = next;
        }
        parts
    }

    /// Pre-tokenizes and merges plain text (no added tokens).
    fn encode_text(&self, text: &str, out: &mut Vec<u32>) {
        for range in pretokenize::split(text) {
            self.encode_piece(text[range].as_bytes(), out);
        }
    }

    /// Merges one piece the way the `tokenizers` crate's `Word::merge_all` does: a min-heap of
    /// (rank, position), stale entries skipped, merged symbols kept at the left position.
    fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if self.ignore_merges {
            if let Some(&id) = self.model_ids.get(piece) {
                out.push(id);
                return;
            }
        }
        if piece.len() == 1 {
            out.push(self.byte_ids[piece[0] as usize]);
            return;
        }
        let n = piece.len() as isize;
        let mut symbols: Vec<Symbol> = piece
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let i = i as isize;
                Symbol {
                    id: self.byte_ids[b as usize],
                    prev: i - 1,
                    next: if i + 1 < n { i + 1 } else { -1 },
                    len: 1,
                }
            })
            .collect();
        let mut queue: BinaryHeap<Reverse<(u32, usize, u32)>> = symbols
            .windows(2)
            .enumerate()
            .filter_map(|(pos, w)| {
                self.merge_map
                    .get(&(w[0].id, w[1].id))
                    .map(|&(rank, new_id)| Reverse((rank, pos, new_id)))
            })
            .collect();
        while let Some(Reverse((_, pos, new_id))) = queue.pop() {
            if symbols[pos].len == 0 || symbols[pos].next < 0 {
                continue;
            }
            let next_pos = symbols[pos].next as usize;
            let right = symbols[next_pos];
            match self.merge_map.get(&(symbols[pos].id, right.id)) {
                Some(&(_, id)) if id == new_id => {}
                _ => continue,
            }
            symbols[pos].id = new_id;
            symbols[pos].len += right.len;
            symbols[pos].next = right.next;
            symbols[next_pos].len = 0;
            if right.next >= 0 {
                symbols[right.next as usize].prev = pos as isize;
            }
            let current = symbols[pos];
            if current.prev >= 0 {
                let prev = current.prev as usize;
                if let Some(&(rank, id)) = self.merge_map.get(&(symbols[prev].id, current.id)) {
                    queue.push(Reverse((rank, prev, id)));
                }
            }
            if current.next >= 0 {
                let next = current.next as usize;
                if let Some(&(rank, id)) = self.merge_map.get(&(current.id, symbols[next].id)) {
                    queue.push(Reverse((rank, pos, id)));
                }
            }
        }
        out.extend(symbols.iter().filter(|s| s.len > 0).map(|s| s.id));
    }
}

impl policy::Vocabulary for Tokenizer {
    fn id(&self) -> ArtifactId {
        self.artifact_id()
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        Tokenizer::encode(self, text)
    }

    /// The token's bytes; an id out of range has none (the empty slice).
    fn token_bytes(&self, id: u32) -> &[u8] {
        Tokenizer::token_bytes(self, id).unwrap_or(&[])
    }
}
