//! No report prints a non-finite figure: every JSON report of every subcommand that has one,
//! on ordinary inputs and on records at the edge of what a record may hold, is walked for a
//! `null` where a number belongs (serde writes NaN and infinity as `null`) and for a negative
//! time. The `null`s a report may hold are the optional fields named below, each a value
//! that is absent, never a number that failed.

mod common;

use common::ok;
use serde_json::Value;

/// Keys whose value may be `null`: an option that is not set, not a figure.
const OPTIONAL: [&str; 14] = [
    "queue_cap",
    "lengths",
    "speculation",
    "disaggregate",
    "speculative_k",
    "error",
    "rollout",
    "drift",
    "verdict",
    // No outcome joined: no rate to give.
    "outcome_rate",
    "rate",
    "rate_95",
    // No run without an outcome: no age to give.
    "oldest_unjoined_s",
    "newest_unjoined_s",
];

/// Every `null` outside [`OPTIONAL`] and every negative time (a key ending in `_s`, `_ms`
/// or `_us`), by path.
fn faults(value: &Value, path: &str, found: &mut Vec<String>) {
    let key = path.rsplit('.').next().unwrap_or("");
    match value {
        Value::Null if !OPTIONAL.contains(&key) => found.push(format!("{path}: null")),
        Value::Number(n) => {
            let x = n.as_f64().unwrap();
            let time = ["_s", "_ms", "_us"].iter().any(|s| key.ends_with(s));
            if !x.is_finite() || (time && x < 0.0) {
                found.push(format!("{path}: {x}"));
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                faults(v, &format!("{path}.{k}"), found);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                faults(v, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

fn check(args: &[&str]) {
    let text = ok(args);
    let report: Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{:?}: not one JSON object: {e}", &args[..1]));
    let mut found = Vec::new();
    faults(&report, "", &mut found);
    assert!(found.is_empty(), "{args:?}: {found:?}");
}

#[test]
fn every_json_report_holds_only_finite_figures() {
    let dir = std::env::temp_dir().join(format!("decode-lab-finite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    check(&[
        "pipeline",
        "--logits",
        "1,2,3,1e300,-1e300",
        "--temperature",
        "1e-8",
    ]);
    check(&["generate", "--prompt", "hi", "--max-tokens", "4", "--json"]);
    check(&[
        "compare",
        "--prompt",
        "hi",
        "--a",
        "",
        "--b",
        "--temperature 1.5",
        "--max-tokens",
        "4",
        "--json",
    ]);
    check(&["paths", "--prompt", "hi", "--seeds", "20", "--json"]);
    check(&["capacity", "--json"]);
    check(&["speculate", "--k", "2", "--max-tokens", "200", "--json"]);
    check(&["lengths", "--pages", "3", "--max-new-tokens", "8", "--json"]);
    check(&["eval", "--max-tokens", "200", "--new-tokens", "4", "--json"]);
    let (runs, outcomes) = (path("runs.jsonl"), path("outcomes.jsonl"));
    check(&[
        "traffic",
        "--version",
        "a=",
        "--version",
        "b=--temperature 1.2",
        "--runs",
        "30",
        "--rate",
        "1e-6",
        "--outcome-delay",
        "31536000",
        "--out",
        &runs,
        "--outcomes",
        &outcomes,
        "--json",
    ]);
    check(&["observe", &runs, "--outcomes", &outcomes, "--json"]);
    // Runs at the edge of what a record may hold: a day to the first token, every step a day.
    let mut record: Value =
        serde_json::from_str(include_str!("bad_input/files/run-at-10.jsonl")).unwrap();
    record["ttft_us"] = Value::from(policy::MAX_TIMING_US);
    let steps = record["token_latencies_us"].as_array().unwrap().len();
    record["token_latencies_us"] = Value::from(vec![policy::MAX_TIMING_US; steps]);
    let edge = path("edge.jsonl");
    std::fs::write(&edge, format!("{record}\n")).unwrap();
    check(&["observe", &edge, "--json"]);
    check(&["observe", &edge, &runs, "--as-of", "10", "--json"]);
    let _ = std::fs::remove_dir_all(&dir);
}
