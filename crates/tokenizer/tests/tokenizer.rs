//! Behaviour: round trips, streaming decode, training determinism, and typed errors.

mod common;

use proptest::prelude::*;
use serde_json::{json, Value};
use tokenizer::{train, StreamDecoder, Tokenizer, TokenizerError};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn bytes_round_trip(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let t = common::trained();
        prop_assert_eq!(t.decode(&t.encode_bytes(&bytes)).unwrap(), bytes);
    }

    #[test]
    fn strings_round_trip(text in any::<String>()) {
        let t = common::trained();
        prop_assert_eq!(t.decode(&t.encode(&text)).unwrap(), text.as_bytes());
        prop_assert_eq!(t.encode_bytes(text.as_bytes()), t.encode(&text));
    }

    #[test]
    fn streaming_matches_lossy_decode_for_any_ids(ids in prop::collection::vec(0u32..600, 0..60)) {
        let t = common::trained();
        let mut d = StreamDecoder::new();
        let mut out = String::new();
        for &id in &ids {
            out.push_str(&d.push(t, id).unwrap());
        }
        out.push_str(&d.finish());
        prop_assert_eq!(out, t.decode_lossy(&ids).unwrap());
    }

    #[test]
    fn from_json_never_panics(text in any::<String>()) {
        let _ = Tokenizer::from_json(&text);
    }
}

#[test]
fn streaming_never_emits_a_broken_character() {
    let t = common::trained();
    for text in common::probes() {
        let ids = t.encode(&text);
        let mut d = StreamDecoder::new();
        let mut out = String::new();
        for &id in &ids {
            let piece = d.push(t, id).unwrap();
            assert!(
                !piece.contains('\u{FFFD}'),
                "U+FFFD in {piece:?} of {text:?}"
            );
            out.push_str(&piece);
        }
        assert_eq!(d.pending(), b"");
        assert_eq!(d.finish(), "");
        assert_eq!(out, text);
    }
}

#[test]
fn streaming_holds_back_a_split_character() {
    let t = common::trained();
    // A four-byte emoji as four byte tokens.
    let ids = t.encode_bytes(&[0xF0]);
    let mut d = StreamDecoder::new();
    assert_eq!(d.push(t, ids[0]).unwrap(), "");
    for &b in &[0x9F, 0xA6] {
        assert_eq!(d.push(t, t.encode_bytes(&[b])[0]).unwrap(), "");
    }
    assert_eq!(d.push(t, t.encode_bytes(&[0x80])[0]).unwrap(), "🦀");
    // A truly broken tail is flushed as U+FFFD.
    assert_eq!(d.push(t, t.encode_bytes(&[0xE2])[0]).unwrap(), "");
    assert_eq!(d.finish(), "\u{FFFD}");
    assert_eq!(
        d.push(t, 600),
        Err(TokenizerError::IdOutOfRange {
            id: 600,
            vocab_size: 600
        })
    );
}

#[test]
fn training_is_deterministic() {
    let corpus = common::corpus();
    let a = train(&[&corpus], 600).to_json();
    let b = train(&[&corpus], 600).to_json();
    assert_eq!(a, b);
    assert_eq!(a, common::trained().to_json());
}

#[test]
fn special_token_and_vocabulary_trait() {
    let t = common::trained();
    let eot = t.end_of_text();
    assert_eq!(t.token_bytes(eot).unwrap(), b"<|endoftext|>");
    assert_eq!(
        t.encode("a<|endoftext|>"),
        [t.encode("a"), vec![eot]].concat()
    );
    // encode_bytes treats the text as data.
    assert!(!t.encode_bytes(b"<|endoftext|>").contains(&eot));
    let v: &dyn policy::Vocabulary = t;
    let id = v.id();
    assert_eq!(id.hash.len(), 64);
    assert!(id.hash.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(v.token_bytes(600), b"");
    assert_eq!(v.encode("hello"), t.encode("hello"));
    // The hash is of the JSON text.
    let reloaded = Tokenizer::from_json(&t.to_json()).unwrap();
    assert_eq!(reloaded.artifact_id().hash, id.hash);
    let spaced = Tokenizer::from_json(&format!(" {}", t.to_json())).unwrap();
    assert_ne!(spaced.artifact_id().hash, id.hash);
}

#[test]
fn decode_rejects_ids_out_of_range() {
    let t = common::trained();
    let err = t.decode(&[1, 2, 70000]).unwrap_err();
    assert_eq!(
        err,
        TokenizerError::IdOutOfRange {
            id: 70000,
            vocab_size: 600
        }
    );
    assert!(err.to_string().contains("70000"));
    assert!(t.token_bytes(600).is_err());
}

fn base() -> Value {
    serde_json::from_str(&common::trained().to_json()).unwrap()
}

fn load(v: &Value) -> TokenizerError {
    Tokenizer::from_json(&v.to_string()).unwrap_err()
}

/// Asserts the error's message names `value`.
fn names(err: &TokenizerError, value: &str) {
    assert!(
        err.to_string().contains(value),
        "{err} does not name {value:?}"
    );
}

#[test]
fn malformed_json_is_a_typed_error() {
    for text in ["", "{", "[1, 2]", "{\"model\": 3}", "null"] {
        let err = Tokenizer::from_json(text).unwrap_err();
        assert!(matches!(err, TokenizerError::Json(_)), "{text:?}: {err:?}");
    }
    let mut v = base();
    v["model"]["vocab"]["a"] = json!(-1);
    let err = load(&v);
    assert!(matches!(err, TokenizerError::Json(_)));
    names(&err, "-1");
}

#[test]
fn a_merge_naming_an_unknown_token_is_named() {
    let mut v = base();
    v["model"]["merges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["zzqq", "a"]));
    let err = load(&v);
    assert_eq!(
        err,
        TokenizerError::UnknownMergeToken {
            merge: "zzqq a".into(),
            token: "zzqq".into()
        }
    );
    names(&err, "zzqq");

    let mut v = base();
    v["model"]["merges"]
        .as_array_mut()
        .unwrap()
        .push(json!("q Z"));
    let err = load(&v);
    assert!(
        matches!(err, TokenizerError::UnknownMergeResult { .. }),
        "{err:?}"
    );
    names(&err, "qZ");

    let mut v = base();
    v["model"]["merges"]
        .as_array_mut()
        .unwrap()
        .push(json!("a b c"));
    let err = load(&v);
    assert!(
        matches!(err, TokenizerError::MalformedMerge { .. }),
        "{err:?}"
    );
    names(&err, "a b c");

    let mut v = base();
    let first = v["model"]["merges"][0].clone();
    v["model"]["merges"].as_array_mut().unwrap().push(first);
    assert!(matches!(load(&v), TokenizerError::DuplicateMerge { .. }));
}

#[test]
fn duplicate_and_missing_ids_are_named() {
    let mut v = base();
    v["model"]["vocab"]["a"] = json!(98); // the id of "b"
    let err = load(&v);
    assert!(
        matches!(err, TokenizerError::DuplicateId { id: 98, .. }),
        "{err:?}"
    );
    names(&err, "98");

    let mut v = base();
    v["model"]["vocab"]["a"] = json!(5000);
    let err = load(&v);
    assert_eq!(
        err,
        TokenizerError::IdGap {
            missing: 97,
            max: 5000
        }
    );

    // A key given twice (only expressible in the raw text).
    let json =
        common::trained()
            .to_json()
            .replacen("\"a\": 97,", "\"a\": 97,\n      \"a\": 97,", 1);
    let err = Tokenizer::from_json(&json).unwrap_err();
    assert_eq!(err, TokenizerError::DuplicateToken { token: "a".into() });
}

#[test]
fn vocabulary_problems_are_named() {
    // A key outside the byte-level alphabet.
    let mut v = base();
    let id = v["model"]["vocab"]
        .as_object_mut()
        .unwrap()
        .remove("a")
        .unwrap();
    v["model"]["vocab"]["a b"] = id;
    v["model"]["merges"] = json!([]);
    let err = load(&v);
    assert_eq!(
        err,
        TokenizerError::NotByteLevel {
            token: "a b".into(),
            ch: ' '
        }
    );

    // A byte with no token.
    let mut v = base();
    let id = v["model"]["vocab"]
        .as_object_mut()
        .unwrap()
        .remove("Ġ")
        .unwrap();
    v["model"]["vocab"]["ĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠĠ"] = id;
    v["model"]["merges"] = json!([]);
    let err = load(&v);
    assert_eq!(
        err,
        TokenizerError::MissingByte {
            byte: 0x20,
            ch: 'Ġ'
        }
    );
    names(&err, "0x20");

    // No end-of-text token.
    let mut v = base();
    v["added_tokens"] = json!([]);
    assert_eq!(load(&v), TokenizerError::MissingEndOfText);
    let mut v = base();
    v["added_tokens"][0]["special"] = json!(false);
    assert_eq!(load(&v), TokenizerError::MissingEndOfText);

    // An added token whose id belongs to another token.
    let mut v = base();
    v["added_tokens"][0]["id"] = json!(5);
    let err = load(&v);
    assert!(
        matches!(err, TokenizerError::AddedTokenConflict { id: 5, .. }),
        "{err:?}"
    );
}

/// A field, an edit that sets it to something unsupported, and the value the error must name.
type Case = (&'static str, Box<dyn Fn(&mut Value)>, &'static str);

#[test]
fn unsupported_settings_are_named() {
    let cases: Vec<Case> = vec![
        (
            "model.type",
            Box::new(|v| v["model"]["type"] = json!("WordPiece")),
            "WordPiece",
        ),
        (
            "pre_tokenizer.add_prefix_space",
            Box::new(|v| v["pre_tokenizer"]["add_prefix_space"] = json!(true)),
            "true",
        ),
        (
            "pre_tokenizer.use_regex",
            Box::new(|v| v["pre_tokenizer"]["use_regex"] = json!(false)),
            "false",
        ),
        (
            "normalizer",
            Box::new(|v| v["normalizer"] = json!({"type": "NFC"})),
            "NFC",
        ),
        ("decoder", Box::new(|v| v["decoder"] = Value::Null), "null"),
        (
            "model.dropout",
            Box::new(|v| v["model"]["dropout"] = json!(0.1)),
            "0.1",
        ),
        ("version", Box::new(|v| v["version"] = json!("2.0")), "2.0"),
        (
            "lstrip",
            Box::new(|v| v["added_tokens"][0]["lstrip"] = json!(true)),
            "endoftext",
        ),
    ];
    for (field, edit, value) in cases {
        let mut v = base();
        edit(&mut v);
        let err = load(&v);
        assert!(
            matches!(err, TokenizerError::Unsupported { .. }),
            "{field}: {err:?}"
        );
        names(&err, field);
        names(&err, value);
    }
}

#[test]
fn legacy_string_merges_load() {
    let mut v = base();
    let merges: Vec<Value> = v["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            json!(format!(
                "{} {}",
                m[0].as_str().unwrap(),
                m[1].as_str().unwrap()
            ))
        })
        .collect();
    v["model"]["merges"] = Value::Array(merges);
    let t = Tokenizer::from_json(&v.to_string()).unwrap();
    let text = common::corpus();
    assert_eq!(t.encode(&text), common::trained().encode(&text));
}

#[test]
fn counts_and_token_lengths_are_held_to_their_maxima() {
    // More ids than any model here reads: MAX_VOCAB_SIZE ids in model.vocab, and the
    // end-of-text token (as an added token only) one more.
    let mut v = base();
    let eot = v["model"]["vocab"]
        .as_object_mut()
        .unwrap()
        .remove("<|endoftext|>")
        .unwrap();
    let vocab = v["model"]["vocab"].as_object_mut().unwrap();
    assert_eq!(eot, json!(vocab.len()));
    for id in vocab.len()..tokenizer::MAX_VOCAB_SIZE {
        vocab.insert(format!("x{id}"), json!(id));
    }
    v["added_tokens"][0]["id"] = json!(tokenizer::MAX_VOCAB_SIZE);
    assert_eq!(
        load(&v).to_string(),
        "model.vocab and added_tokens together: 262145 entries, more than the maximum 262144"
    );
    let vocab = v["model"]["vocab"].as_object_mut().unwrap();
    vocab.insert("x262144".into(), json!(tokenizer::MAX_VOCAB_SIZE));
    v["added_tokens"][0]["id"] = json!(tokenizer::MAX_VOCAB_SIZE + 1);
    assert_eq!(
        load(&v).to_string(),
        "model.vocab: 262145 entries, more than the maximum 262144"
    );

    let mut v = base();
    let merges: Vec<Value> = (0..=tokenizer::MAX_MERGES).map(|_| json!("a b")).collect();
    v["model"]["merges"] = Value::Array(merges);
    assert_eq!(
        load(&v),
        TokenizerError::TooMany {
            what: "model.merges",
            count: tokenizer::MAX_MERGES + 1,
            max: tokenizer::MAX_MERGES
        }
    );

    let mut v = base();
    let added: Vec<Value> = (0..=tokenizer::MAX_ADDED_TOKENS)
        .map(|i| json!({"id": 1000 + i, "content": format!("<{i}>"), "special": true}))
        .collect();
    v["added_tokens"] = Value::Array(added);
    names(
        &load(&v),
        "added_tokens: 4097 entries, more than the maximum 4096",
    );

    // An added token of 1,025 bytes.
    let mut v = base();
    let next = common::trained().vocab_size();
    v["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": next, "content": "a".repeat(tokenizer::MAX_TOKEN_BYTES + 1)}));
    let id = json!(next);
    assert_eq!(
        load(&v),
        TokenizerError::TokenTooLong {
            id: id.as_u64().unwrap() as u32,
            bytes: 1025,
            max: 1024
        }
    );
}

/// DRY's sequence breakers (llama.cpp's `get_overlapping_token_sequences`): a token that
/// contains the text is a breaker alone; a token that ends with a proper prefix of it is
/// followed by the rest of the text, encoded, so the sequence's bytes end with the text.
#[test]
fn sequence_breakers_are_the_tokens_that_begin_the_text() {
    let t = common::trained();
    for text in [":", "\n", "ing the", "*"] {
        let sequences = t.sequence_breakers(text, 20);
        for id in 0..t.vocab_size() as u32 {
            let bytes = t.token_bytes(id).unwrap();
            let contains = bytes.windows(text.len()).any(|w| w == text.as_bytes());
            assert_eq!(
                sequences.contains(&vec![id]),
                contains,
                "{text:?}, token {id}"
            );
        }
        for sequence in sequences.iter().filter(|s| s.len() > 1) {
            let head = t.token_bytes(sequence[0]).unwrap();
            let decoded = t.decode(sequence).unwrap();
            assert!(decoded.ends_with(text.as_bytes()), "{text:?}: {sequence:?}");
            let overlap = decoded.len() - head.len();
            assert!(
                overlap < text.len() && head.ends_with(&text.as_bytes()[..text.len() - overlap])
            );
        }
    }
}
