//! `decode-lab paths`: the tree of many seeds' first tokens. Each node is checked against
//! runs made apart from it: `generate` with the same flags and one of the node's seeds
//! takes the node's path, and the product of that record's step probabilities is the
//! node's analytic probability.

mod common;

use common::{fails_with, ok};
use serde_json::Value;

const PROMPT: &str = "To insert a table, ";
const FLAGS: [&str; 4] = ["--temperature", "0.9", "--top-k", "5"];

fn tree(seeds: &str, depth: &str) -> Value {
    let mut args = vec![
        "paths",
        "--prompt",
        PROMPT,
        "--seeds",
        seeds,
        "--first-seed",
        "40",
        "--depth",
        depth,
        "--json",
    ];
    args.extend(FLAGS);
    serde_json::from_str(&ok(&args)).unwrap()
}

fn generate(seed: u64, max_tokens: &str) -> Value {
    let seed = seed.to_string();
    let mut args = vec![
        "generate",
        "--prompt",
        PROMPT,
        "--seed",
        &seed,
        "--max-tokens",
        max_tokens,
        "--json",
    ];
    args.extend(FLAGS);
    serde_json::from_str(&ok(&args)).unwrap()
}

#[test]
fn every_leaf_is_a_generated_run_and_its_probability_that_runs_product() {
    let t = tree("24", "3");
    assert_eq!(t["runs"], 24);
    let seeds: Vec<u64> = t["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    assert_eq!(seeds, (40..64).collect::<Vec<_>>());
    let nodes = t["nodes"].as_array().unwrap();
    let mut counted = 0;
    // Each seed's own run, made by `generate`, and the node at the end of its path.
    for &seed in &seeds {
        let record = generate(seed, "3");
        let steps = record["steps"].as_array().unwrap();
        let path: Vec<Value> = steps.iter().map(|s| s["token"].clone()).collect();
        let node = nodes
            .iter()
            .find(|n| n["path"].as_array().unwrap() == &path)
            .unwrap_or_else(|| panic!("seed {seed}: path {path:?} is not in the tree"));
        let product: f64 = steps.iter().map(|s| s["prob"].as_f64().unwrap()).product();
        let analytic = node["analytic"].as_f64().unwrap();
        assert!(
            (analytic - product).abs() < 1e-12,
            "{analytic} vs {product}"
        );
        counted += 1;
    }
    assert_eq!(counted, 24);
    // The leaves' runs add up to all runs (no run ended early at this depth here, or it
    // ended at a node that counts it).
    let leaves: u64 = nodes
        .iter()
        .map(|n| {
            if n["depth"] == 3 {
                n["runs"].as_u64().unwrap()
            } else {
                n["ended"].as_u64().unwrap()
            }
        })
        .sum();
    assert_eq!(leaves, 24);
    let empirical: f64 = nodes
        .iter()
        .filter(|n| n["depth"] == 1)
        .map(|n| n["empirical"].as_f64().unwrap())
        .sum();
    assert!((empirical - 1.0).abs() < 1e-12);
}

#[test]
fn the_table_names_each_path_and_the_mass_no_run_took() {
    let mut args = vec!["paths", "--prompt", PROMPT, "--seeds", "50", "--depth", "2"];
    args.extend(FLAGS);
    let text = ok(&args);
    // The tree's part as Markdown (`policy::compare_report::tree_part`, as the lab draws it).
    assert!(
        text.starts_with("## The policy over 50 seeds: the paths of its first 2 tokens\n"),
        "{text}"
    );
    assert!(text.contains("seeds 0 to 49."), "{text}");
    assert!(text.contains("by token 2, the paths found hold "), "{text}");
    assert!(text.contains("(no run took the other "), "{text}");
}

#[test]
fn bad_sizes_and_random_distributions_are_refused_by_name() {
    fails_with(
        &["paths", "--prompt", PROMPT, "--seeds", "0"],
        "0 seeds: a tree is built from 1 to 10000 seeds",
    );
    fails_with(
        &["paths", "--prompt", PROMPT, "--depth", "9"],
        "the tree's depth 9 is not between 1 and 8",
    );
    fails_with(
        &[
            "paths",
            "--prompt",
            PROMPT,
            "--seeds",
            "300",
            "--xtc-probability",
            "0.5",
            "--xtc-threshold",
            "0.1",
        ],
        "XTC",
    );
}
