//! `decode-lab lengths`, and `decode-lab capacity --lengths-from-policy`, end to end: the
//! committed planner file is what the command measures, and bad input exits 2 naming it.

use std::path::PathBuf;

mod common;

use common::{decode_lab, fails_with, model_dir, ok};

fn committed() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(model_dir().join("lengths.json")).unwrap())
        .unwrap()
}

/// A run with a budget of `cap` tokens is the committed run cut there: generation draws the
/// same random numbers step by step whatever its budget, so the shorter run is a prefix of
/// the longer one. Measured again at a small budget, each run must be exactly that cut.
#[test]
fn the_committed_file_is_what_the_command_measures() {
    let cap = 24u64;
    let measured: serde_json::Value = serde_json::from_str(&ok(&[
        "lengths",
        "--planner",
        "--pages",
        "8",
        "--max-new-tokens",
        "24",
    ]))
    .unwrap();
    let file = committed();
    assert_eq!(file["model"], "decode-lab-tiny-v1");
    assert_eq!(measured["max_new_tokens"], cap);
    let policies = |v: &serde_json::Value| -> Vec<String> {
        v["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["policy"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        policies(&file),
        ["greedy", "temperature 0.7", "temperature 1.5"]
    );
    assert_eq!(policies(&measured), policies(&file));
    // Runs that chose end-of-text within the small budget are checked too.
    let mut ended = 0;
    for (p, q) in file["policies"]
        .as_array()
        .unwrap()
        .iter()
        .zip(measured["policies"].as_array().unwrap())
    {
        for (s, t) in p["slices"]
            .as_array()
            .unwrap()
            .iter()
            .zip(q["slices"].as_array().unwrap())
        {
            assert_eq!(s["slice"], t["slice"]);
            let long = s["runs"].as_array().unwrap();
            let short = t["runs"].as_array().unwrap();
            assert_eq!(short.len(), 8);
            for (l, r) in long.iter().zip(short) {
                let budget = l["budget"].as_u64().unwrap().min(cap);
                let tokens = l["tokens"].as_u64().unwrap();
                let expected = if l["eos"] == true && tokens <= budget {
                    ended += 1;
                    serde_json::json!({"tokens": tokens, "budget": budget, "eos": true})
                } else {
                    serde_json::json!({"tokens": budget, "budget": budget, "eos": false})
                };
                assert_eq!(*r, expected, "{} {}", p["policy"], s["slice"]);
            }
        }
    }
    assert!(ended >= 2, "{ended}");
}

#[test]
fn one_policy_prints_its_runs_per_slice() {
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "lengths",
        "--temperature",
        "0.7",
        "--pages",
        "2",
        "--max-new-tokens",
        "8",
        "--json",
    ]))
    .unwrap();
    assert_eq!(report["policy"], "temperature 0.7");
    let slices = report["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 2);
    for s in slices {
        let tokens: Vec<u64> = s["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap())
            .collect();
        assert_eq!(tokens.len(), 2);
        assert!(tokens.iter().all(|&t| (1..=8).contains(&t)), "{s}");
        let mean = tokens.iter().sum::<u64>() as f64 / 2.0;
        assert_eq!(s["mean_tokens"].as_f64().unwrap(), mean);
    }
    let table = ok(&[
        "lengths",
        "--temperature",
        "0",
        "--pages",
        "1",
        "--max-new-tokens",
        "4",
    ]);
    assert!(
        table.contains("policy greedy, at most 4 new tokens"),
        "{table}"
    );
    assert!(table.contains("en: English | 1 |"), "{table}");
}

#[test]
fn bad_length_input_is_refused_with_the_value() {
    fails_with(&["lengths", "--pages", "0"], "--pages 0 measures nothing");
    fails_with(
        &["lengths", "--max-new-tokens", "0"],
        "--max-new-tokens 0 generates nothing",
    );
    fails_with(
        &["lengths", "--pages", "100000"],
        "fewer than --pages 100000",
    );
    fails_with(
        &["lengths", "--planner", "--top-k", "5"],
        "--planner measures its own three policies",
    );
    fails_with(
        &["lengths", "--corpus", "no/such"],
        "cannot read no/such/valid.en.txt",
    );
    assert_eq!(
        decode_lab(&["lengths", "--pages", "-1"]).status.code(),
        Some(2)
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-lengths-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The plan's mean output as served, under `decoding` with its measured lengths.
fn mean_output(extra: &[&str]) -> (f64, serde_json::Value) {
    let mut args = vec![
        "capacity",
        "--requests",
        "600",
        "--batch-limits",
        "8",
        "--json",
    ];
    args.extend_from_slice(extra);
    let plan: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    (
        plan["contract"]["mean_output_tokens"].as_f64().unwrap(),
        plan,
    )
}

#[test]
fn capacity_serves_the_lengths_the_policy_stops_at() {
    let (asked, plain) = mean_output(&[]);
    assert!(plain["contract"]["lengths"].is_null());
    let (served, plan) = mean_output(&["--lengths-from-policy", "--decoding", "temperature-0.7"]);
    let lengths = &plan["contract"]["lengths"];
    assert_eq!(lengths["decoding"], "temperature 0.7");
    // Each slice's requests keep, on average, about the measured mean share of their budget.
    for s in lengths["slices"].as_array().unwrap() {
        let share = s["mean_budget_share"].as_f64().unwrap();
        let ratio =
            s["mean_output_tokens"].as_f64().unwrap() / s["mean_budget_tokens"].as_f64().unwrap();
        assert!(share < 1.0 && (ratio - share).abs() < 0.05, "{s}");
    }
    assert!(served < asked, "{served} {asked}");

    // A profile whose every run ran to its budget serves the trace as it is.
    let full = scratch("full.json");
    let run = r#"{"tokens":5,"budget":5,"eos":false}"#;
    let slices = format!(
        r#"[{{"slice":"en: English","runs":[{run}]}},{{"slice":"eu: Basque","runs":[{run}]}}]"#
    );
    std::fs::write(&full, format!(r#"{{"model":"m","max_new_tokens":5,"policies":[{{"policy":"greedy","slices":{slices}}}]}}"#)).unwrap();
    let (kept, plan) = mean_output(&[
        "--lengths-from-policy",
        "--decoding",
        "greedy",
        "--lengths",
        full.to_str().unwrap(),
    ]);
    assert_eq!(kept, asked);
    assert_eq!(plan["sweep"], plain["sweep"]);

    let damaged = scratch("damaged.json");
    std::fs::write(&damaged, r#"{"model":"m","max_new_tokens":5,"policies":[{"policy":"greedy","slices":[{"slice":"en","runs":[{"tokens":9,"budget":5,"eos":true}]}]}]}"#).unwrap();
    fails_with(
        &[
            "capacity",
            "--lengths-from-policy",
            "--decoding",
            "greedy",
            "--lengths",
            damaged.to_str().unwrap(),
        ],
        "run 0 of slice \"en\" under greedy has 9 tokens, outside 1 to its budget 5",
    );
    fails_with(
        &["capacity", "--lengths-from-policy", "--decoding", "top-p"],
        "--decoding top-p: the measured lengths have no policy \"top p\"; they have greedy, temperature 0.7, temperature 1.5",
    );
    fails_with(
        &["capacity", "--lengths", full.to_str().unwrap()],
        "--lengths gives the measured runs of --lengths-from-policy; give that flag too",
    );
}
