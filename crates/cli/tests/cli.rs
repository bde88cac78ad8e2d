//! `decode-lab` as a user runs it: exact output, negative numbers, standard input, errors.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn decode_lab(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_decode-lab"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = decode_lab(args, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str], stdin: Option<&str>) -> serde_json::Value {
    let out = decode_lab(args, stdin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn choose_prints_the_chapters_line() {
    let args = [
        "choose",
        "--logits",
        "1.2,0.1,2.4,1.7",
        "--temperature",
        "0.7",
        "--top-k",
        "3",
        "--seed",
        "7",
    ];
    assert_eq!(stdout(&args), "2 [0.116 0.238 0.646]\n");
    let with_json = [&args[..], &["--json"]].concat();
    assert!(
        stdout(&with_json).starts_with(r#"{"token":2,"kept":[0,3,2],"probs":[0.1163408258333986,"#)
    );
    let portable = [&args[..], &["--argpartition", "portable"]].concat();
    assert_eq!(stdout(&portable), "2 [0.116 0.646 0.238]\n");
}

#[test]
fn pipeline_prints_stages_final_and_token() {
    let out = json(
        &[
            "pipeline",
            "--logits",
            "-1.5,0.2,3",
            "--top-k",
            "2",
            "--json",
        ],
        None,
    );
    let stages: Vec<&str> = out["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["constraints", "temperature", "top_k"]);
    let fin = out["final"].as_array().unwrap();
    assert_eq!(
        fin.iter()
            .map(|t| t["id"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(fin.iter().any(|t| t["id"] == out["token"]));
    // `--logits=-1.5,...` and a JSON array on standard input give the same step.
    assert_eq!(
        json(&["pipeline", "--logits=-1.5,0.2,3", "--top-k", "2"], None),
        out
    );
    assert_eq!(
        json(
            &["pipeline", "--logits-file", "-", "--top-k", "2"],
            Some("[-1.5, 0.2, 3]")
        ),
        out
    );
}

/// `--markdown` writes the same step as `--json`: a section per stage whose table states
/// each token's probability as the JSON's snapshot has it (to four decimals), the token
/// top-k removed marked with what it would have had, then the draw.
#[test]
fn pipeline_markdown_is_the_json_step_as_sections_and_tables() {
    let args = ["pipeline", "--logits=-1.5,0.2,3", "--top-k", "2"];
    let out = json(&args, None);
    let text = stdout(&[&args[..], &["--markdown"]].concat());
    let sections: Vec<&str> = text.split("\n## ").skip(1).collect();
    assert_eq!(sections.len(), 3);
    let stages = out["stages"].as_array().unwrap();
    let titles: Vec<&str> = std::iter::once(text.lines().next().unwrap().trim_start_matches("## "))
        .chain(sections.iter().map(|s| s.lines().next().unwrap()))
        .collect();
    assert_eq!(
        titles,
        [
            "After constraints",
            "After temperature",
            "After top-k",
            "The draw"
        ]
    );
    let bodies: Vec<&str> = std::iter::once(text.split("\n## ").next().unwrap())
        .chain(sections.iter().copied())
        .collect();
    for (stage, body) in stages.iter().zip(&bodies) {
        for token in stage["tokens"].as_array().unwrap() {
            let row = format!(
                "| {} | {:.4} | {:.4} | kept | — |",
                token["id"],
                token["logit"].as_f64().unwrap(),
                token["prob"].as_f64().unwrap()
            );
            assert!(body.contains(&row), "{row} not in\n{body}");
        }
    }
    // Top-k 2 removed token 0: before it, its share of e^-1.5, e^0.2, e^3; had it been
    // kept, that over the mass of the two kept.
    let weights = [-1.5f64, 0.2, 3.0].map(f64::exp);
    let all: f64 = weights.iter().sum();
    let unkept = (weights[0] / all) / ((weights[1] + weights[2]) / all);
    assert!(bodies[2].contains(&format!("| 0 | — | 0.0000 | removed here | {unkept:.4} |")));
    assert!(bodies[3].contains(&format!("Chosen token: {} with probability", out["token"])));
}

#[test]
fn bad_input_is_named_and_exits_non_zero() {
    for (args, message) in [
        (
            &["pipeline", "--logits", "1,2", "--temperature", "-1"][..],
            "temperature -1 is invalid",
        ),
        (
            &["pipeline", "--logits", "1,x"][..],
            "logit \"x\" is not a valid number",
        ),
        (
            &["pipeline", "--logits", "1,2", "--top-p", "1.5"][..],
            "top-p 1.5 is invalid",
        ),
        (
            &["pipeline", "--logits", "1,2", "--forbid", "0,1"][..],
            "every one of the 2 tokens is forbidden",
        ),
        (
            &["pipeline", "--logits", "1,2", "--forbid", "9"][..],
            "forbidden token id 9 is out of range",
        ),
        (
            &["choose", "--logits", "1,2", "--top-k", "3"][..],
            "top-k 3 is invalid here",
        ),
        (
            &["choose", "--logits", "1,2", "--seed", "soon"][..],
            "is not a whole number",
        ),
    ] {
        let out = decode_lab(args, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn a_fresh_seed_is_reported() {
    let out = decode_lab(
        &[
            "choose", "--logits", "1,2", "--top-k", "1", "--seed", "fresh",
        ],
        None,
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("seed: "));
}

/// Every knob of the policy's table is a flag of each command that takes a policy, with the
/// table's hint as its help.
#[test]
fn every_policy_knob_is_a_flag_of_each_command_that_takes_a_policy() {
    for command in ["pipeline", "generate", "paths", "speculate", "lengths"] {
        let help = stdout(&[command, "--help"]);
        for knob in &policy::KNOBS {
            let flag = format!("--{} ", knob.flag);
            assert!(help.contains(&flag), "{command} --help lacks {flag}");
            let first_words: String = knob.hint.chars().take(30).collect();
            assert!(help.contains(&first_words), "{command}: {}", knob.flag);
        }
    }
}

/// A knob's value is read by the policy crate's one reader: a list with an empty entry is
/// refused at its flag, as the lab refuses it at its field.
#[test]
fn a_policy_list_with_an_empty_entry_is_refused_naming_the_flag() {
    let out = decode_lab(&["pipeline", "--logits", "1,2,3", "--forbid", "1,,2"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --forbid 1,,2: Forbidden ids must be token ids separated by commas, but \"1,,2\" has an empty entry.\n"
    );
}
