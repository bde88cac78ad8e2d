//! `decode-lab observe` on runs the CLI generated: grouped by the version their flags make,
//! sliced by tag or by the shipped language identifier, joined to outcomes, and bad input
//! named with exit code 2.

use std::path::PathBuf;

mod common;

use common::{decode_lab, fails_with, ok};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-observe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn generate(prompt: &str, seed: u64, extra: &[&str]) -> serde_json::Value {
    let seed = seed.to_string();
    let args = [
        &[
            "generate",
            "--prompt",
            prompt,
            "--max-tokens",
            "4",
            "--seed",
            &seed,
            "--json",
        ][..],
        extra,
    ]
    .concat();
    serde_json::from_str(&ok(&args)).unwrap()
}

#[test]
fn observe_groups_by_version_and_slice_and_joins_outcomes() {
    let mut runs = Vec::new();
    let mut outcomes = Vec::new();
    for seed in 0..3u64 {
        // Untagged: the identifier names the slice. Tagged: the tag does.
        let en = generate("Insert a table ", seed, &[]);
        let eu = generate("Insert a table ", seed, &["--tag", "slice=eu"]);
        let hot = generate("Hautatu taula ", seed, &["--temperature", "1.3"]);
        for (r, ok) in [(&en, true), (&eu, seed > 0), (&hot, false)] {
            outcomes.push(format!(
                r#"{{"run_id":{},"outcome":"{}","at_s":5}}"#,
                r["run_id"],
                if ok { "accepted" } else { "rejected" }
            ));
            runs.push(r.to_string());
        }
    }
    runs.insert(2, "{\"not\": \"a record\"}".into());
    let runs_file = scratch("runs.jsonl");
    let outcomes_file = scratch("outcomes.jsonl");
    std::fs::write(&runs_file, runs.join("\n")).unwrap();
    std::fs::write(&outcomes_file, outcomes.join("\n")).unwrap();
    let (runs_path, outcomes_path) = (runs_file.to_str().unwrap(), outcomes_file.to_str().unwrap());
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "observe",
        runs_path,
        "--outcomes",
        outcomes_path,
        "--json",
    ]))
    .unwrap();
    assert_eq!(report["runs"], 9);
    assert_eq!(report["rejected"][0]["line"], 3);
    let versions = report["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "temperature 0.7 and 1.3");
    let warm = versions
        .iter()
        .find(|v| v["key"]["policy"]["temperature"] == 0.7)
        .unwrap();
    assert_eq!(warm["runs"], 6);
    assert_eq!(warm["outcomes_joined"], 6);
    assert_eq!(warm["outcome_rate"], 5.0 / 6.0);
    let slices: Vec<(&str, u64)> = warm["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["slice"].as_str().unwrap(), s["runs"].as_u64().unwrap()))
        .collect();
    assert_eq!(slices, [("en", 3), ("eu", 3)]);
    let hot = versions
        .iter()
        .find(|v| v["version_id"] != warm["version_id"])
        .unwrap();
    assert_eq!(hot["slices"][0]["slice"], "eu", "named by the identifier");
    assert!(warm["ttft_p99_ms"].as_f64().unwrap() > 0.0);

    // Against the warm version as baseline: a verdict in words naming the rollback.
    let base = warm["version_id"].as_str().unwrap();
    let table = ok(&[
        "observe",
        runs_path,
        "--outcomes",
        outcomes_path,
        "--baseline",
        base,
    ]);
    // Three outcomes a side are too few to judge: the verdict says so rather than guess.
    assert!(table.contains("nothing judged yet"), "{table}");
    // The rejected lines are a part of the report (`observe::parts`), as in the lab.
    assert!(table.contains("## Rejected lines"), "{table}");

    // Bad input: a duplicate outcome, an unknown baseline, a missing identifier.
    let dup = scratch("dup.jsonl");
    std::fs::write(&dup, format!("{}\n{}", outcomes[0], outcomes[0])).unwrap();
    fails_with(
        &["observe", runs_path, "--outcomes", dup.to_str().unwrap()],
        "repeats the one on line 1: a run has one outcome",
    );
    fails_with(
        &["observe", runs_path, "--baseline", "ffffffffffff"],
        "baseline version \"ffffffffffff\" has no runs",
    );
    fails_with(
        &["observe", runs_path, "--langid", "no/such.bin"],
        "cannot read no/such.bin",
    );
    fails_with(&["observe", runs_path, "--as-of", "inf"], "--as-of inf");
    assert_eq!(decode_lab(&["observe"]).status.code(), Some(2));
}
