//! Parity with the Hugging Face `tokenizers` crate: it reads the `tokenizer.json` we write and
//! gets the same ids and bytes.

mod common;

use std::str::FromStr;
use std::sync::OnceLock;

use proptest::prelude::*;
use tokenizer::Tokenizer;

fn hf() -> &'static tokenizers::Tokenizer {
    static HF: OnceLock<tokenizers::Tokenizer> = OnceLock::new();
    HF.get_or_init(|| {
        tokenizers::Tokenizer::from_str(&common::trained().to_json())
            .expect("the tokenizers crate loads our tokenizer.json")
    })
}

fn hf_ids(text: &str) -> Vec<u32> {
    hf().encode(text, false)
        .expect("hf encodes")
        .get_ids()
        .to_vec()
}

fn assert_same(ours: &Tokenizer, text: &str) {
    let ids = ours.encode(text);
    assert_eq!(ids, hf_ids(text), "ids differ for {text:?}");
    let hf_text = hf().decode(&ids, false).expect("hf decodes");
    assert_eq!(
        ours.decode(&ids).unwrap(),
        hf_text.as_bytes(),
        "decode differs for {text:?}"
    );
}

#[test]
fn the_trained_tokenizer_has_the_asked_size_and_hf_agrees() {
    let ours = common::trained();
    assert_eq!(ours.vocab_size(), 600);
    assert_eq!(hf().get_vocab_size(true), 600);
    assert_eq!(ours.end_of_text(), 599);
    assert_eq!(hf().token_to_id("<|endoftext|>"), Some(599));
}

#[test]
fn same_ids_and_bytes_as_hf_on_seen_and_unseen_texts() {
    let ours = common::trained();
    for text in common::probes() {
        assert_same(ours, &text);
    }
}

#[test]
fn hf_writes_back_the_same_json() {
    let ours = common::trained();
    assert_eq!(hf().to_string(true).unwrap(), ours.to_json());
}

#[test]
fn a_reloaded_tokenizer_is_the_same() {
    let ours = common::trained();
    let json = ours.to_json();
    let again = Tokenizer::from_json(&json).unwrap();
    assert_eq!(again.to_json(), json);
    assert_eq!(again.artifact_id(), ours.artifact_id());
    for text in common::probes() {
        assert_eq!(again.encode(&text), ours.encode(&text));
    }
}

/// Characters from every class the split pattern distinguishes, weighted towards the edges.
fn mixed_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        " ",
        " ",
        "  ",
        "\n",
        "\t",
        "\r\n",
        "\u{a0}",
        "\u{3000}",
        "'",
        "'s",
        "'ll",
        "a",
        "e",
        "the",
        "ing",
        "Z",
        "é",
        "e\u{301}",
        "ñ",
        "日",
        "本",
        "😀",
        "👍🏽",
        "1",
        "23",
        "½",
        "٣",
        ".",
        ",",
        "!?",
        "-",
        "\"",
        "<|endoftext|>",
        "<|",
        "|>",
        "_",
        "\u{200d}",
        "ǅ",
    ]);
    prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn same_ids_as_hf_on_mixed_text(text in mixed_text()) {
        let ours = common::trained();
        prop_assert_eq!(ours.encode(&text), hf_ids(&text));
    }

    #[test]
    fn same_ids_as_hf_on_any_string(text in any::<String>()) {
        let ours = common::trained();
        prop_assert_eq!(ours.encode(&text), hf_ids(&text));
    }
}
