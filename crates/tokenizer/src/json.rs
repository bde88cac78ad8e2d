//! Reading and writing the Hugging Face `tokenizer.json` format (version "1.0", as the
//! `tokenizers` crate 0.23 writes it), restricted to what this tokenizer implements: a BPE
//! model over the byte-level alphabet, the `ByteLevel` pre-tokenizer (`add_prefix_space:
//! false`, `use_regex: true`) and decoder, no normalizer, and added tokens that match
//! anywhere (no `lstrip`, `rstrip` or `single_word`).
//!
//! Counts read from the file are held to stated maxima ([`MAX_VOCAB_SIZE`],
//! [`MAX_ADDED_TOKENS`], [`MAX_MERGES`], [`MAX_TOKEN_BYTES`]) before the lookup tables are
//! built, and ids must number `0..n` densely, so no id read from the file sizes an
//! allocation.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bpe::{added_token_bytes, sha256_hex, AddedToken, Tokenizer, END_OF_TEXT};
use crate::byte_level::{byte_to_char, from_chars, to_chars};
use crate::error::TokenizerError;

/// The most ids a `tokenizer.json` may have (the model crate's largest vocabulary too).
pub const MAX_VOCAB_SIZE: usize = 262_144;
/// The most `added_tokens`: each is looked for at every position of the text.
pub const MAX_ADDED_TOKENS: usize = 4_096;
/// The most `model.merges`: a merge makes a token, so a vocabulary has fewer merges than
/// tokens (GPT-2: 50,000 for 50,257).
pub const MAX_MERGES: usize = MAX_VOCAB_SIZE;
/// The longest token, in bytes (GPT-2's longest is 128 characters).
pub const MAX_TOKEN_BYTES: usize = 1_024;

/// Everything a tokenizer is made of, before the lookup tables are built.
pub(crate) struct Parts {
    /// Bytes of each id.
    pub tokens: Vec<Vec<u8>>,
    /// Whether each id is a `model.vocab` key.
    pub in_model: Vec<bool>,
    /// `(left, right, merged)` in rank order.
    pub merges: Vec<(u32, u32, u32)>,
    pub added: Vec<AddedToken>,
    pub ignore_merges: bool,
}

impl Tokenizer {
    /// Builds the lookup tables. `hash` is that of the JSON text the parts came from; `None`
    /// hashes [`Tokenizer::to_json`].
    pub(crate) fn from_parts(parts: Parts, hash: Option<String>) -> Result<Self, TokenizerError> {
        let mut model_ids = HashMap::new();
        for (id, bytes) in parts.tokens.iter().enumerate() {
            if parts.in_model[id] {
                model_ids.entry(bytes.clone()).or_insert(id as u32);
            }
        }
        let mut byte_ids = [0u32; 256];
        for b in 0..=255u8 {
            byte_ids[b as usize] = *model_ids.get(&vec![b]).ok_or(TokenizerError::MissingByte {
                byte: b,
                ch: byte_to_char(b),
            })?;
        }
        let eot = parts
            .added
            .iter()
            .find(|a| a.content == END_OF_TEXT && a.special)
            .map(|a| a.id)
            .ok_or(TokenizerError::MissingEndOfText)?;
        let mut merge_map = HashMap::with_capacity(parts.merges.len());
        for (rank, &(a, b, merged)) in parts.merges.iter().enumerate() {
            merge_map.insert((a, b), (rank as u32, merged));
        }
        let mut tokenizer = Tokenizer {
            name: format!("byte-level-bpe-{}", parts.tokens.len()),
            tokens: parts.tokens,
            in_model: parts.in_model,
            merges: parts.merges.iter().map(|&(a, b, _)| (a, b)).collect(),
            merge_map,
            byte_ids,
            model_ids,
            ignore_merges: parts.ignore_merges,
            added: parts.added,
            eot,
            hash: String::new(),
        };
        tokenizer.hash = match hash {
            Some(h) => h,
            None => sha256_hex(&tokenizer.to_json()),
        };
        Ok(tokenizer)
    }

    /// Loads a `tokenizer.json`. Its SHA-256 becomes the hash of [`Tokenizer::artifact_id`].
    pub fn from_json(json: &str) -> Result<Self, TokenizerError> {
        let file: FileIn = serde_json::from_str(json)?;
        check_components(&file)?;
        let model = &file.model;
        for (what, count, max) in [
            ("model.vocab", model.vocab.0.len(), MAX_VOCAB_SIZE),
            ("added_tokens", file.added_tokens.len(), MAX_ADDED_TOKENS),
            ("model.merges", model.merges.len(), MAX_MERGES),
        ] {
            if count > max {
                return Err(TokenizerError::TooMany { what, count, max });
            }
        }

        // Ids: model.vocab and added_tokens together must number 0..n exactly.
        let mut by_id: Vec<(u32, &str)> = model
            .vocab
            .0
            .iter()
            .map(|(k, id)| (*id, k.as_str()))
            .collect();
        let mut seen = HashMap::with_capacity(by_id.len());
        for (key, id) in &model.vocab.0 {
            if seen.insert(key.as_str(), *id).is_some() {
                return Err(TokenizerError::DuplicateToken { token: key.clone() });
            }
        }
        let mut added = Vec::with_capacity(file.added_tokens.len());
        for (i, a) in file.added_tokens.iter().enumerate() {
            for (flag, value) in [
                ("single_word", a.single_word),
                ("lstrip", a.lstrip),
                ("rstrip", a.rstrip),
            ] {
                if value {
                    return Err(TokenizerError::Unsupported {
                        field: format!("added_tokens[{i}].{flag} (of {:?})", a.content),
                        value: "true".into(),
                    });
                }
            }
            match seen.get(a.content.as_str()) {
                Some(&id) if id != a.id => {
                    return Err(TokenizerError::AddedTokenConflict {
                        content: a.content.clone(),
                        id: a.id,
                        other: format!("the model.vocab entry with id {id}"),
                    })
                }
                Some(_) => {}
                None => by_id.push((a.id, a.content.as_str())),
            }
            if let Some(b) = added.iter().find(|b: &&AddedToken| b.id == a.id) {
                return Err(TokenizerError::DuplicateId {
                    id: a.id,
                    first: b.content.clone(),
                    second: a.content.clone(),
                });
            }
            added.push(AddedToken {
                id: a.id,
                content: a.content.clone(),
                special: a.special,
                normalized: a.normalized,
            });
        }
        by_id.sort_unstable();
        if let Some(pair) = by_id.windows(2).find(|p| p[0].0 == p[1].0) {
            return Err(TokenizerError::DuplicateId {
                id: pair[0].0,
                first: pair[0].1.to_string(),
                second: pair[1].1.to_string(),
            });
        }
        for (expected, &(id, _)) in by_id.iter().enumerate() {
            if id as usize != expected {
                return Err(TokenizerError::IdGap {
                    missing: expected as u32,
                    max: by_id.last().map_or(0, |l| l.0),
                });
            }
        }
        let n = by_id.len();
        if n > MAX_VOCAB_SIZE {
            return Err(TokenizerError::TooMany {
                what: "model.vocab and added_tokens together",
                count: n,
                max: MAX_VOCAB_SIZE,
            });
        }

        // Bytes of every id.
        let mut tokens = vec![Vec::new(); n];
        let mut in_model = vec![false; n];
        let added_ids: HashSet<u32> = added.iter().map(|a| a.id).collect();
        for (key, id) in &model.vocab.0 {
            in_model[*id as usize] = true;
            if added_ids.contains(id) {
                continue;
            }
            tokens[*id as usize] = from_chars(key).map_err(|ch| TokenizerError::NotByteLevel {
                token: key.clone(),
                ch,
            })?;
        }
        for a in &added {
            tokens[a.id as usize] = added_token_bytes(&a.content);
        }
        if let Some((id, bytes)) = tokens
            .iter()
            .enumerate()
            .find(|(_, t)| t.len() > MAX_TOKEN_BYTES)
        {
            return Err(TokenizerError::TokenTooLong {
                id: id as u32,
                bytes: bytes.len(),
                max: MAX_TOKEN_BYTES,
            });
        }

        // Merges, by model.vocab key as the `tokenizers` crate reads them.
        let mut merges = Vec::with_capacity(model.merges.len());
        let mut pairs = HashMap::with_capacity(model.merges.len());
        for entry in &model.merges {
            let (left, right) = merge_pair(entry)?;
            let shown = format!("{left} {right}");
            let id_of = |token: &str| {
                seen.get(token)
                    .copied()
                    .ok_or_else(|| TokenizerError::UnknownMergeToken {
                        merge: shown.clone(),
                        token: token.to_string(),
                    })
            };
            let (a, b) = (id_of(&left)?, id_of(&right)?);
            let result = format!("{left}{right}");
            let merged = seen.get(result.as_str()).copied().ok_or_else(|| {
                TokenizerError::UnknownMergeResult {
                    merge: shown.clone(),
                    result: result.clone(),
                }
            })?;
            if pairs.insert((a, b), ()).is_some() {
                return Err(TokenizerError::DuplicateMerge { merge: shown });
            }
            merges.push((a, b, merged));
        }

        let parts = Parts {
            tokens,
            in_model,
            merges,
            added,
            ignore_merges: model.ignore_merges.unwrap_or(false),
        };
        Tokenizer::from_parts(parts, Some(sha256_hex(json)))
    }

    /// Writes the Hugging Face `tokenizer.json` (pretty-printed, field order as the
    /// `tokenizers` crate writes it).
    pub fn to_json(&self) -> String {
        let key = |id: u32| -> String {
            match self.added.iter().find(|a| a.id == id) {
                Some(a) => a.content.clone(),
                None => to_chars(&self.tokens[id as usize]),
            }
        };
        let vocab: Vec<(String, u32)> = (0..self.tokens.len() as u32)
            .filter(|&id| self.in_model[id as usize])
            .map(|id| (key(id), id))
            .collect();
        let merges: Vec<(String, String)> =
            self.merges.iter().map(|&(a, b)| (key(a), key(b))).collect();
        let mut added: Vec<AddedOut> = self
            .added
            .iter()
            .map(|a| AddedOut {
                id: a.id,
                content: a.content.clone(),
                single_word: false,
                lstrip: false,
                rstrip: false,
                normalized: a.normalized,
                special: a.special,
            })
            .collect();
        added.sort_by_key(|a| a.id);
        let byte_level = ByteLevelOut {
            kind: "ByteLevel",
            add_prefix_space: false,
            trim_offsets: true,
            use_regex: true,
        };
        let file = FileOut {
            version: "1.0",
            truncation: None,
            padding: None,
            added_tokens: added,
            normalizer: None,
            pre_tokenizer: byte_level,
            post_processor: None,
            decoder: byte_level,
            model: ModelOut {
                kind: "BPE",
                dropout: None,
                unk_token: None,
                continuing_subword_prefix: None,
                end_of_word_suffix: None,
                fuse_unk: false,
                byte_fallback: false,
                ignore_merges: self.ignore_merges,
                vocab: OrderedVocab(vocab),
                merges,
            },
        };
        // Serialising plain structs, strings and integers cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }
}

/// Checks the parts of the pipeline other than the model.
fn check_components(file: &FileIn) -> Result<(), TokenizerError> {
    let unsupported = |field: &str, value: &Value| TokenizerError::Unsupported {
        field: field.to_string(),
        value: value.to_string(),
    };
    if let Some(v) = &file.version {
        if v != "1.0" {
            return Err(unsupported("version", &Value::String(v.clone())));
        }
    }
    for (field, value) in [
        ("truncation", &file.truncation),
        ("padding", &file.padding),
        ("normalizer", &file.normalizer),
    ] {
        if !value.is_null() {
            return Err(unsupported(field, value));
        }
    }
    let kind = |v: &Value| v.get("type").and_then(Value::as_str).map(str::to_owned);
    let pre = &file.pre_tokenizer;
    if kind(pre).as_deref() != Some("ByteLevel") {
        return Err(unsupported("pre_tokenizer", pre));
    }
    if pre.get("add_prefix_space").and_then(Value::as_bool) != Some(false) {
        return Err(unsupported(
            "pre_tokenizer.add_prefix_space",
            pre.get("add_prefix_space").unwrap_or(&Value::Null),
        ));
    }
    if let Some(v) = pre.get("use_regex") {
        if v.as_bool() != Some(true) {
            return Err(unsupported("pre_tokenizer.use_regex", v));
        }
    }
    if !(file.post_processor.is_null()
        || kind(&file.post_processor).as_deref() == Some("ByteLevel"))
    {
        return Err(unsupported("post_processor", &file.post_processor));
    }
    if kind(&file.decoder).as_deref() != Some("ByteLevel") {
        return Err(unsupported("decoder", &file.decoder));
    }
    let m = &file.model;
    if let Some(t) = &m.kind {
        if t != "BPE" {
            return Err(unsupported("model.type", &Value::String(t.clone())));
        }
    }
    if let Some(d) = m.dropout {
        if d != 0.0 {
            return Err(unsupported("model.dropout", &Value::from(d)));
        }
    }
    for (field, value) in [
        (
            "model.continuing_subword_prefix",
            &m.continuing_subword_prefix,
        ),
        ("model.end_of_word_suffix", &m.end_of_word_suffix),
    ] {
        if let Some(v) = value {
            if !v.is_empty() {
                return Err(unsupported(field, &Value::String(v.clone())));
            }
        }
    }
    Ok(())
}

/// One `model.merges` entry: `["a", "b"]`, or the older `"a b"`.
fn merge_pair(entry: &Value) -> Result<(String, String), TokenizerError> {
    let malformed = || TokenizerError::MalformedMerge {
        merge: entry.to_string(),
    };
    match entry {
        Value::String(s) => {
            let parts: Vec<&str> = s.split(' ').collect();
            match parts.as_slice() {
                [a, b] => Ok((a.to_string(), b.to_string())),
                _ => Err(malformed()),
            }
        }
        Value::Array(items) => match items.as_slice() {
            [Value::String(a), Value::String(b)] => Ok((a.clone(), b.clone())),
            _ => Err(malformed()),
        },
        _ => Err(malformed()),
    }
}

#[derive(Deserialize)]
struct FileIn {
    version: Option<String>,
    #[serde(default)]
    truncation: Value,
    #[serde(default)]
    padding: Value,
    #[serde(default)]
    added_tokens: Vec<AddedIn>,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    post_processor: Value,
    #[serde(default)]
    decoder: Value,
    model: ModelIn,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct AddedIn {
    id: u32,
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default = "yes")]
    normalized: bool,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct ModelIn {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    dropout: Option<f64>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    ignore_merges: Option<bool>,
    vocab: VocabIn,
    #[serde(default)]
    merges: Vec<Value>,
}

/// `model.vocab` in file order, duplicates kept (so that they can be reported).
struct VocabIn(Vec<(String, u32)>);

impl<'de> Deserialize<'de> for VocabIn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VocabIn;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from token to id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VocabIn, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<String, u32>()? {
                    entries.push((k, v));
                }
                Ok(VocabIn(entries))
            }
        }
        deserializer.deserialize_map(V)
    }
}

#[derive(Serialize)]
struct FileOut {
    version: &'static str,
    truncation: Option<()>,
    padding: Option<()>,
    added_tokens: Vec<AddedOut>,
    normalizer: Option<()>,
    pre_tokenizer: ByteLevelOut,
    post_processor: Option<()>,
    decoder: ByteLevelOut,
    model: ModelOut,
}

#[derive(Serialize)]
struct AddedOut {
    id: u32,
    content: String,
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
    normalized: bool,
    special: bool,
}

#[derive(Clone, Copy, Serialize)]
struct ByteLevelOut {
    #[serde(rename = "type")]
    kind: &'static str,
    add_prefix_space: bool,
    trim_offsets: bool,
    use_regex: bool,
}

#[derive(Serialize)]
struct ModelOut {
    #[serde(rename = "type")]
    kind: &'static str,
    dropout: Option<f64>,
    unk_token: Option<String>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    vocab: OrderedVocab,
    merges: Vec<(String, String)>,
}

/// `model.vocab` written in id order.
struct OrderedVocab(Vec<(String, u32)>);

impl Serialize for OrderedVocab {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}
