//! Seeded mutations of the released `tokenizer.json`: every case is a typed error or a
//! tokenizer that passes the format's own checks, never a panic. `MUTATION_CASES` and
//! `MUTATION_SEED` run a longer campaign (see the `mutation` crate).

use std::path::PathBuf;

use mutation::{campaign, Kind};
use tokenizer::{Tokenizer, MAX_TOKEN_BYTES, MAX_VOCAB_SIZE};

/// Texts every loaded tokenizer must encode and decode back exactly.
const PROBES: [&str; 4] = [
    "The model reads bytes, and bytes become tokens.",
    "Kaixo, zer moduz? Ñabardura: é à ü ç",
    "日本語 😀🇪🇸 ٣ \t\n  spaces   ",
    "<|endoftext|> and <|endof",
];

/// The checks a loaded tokenizer must pass: ids number 0..n with the end-of-text token
/// among them, every id has bytes within the limit, every probe round-trips through ids
/// that exist, and the tokenizer written back as JSON loads as the same tokenizer.
fn check(t: &Tokenizer) -> Result<(), String> {
    let n = t.vocab_size();
    if !(257..=MAX_VOCAB_SIZE).contains(&n) || t.end_of_text() as usize >= n {
        return Err(format!("{n} ids, end of text {}", t.end_of_text()));
    }
    for id in 0..n as u32 {
        match t.token_bytes(id) {
            Ok(bytes) if bytes.len() <= MAX_TOKEN_BYTES => {}
            other => return Err(format!("id {id}: {other:?}")),
        }
    }
    for probe in PROBES {
        let ids = t.encode(probe);
        if ids.iter().any(|&id| id as usize >= n) {
            return Err(format!("{probe:?} encodes to ids out of range: {ids:?}"));
        }
        if t.decode(&ids).as_deref() != Ok(probe.as_bytes()) {
            return Err(format!("{probe:?} does not round-trip through {ids:?}"));
        }
        if t.decode(&t.encode_bytes(probe.as_bytes())).as_deref() != Ok(probe.as_bytes()) {
            return Err(format!("the bytes of {probe:?} do not round-trip"));
        }
    }
    let again = Tokenizer::from_json(&t.to_json()).map_err(|e| format!("written back: {e}"))?;
    if again.vocab_size() != n
        || again.merge_count() != t.merge_count()
        || again.end_of_text() != t.end_of_text()
        || PROBES.iter().any(|p| again.encode(p) != t.encode(p))
    {
        return Err("written back, it loads as another tokenizer".into());
    }
    Ok(())
}

#[test]
fn mutated_tokenizer_json_is_a_typed_error_or_consistent() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/decode-lab-tiny-v1/tokenizer.json");
    let valid = std::fs::read(&path).unwrap();
    check(&Tokenizer::from_json(std::str::from_utf8(&valid).unwrap()).unwrap()).unwrap();
    let mut loaded = 0;
    campaign("tokenizer.json", &valid, Kind::Json, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(());
        };
        match Tokenizer::from_json(text) {
            Err(_) => Ok(()),
            Ok(t) => {
                loaded += 1;
                check(&t)
            }
        }
    });
    // The campaign reaches tokenizers that load, not only broken text.
    assert!(loaded > 0, "no mutated tokenizer.json loaded");
    eprintln!("tokenizer.json: {loaded} mutated files loaded and passed the checks");
}
