//! `decode-lab traffic` end to end: two versions' runs and their outcomes, reproducible
//! from the seed, joined back by `observe`; bad flags exit 2 naming the version.

use std::path::PathBuf;

mod common;

use common::{fails_with, ok};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-traffic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn traffic(
    tag: &str,
    threshold: &str,
) -> (
    Vec<serde_json::Value>,
    Vec<serde_json::Value>,
    serde_json::Value,
) {
    let (runs, outcomes) = (
        scratch(&format!("{tag}-runs.jsonl")),
        scratch(&format!("{tag}-outcomes.jsonl")),
    );
    let summary = ok(&[
        "traffic",
        "--runs",
        "12",
        "--version",
        "a=--temperature 0.7 --max-tokens 6",
        "--version",
        "b=--temperature 1.2 --weights int8 --max-tokens 6",
        "--eu-share",
        "0.5",
        "--threshold",
        threshold,
        "--out",
        runs.to_str().unwrap(),
        "--outcomes",
        outcomes.to_str().unwrap(),
        "--json",
    ]);
    let read = |p: &PathBuf| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    (
        read(&runs),
        read(&outcomes),
        serde_json::from_str(&summary).unwrap(),
    )
}

#[test]
fn traffic_writes_tagged_runs_and_later_outcomes_that_observe_joins() {
    let (runs, outcomes, summary) = traffic("one", "30");
    assert_eq!((runs.len(), outcomes.len()), (12, 12));
    let mut last = 0.0;
    for o in &outcomes {
        let run = runs
            .iter()
            .find(|r| r["run_id"] == o["run_id"])
            .expect("an outcome names a run");
        let (run_at, at): (f64, f64) = (
            run["tags"]["at_s"].as_str().unwrap().parse().unwrap(),
            o["at_s"].as_f64().unwrap(),
        );
        assert!(at >= run_at, "an outcome is known after its run");
        assert!(at >= last, "outcomes in the order they become known");
        last = at;
    }
    for r in &runs {
        let version = r["tags"]["version"].as_str().unwrap();
        assert_eq!(r["precision"], if version == "a" { "f32" } else { "int8" });
        assert!(["en", "eu"].contains(&r["tags"]["slice"].as_str().unwrap()));
        assert!(r["steps"].as_array().unwrap().len() <= 6);
    }
    let cells = summary.as_array().unwrap();
    assert_eq!(
        cells
            .iter()
            .map(|c| c["runs"].as_u64().unwrap())
            .sum::<u64>(),
        12
    );
    // The same seed, the same files; the rule's line moves only the verdicts.
    let ids = |runs: &[serde_json::Value]| -> Vec<String> {
        runs.iter()
            .map(|r| r["run_id"].as_str().unwrap().to_string())
            .collect()
    };
    let (again, _, _) = traffic("two", "30");
    assert_eq!(ids(&again), ids(&runs), "the same runs, timings aside");
    let (_, all, _) = traffic("all", "0");
    assert!(
        all.iter().all(|o| o["outcome"] == "accepted"),
        "chrF ≥ 0 always holds"
    );

    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "observe",
        scratch("one-runs.jsonl").to_str().unwrap(),
        "--outcomes",
        scratch("one-outcomes.jsonl").to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert_eq!(report["versions"].as_array().unwrap().len(), 2);
    assert_eq!(report["rejected_count"], 0);
    let joined: u64 = report["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["outcomes_joined"].as_u64().unwrap())
        .sum();
    assert_eq!(joined, 12);
}

#[test]
fn bad_versions_are_named() {
    let (out, outcomes) = (scratch("bad.jsonl"), scratch("bad-outcomes.jsonl"));
    let (o, oo) = (out.to_str().unwrap(), outcomes.to_str().unwrap());
    let base = ["traffic", "--out", o, "--outcomes", oo];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    fails_with(
        &with(&["--version", "a=--temperature 0.7"]),
        "--version must be given at least twice",
    );
    fails_with(
        &with(&["--version", "a=", "--version", "a="]),
        "the name \"a\" is given twice",
    );
    fails_with(
        &with(&["--version", "--temperature 1", "--version", "b="]),
        "expected NAME=FLAGS",
    );
    fails_with(
        &with(&["--version", "a=--temperature hot", "--version", "b="]),
        "--version \"a=--temperature hot\": invalid value 'hot'",
    );
    fails_with(
        &with(&["--version", "a=", "--version", "b=", "--eu-share", "2"]),
        "--eu-share 2: expected a number from 0 to 1",
    );
}
