//! `decode-lab compare`: two policies on the shipped model and one seeded stream. Each run
//! is the run `generate` makes with the same flags and seed; the distances are those of the
//! policies' final distributions, checked on known cases (the same policy: 0; a greedy a: KL
//! is −ln of b's probability of a's token).

mod common;

use common::{decode_lab, fails_with, ok};
use serde_json::Value;

const PROMPT: &str = "To insert a table, ";

fn compare(a: &str, b: &str, seed: &str) -> Value {
    let line = ok(&[
        "compare",
        "--prompt",
        PROMPT,
        "--seed",
        seed,
        "--max-tokens",
        "16",
        "--a",
        a,
        "--b",
        b,
        "--json",
    ]);
    serde_json::from_str(&line).unwrap()
}

fn generate(flags: &str, seed: &str) -> Value {
    let mut args = vec![
        "generate",
        "--prompt",
        PROMPT,
        "--seed",
        seed,
        "--max-tokens",
        "16",
        "--json",
    ];
    args.extend(flags.split_whitespace());
    serde_json::from_str(&ok(&args)).unwrap()
}

fn tokens(record: &Value) -> Vec<u64> {
    record["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["token"].as_u64().unwrap())
        .collect()
}

#[test]
fn each_run_is_generates_run_on_the_same_stream() {
    let (a, b) = ("--temperature 0.9", "--temperature 0.9 --top-k 5");
    let c = compare(a, b, "11");
    assert_eq!(tokens(&c["a"]), tokens(&generate(a, "11")));
    assert_eq!(tokens(&c["b"]), tokens(&generate(b, "11")));
    // Every step of both runs drew the same uniform: one stream, one draw a step.
    let draws = |r: &Value| -> Vec<f64> {
        r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["draw"].as_f64().unwrap())
            .collect()
    };
    let (da, db) = (draws(&c["a"]), draws(&c["b"]));
    let n = da.len().min(db.len());
    assert_eq!(da[..n], db[..n]);
    let first = (0..tokens(&c["a"]).len().max(tokens(&c["b"]).len()))
        .find(|&t| tokens(&c["a"]).get(t) != tokens(&c["b"]).get(t));
    assert_eq!(c["first_divergence"].as_u64().map(|t| t as usize), first);
}

#[test]
fn the_same_policy_never_diverges() {
    let c = compare(
        "--temperature 0.8 --top-p 0.9",
        "--temperature 0.8 --top-p 0.9",
        "3",
    );
    assert!(c.get("first_divergence").is_none(), "{c}");
    for s in c["steps"].as_array().unwrap() {
        assert_eq!((s["kl"].as_f64(), s["tv"].as_f64()), (Some(0.0), Some(0.0)));
        assert_eq!(s["prob_a"], s["prob_b"]);
    }
}

/// With a greedy, its final distribution is all on its token t, so KL(a‖b) = −ln p_b(t) and
/// TV = 1 − p_b(t); and where b removes t, KL is infinite.
#[test]
fn a_greedy_a_gives_kl_from_bs_probability_of_its_token() {
    let c = compare("--temperature 0", "--temperature 1.2 --top-k 3", "5");
    for s in c["steps"].as_array().unwrap() {
        assert_eq!(s["prob_a"].as_f64(), Some(1.0));
        let p_b = s["prob_b"].as_f64().unwrap();
        assert!(
            (s["tv"].as_f64().unwrap() - (1.0 - p_b)).abs() < 1e-12,
            "{s}"
        );
        if p_b > 0.0 {
            assert!((s["kl"].as_f64().unwrap() + p_b.ln()).abs() < 1e-12, "{s}");
        } else {
            assert_eq!(s["kl"], "inf");
        }
    }
}

#[test]
fn the_table_names_the_first_divergence_and_every_step() {
    let text = ok(&[
        "compare",
        "--prompt",
        PROMPT,
        "--max-tokens",
        "8",
        "--a",
        "--temperature 0",
        "--b",
        "--temperature 1.5",
    ]);
    // The report's parts as Markdown (`policy::compare_report`, as the lab draws them).
    assert!(text.contains("\na (temperature 0"), "{text}");
    assert!(
        text.contains("The runs part at step") || text.contains("Both policies chose the same"),
        "{text}"
    );
    let aligned = text
        .split("_The tokens aligned by step")
        .nth(1)
        .unwrap_or_default()
        .split("\n\n")
        .nth(1)
        .unwrap_or_default();
    assert_eq!(aligned.lines().count(), 2 + 8, "a row per step: {text}");
}

#[test]
fn bad_policy_flags_name_the_flag_and_its_value() {
    fails_with(
        &["compare", "--prompt", "x", "--a", "--top-p 2", "--b", ""],
        "--a \"--top-p 2\": ",
    );
    fails_with(
        &[
            "compare",
            "--prompt",
            "x",
            "--a",
            "",
            "--b",
            "--temprature 1",
        ],
        "--b \"--temprature 1\": unexpected argument '--temprature'",
    );
    let out = decode_lab(&["compare", "--prompt", "x", "--a", "", "--b", "--top-k -1"]);
    assert_eq!(out.status.code(), Some(2));
}

/// End-of-text ends a compared run as it ends `generate`'s (this prompt and seed stop at
/// step 2 at temperature 1.5).
#[test]
fn end_of_text_stops_a_compared_run_as_it_stops_generate() {
    let flags = "--temperature 1.5";
    let line = ok(&[
        "compare",
        "--prompt",
        "Hello.",
        "--seed",
        "8",
        "--max-tokens",
        "48",
        "--a",
        flags,
        "--b",
        flags,
        "--json",
    ]);
    let c: Value = serde_json::from_str(&line).unwrap();
    let args = [
        "generate",
        "--prompt",
        "Hello.",
        "--seed",
        "8",
        "--max-tokens",
        "48",
        "--json",
        "--temperature",
        "1.5",
    ];
    let generated: Value = serde_json::from_str(&ok(&args)).unwrap();
    assert_eq!(generated["stop_reason"], "eos");
    assert_eq!(c["a"]["stop_reason"], "eos");
    assert_eq!(tokens(&c["a"]), tokens(&generated));
}
