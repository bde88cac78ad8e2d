//! The shipped language identifier (`models/decode-lab-tiny-v1/langid.bin`) against the
//! corpus it was trained on: it is what training on the committed corpus makes today, it
//! names the held-out pages' language at least 99 % of the time per slice (issue 14's bar),
//! and its novelty counts the characters the corpus never had.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use langid::held_out::{prefix, tally};
use langid::{LangId, TrainConfig};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus(file: &str) -> String {
    std::fs::read_to_string(workspace().join("corpus").join(file)).unwrap()
}

fn shipped() -> LangId {
    let bytes = std::fs::read(workspace().join("models/decode-lab-tiny-v1/langid.bin")).unwrap();
    LangId::from_bytes(&bytes).unwrap()
}

/// The pages of a corpus file as `corpus/PROVENANCE.md` describes them, found line by line:
/// a page is a run of non-empty lines.
fn pages_by_lines(text: &str) -> Vec<String> {
    let mut pages = vec![String::new()];
    for line in text.lines() {
        if line.is_empty() {
            pages.push(String::new());
        } else {
            let page = pages.last_mut().unwrap();
            if !page.is_empty() {
                page.push('\n');
            }
            page.push_str(line);
        }
    }
    pages.retain(|p| !p.is_empty());
    pages
}

#[test]
fn the_shipped_file_is_a_retrain_on_the_committed_corpus() {
    let file = std::fs::read(workspace().join("models/decode-lab-tiny-v1/langid.bin")).unwrap();
    let (en, eu) = (corpus("train.en.txt"), corpus("train.eu.txt"));
    let retrained = LangId::train(&[("en", &en), ("eu", &eu)], &TrainConfig::default()).unwrap();
    assert!(
        retrained.to_bytes() == file,
        "retrain with `decode-lab langid train`"
    );
    assert!(file.len() < 300_000, "{} bytes", file.len());
    // The SHA-256 of each training file, as corpus/PROVENANCE.md lists it.
    let recorded: Vec<(String, String)> = shipped()
        .slices()
        .iter()
        .map(|s| (s.code.clone(), s.training_sha256.clone()))
        .collect();
    assert_eq!(
        recorded,
        [
            (
                "en".to_string(),
                "3e28931aff090758aa0d11673282a0863d7051a70cceef6a340de9ebac33c6ae".to_string()
            ),
            (
                "eu".to_string(),
                "86643b4093edd956537dfc3093b812b2c104959f03325c5da32f748aad683b4b".to_string()
            )
        ]
    );
}

#[test]
fn held_out_pages_are_identified_at_least_99_percent_of_the_time() {
    let model = shipped();
    for code in ["en", "eu"] {
        let text = corpus(&format!("valid.{code}.txt"));
        let pages = pages_by_lines(&text);
        // corpus/PROVENANCE.md: 151 validation pages per language.
        assert_eq!(pages.len(), 151);
        let correct = pages
            .iter()
            .filter(|page| model.classify(page).code == Some(code))
            .count();
        assert!(
            correct * 100 >= 99 * pages.len(),
            "{code}: {correct} of {} pages",
            pages.len()
        );
        // The library's own tally (which the CLI prints) counts the same pages alike.
        let counted = &tally(&model, &[(code, &text)], None)[0];
        assert_eq!((counted.pages, counted.correct), (pages.len(), correct));
        // And its prefixes are the pages' first bytes, cut at a character boundary.
        for n in [16, 32, 64] {
            let correct_prefixes = pages
                .iter()
                .filter(|page| model.classify(prefix(page, n)).code == Some(code))
                .count();
            let counted = &tally(&model, &[(code, &text)], Some(n))[0];
            assert_eq!(counted.correct, correct_prefixes, "{code}, {n} bytes");
        }
    }
}

#[test]
fn novelty_counts_characters_the_corpus_never_had() {
    let model = shipped();
    let seen: BTreeSet<char> = (corpus("train.en.txt") + &corpus("train.eu.txt"))
        .chars()
        .collect();
    assert_eq!(model.alphabet(), seen.iter().copied().collect::<Vec<_>>());
    // Greek words and Chinese characters; the corpus has a few Greek and CJK characters
    // (formula symbols, numeral tables), so the unseen ones are counted from it directly.
    let text = "The λόγος of 漢字 is new";
    let unseen: usize = text
        .chars()
        .filter(|c| !seen.contains(c))
        .map(char::len_utf8)
        .sum();
    assert!(unseen >= 10, "the test text must hold unseen characters");
    let novelty = model.novelty(text);
    assert_eq!(novelty.bytes, text.len());
    assert_eq!(novelty.unseen_char_bytes, unseen);
    assert!(novelty.unseen_ngram_bytes >= unseen);
    // Plain English from the training text has no unseen character and no unseen 4-gram.
    let plain = model.novelty("To insert a new sheet, choose Sheet - Insert Sheet.");
    assert_eq!((plain.unseen_char_bytes, plain.unseen_ngram_bytes), (0, 0));
}

#[test]
fn empty_and_unseen_text_has_no_language_and_answers_repeat() {
    let model = shipped();
    assert_eq!(model.classify("").label(), "unknown");
    assert_eq!(model.classify("漢字").label(), "unknown");
    assert_eq!(model.novelty("").unseen_share(), 0.0);
    for text in [
        "Hautatu Formatua - Gelaxkak.",
        "Choose Format - Cells.",
        "Σ",
    ] {
        assert_eq!(model.classify(text), model.classify(text));
        assert_eq!(model.classify(text), shipped().classify(text));
    }
    assert_eq!(
        model.classify("Hautatu Formatua - Gelaxkak.").code,
        Some("eu")
    );
    assert_eq!(model.classify("Choose Format - Cells.").code, Some("en"));
}
