//! `decode-lab eval --alternatives` end to end, on a few pages and a cut training text so a
//! debug binary is quick: every row is a direct recount of the per-passage results it
//! prints, each system answers within the budget, and only the systems that give
//! probabilities have bits per byte.

use std::path::PathBuf;

mod common;

use common::{ok, workspace};

/// The shipped held-out files, and the first `train_bytes` bytes of each training file.
fn small_corpus(train_bytes: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-alternatives-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = workspace().join("corpus");
    for file in ["valid.en.txt", "valid.eu.txt"] {
        std::fs::copy(corpus.join(file), dir.join(file)).unwrap();
    }
    for file in ["train.en.txt", "train.eu.txt"] {
        let text = std::fs::read_to_string(corpus.join(file)).unwrap();
        let mut cut = train_bytes.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        std::fs::write(dir.join(file), &text[..cut]).unwrap();
    }
    dir
}

#[test]
fn every_row_is_a_recount_of_its_passages() {
    let corpus = small_corpus(40_000);
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "eval",
        "--alternatives",
        "--pages",
        "4",
        "--new-tokens",
        "8",
        "--corpus",
        corpus.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let rows = report["rows"].as_array().unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(rows.len(), 12, "six systems on two slices");
    assert_eq!(results.len(), 12 * 4);
    for row in rows {
        let mine: Vec<&serde_json::Value> = results
            .iter()
            .filter(|r| {
                ["slice", "system", "decoding"]
                    .iter()
                    .all(|k| r[*k] == row[*k])
            })
            .collect();
        let accepted = mine.iter().filter(|r| r["accepted"] == true).count() as u64;
        let chrf: f64 = mine.iter().map(|r| r["chrf"].as_f64().unwrap()).sum();
        assert_eq!(
            row["passages"].as_u64().unwrap(),
            mine.len() as u64,
            "{row}"
        );
        assert_eq!(row["accepted"].as_u64().unwrap(), accepted, "{row}");
        assert!((row["outcome_rate"].as_f64().unwrap() - accepted as f64 / 4.0).abs() < 1e-12);
        assert!((row["mean_chrf"].as_f64().unwrap() - chrf / 4.0).abs() < 1e-9);
        let bytes: u64 = mine
            .iter()
            .map(|r| r["output_bytes"].as_u64().unwrap())
            .sum();
        assert!((row["mean_output_bytes"].as_f64().unwrap() - bytes as f64 / 4.0).abs() < 1e-9);
        for r in &mine {
            assert!(r["output_tokens"].as_u64().unwrap() <= 8, "{r}");
            let score = r["chrf"].as_f64().unwrap();
            assert_eq!(r["accepted"] == true, score >= 20.0, "{r}");
        }
        let probabilistic = ["transformer", "n-gram"].contains(&row["system"].as_str().unwrap());
        assert_eq!(row["bits_per_byte"].is_f64(), probabilistic, "{row}");
    }
    // The passages are the same four for every system: evenly spaced through the file.
    let en: Vec<u64> = results
        .iter()
        .filter(|r| r["slice"] == "en" && r["system"] == "rule")
        .map(|r| r["passage"].as_u64().unwrap())
        .collect();
    assert_eq!(en, [0, 37, 75, 112], "150 passages, every 37.5th");
    assert_eq!(report["conclusions"].as_array().unwrap().len(), 8);
}
