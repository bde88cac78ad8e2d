//! Streaming decode: text out as tokens come in, never half a character.

use crate::bpe::Tokenizer;
use crate::error::TokenizerError;

/// Turns ids into text one at a time. The bytes of a UTF-8 sequence that is unfinished but
/// could still become valid wait for the next token; bytes that can never be valid are
/// replaced by U+FFFD at once, one per maximal broken sequence, as
/// [`String::from_utf8_lossy`] does. So the concatenated output of every `push` and `finish`
/// equals `String::from_utf8_lossy` of all the bytes.
///
/// It holds no reference to the tokenizer, so it can live next to it anywhere.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<String, TokenizerError> {
        let bytes = tokenizer.token_bytes(id)?;
        Ok(self.push_bytes(bytes))
    }

    /// Adds raw bytes; returns the text that is now complete (possibly empty).
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // `valid` is valid UTF-8 by construction.
                    out.push_str(&String::from_utf8_lossy(valid));
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                        None => {
                            // An unfinished sequence at the end: wait for more bytes.
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
        out
    }

    /// The bytes held back: the start of an unfinished character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Ends the stream: an unfinished character left over becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_an_unfinished_character() {
        let mut d = StreamDecoder::new();
        let euro = "€".as_bytes();
        assert_eq!(d.push_bytes(b"a"), "a");
        assert_eq!(d.push_bytes(&euro[..1]), "");
        assert_eq!(d.push_bytes(&euro[1..2]), "");
        assert_eq!(d.pending(), &euro[..2]);
        assert_eq!(d.push_bytes(&euro[2..]), "€");
        assert_eq!(d.push_bytes(&[0xFF, b'x', 0xE2]), "\u{FFFD}x");
        assert_eq!(d.finish(), "\u{FFFD}");
        assert_eq!(d.finish(), "");
    }
}
