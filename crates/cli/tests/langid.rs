//! `decode-lab langid train`: it makes the committed language identifier, byte for byte, and
//! reports the held-out accuracy per slice that its library counts, for whole pages and each
//! prompt-sized prefix.

mod common;

use std::path::PathBuf;

use common::{fails_with, model_dir, ok, workspace};
use langid::held_out::tally;
use langid::LangId;

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("decode-lab-{name}-{}", std::process::id()))
}

#[test]
fn the_committed_identifier_equals_a_retrain_and_its_accuracy_is_reported() {
    let out = scratch("langid.bin");
    let report = ok(&["langid", "train", "--out", out.to_str().unwrap(), "--json"]);
    let retrained = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert!(retrained == std::fs::read(model_dir().join("langid.bin")).unwrap());

    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["file_bytes"].as_u64(), Some(retrained.len() as u64));
    let model = LangId::from_bytes(&retrained).unwrap();
    let slices = report["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 2);
    for (slice, code) in slices.iter().zip(["en", "eu"]) {
        assert_eq!(slice["slice"], code);
        let text =
            std::fs::read_to_string(workspace().join(format!("corpus/valid.{code}.txt"))).unwrap();
        let rates = slice["held_out"].as_array().unwrap();
        let prefixes: Vec<Option<u64>> = rates.iter().map(|r| r["prefix_bytes"].as_u64()).collect();
        assert_eq!(prefixes, [None, Some(16), Some(32), Some(64)]);
        for rate in rates {
            let prefix = rate["prefix_bytes"].as_u64().map(|n| n as usize);
            let tally = &tally(&model, &[(code, &text)], prefix)[0];
            assert_eq!(rate["pages"].as_u64(), Some(tally.pages as u64));
            assert_eq!(rate["correct"].as_u64(), Some(tally.correct as u64));
            assert_eq!(rate["accuracy"].as_f64(), Some(tally.accuracy()));
            assert_eq!(rate["unseen_share"].as_f64(), Some(tally.unseen_share()));
        }
        // Issue 14's bar, on whole pages.
        assert!(
            rates[0]["accuracy"].as_f64().unwrap() >= 0.99,
            "{code}: {rates:?}"
        );
    }
}

#[test]
fn the_table_names_every_prefix_and_a_missing_corpus_is_named() {
    let out = scratch("langid-table.bin");
    let table = ok(&["langid", "train", "--out", out.to_str().unwrap()]);
    std::fs::remove_file(&out).unwrap();
    for needle in [
        "whole pages",
        "first 16 bytes",
        "first 64 bytes",
        "\nen | ",
        "\neu | ",
    ] {
        assert!(table.contains(needle), "{needle:?} in {table}");
    }
    fails_with(
        &["langid", "train", "--corpus", "no/such/corpus"],
        "cannot read no/such/corpus/train.en.txt",
    );
}
