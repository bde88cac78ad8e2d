//! `decode-lab capacity` as a user runs it: presets and trace files in, a byte-identical
//! plan out, the known-good file round trip, and one-line errors with exit code 2.

use std::path::PathBuf;
use std::process::{Command, Output};

fn decode_lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_decode-lab"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = decode_lab(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = decode_lab(args);
    assert_eq!(out.status.code(), Some(2), "{args:?} should fail");
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-capacity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

const SMALL: [&str; 6] = [
    "capacity",
    "--requests",
    "600",
    "--batch-limits",
    "1,8",
    "--json",
];

#[test]
fn the_json_plan_is_byte_identical_across_runs_and_decides() {
    let first = ok(&SMALL);
    assert_eq!(first, ok(&SMALL));
    let plan: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(plan["decision"]["kind"], "release");
    // 3 batchings × 2 batch limits × 2 weight paths × 5 load scales.
    assert_eq!(plan["sweep"].as_array().unwrap().len(), 60);
    assert_eq!(plan["contract"]["requests"], 600);
    let slices: Vec<_> = plan["quality"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| (q["slice"].as_str().unwrap(), q["weights"].as_str().unwrap()))
        .collect();
    assert_eq!(
        slices,
        [("en", "f32"), ("en", "int8"), ("eu", "f32"), ("eu", "int8")]
    );
}

#[test]
fn markdown_has_the_chapters_four_parts() {
    let md = ok(&[
        "capacity",
        "--requests",
        "400",
        "--batch-limits",
        "4",
        "--report",
        "md",
    ]);
    for part in [
        "## 1. Benchmark contract",
        "## 2. Profiler and bottleneck report",
        "## 3. Quality gates",
        "## 4. Capacity and cost recommendation",
    ] {
        assert!(md.contains(part), "{part}");
    }
}

#[test]
fn trace_files_are_read_and_a_bad_row_names_its_line() {
    let csv = scratch("trace.csv");
    let mut text = String::from("arrival_s,prompt_tokens,output_tokens,slice\n");
    for i in 0..200 {
        let slice = if i % 20 == 0 { "eu" } else { "en" };
        text.push_str(&format!(
            "{},{},{},{slice}\n",
            i as f64 * 0.005,
            30 + i % 50,
            10 + i % 20
        ));
    }
    std::fs::write(&csv, &text).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&ok(&[
        "capacity",
        "--trace",
        csv.to_str().unwrap(),
        "--batch-limits",
        "4",
        "--json",
    ]))
    .unwrap();
    assert_eq!(plan["contract"]["requests"], 200);
    assert_eq!(plan["contract"]["trace_seed"], serde_json::Value::Null);

    let jsonl = scratch("trace.jsonl");
    std::fs::write(
        &jsonl,
        "{\"arrival_s\": 0.0, \"prompt_tokens\": 12, \"output_tokens\": 4, \"slice\": \"en\"}\n{\"arrival_s\": 0.1, \"prompt_tokens\": 12, \"output_tokens\": \"four\", \"slice\": \"en\"}\n",
    )
    .unwrap();
    let err = fails(&["capacity", "--trace", jsonl.to_str().unwrap()]);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("trace line 2:"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_release_saved_as_known_good_is_what_an_unsafe_plan_degrades_to() {
    let known = scratch("known-good.json");
    let _ = std::fs::remove_file(&known);
    ok(&[
        "capacity",
        "--requests",
        "400",
        "--batch-limits",
        "4",
        "--save-known-good",
        known.to_str().unwrap(),
    ]);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&known).unwrap()).unwrap();
    assert_eq!(saved["policy"]["max_sequences"], 4);
    // A rare-slice floor no weight path meets: nothing passes.
    let args = [
        "capacity",
        "--requests",
        "400",
        "--batch-limits",
        "4",
        "--floor",
        "eu=2.0",
        "--json",
    ];
    let plan: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    assert_eq!(plan["decision"]["kind"], "degrade-to-baseline");
    let with_known = [&args[..], &["--last-known-good", known.to_str().unwrap()]].concat();
    let plan: serde_json::Value = serde_json::from_str(&ok(&with_known)).unwrap();
    assert_eq!(plan["decision"]["kind"], "degrade-to-last-known-good");
    assert_eq!(plan["decision"]["policy"], saved["policy"]);
    let reason = plan["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("quality (eu)"), "{reason}");
}

#[test]
fn bad_numbers_and_names_are_one_line_errors() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["capacity", "--rate", "-3"],
            "error: arrival rate (requests/s) must be a finite number above zero, got -3\n",
        ),
        (
            &["capacity", "--rate", "0"],
            "error: arrival rate (requests/s) must be a finite number above zero, got 0\n",
        ),
        (
            &["capacity", "--slo-ttft-p99", "0"],
            "error: p99 TTFT SLO (s) must be a finite number above zero, got 0\n",
        ),
        (
            &["capacity", "--batch-limits", "0", "--requests", "10"],
            "",
        ),
        (
            &["capacity", "--hardware", "tpu"],
            "error: unknown hardware preset \"tpu\"; known: a100-80gb, h100-sxm, h200, l4, lab-cpu\n",
        ),
        (&["capacity", "--policy", "greedy"], "error: policy \"greedy\" is not valid\n"),
    ];
    for (args, expected) in cases {
        if expected.is_empty() {
            // A batch limit of 0 can never admit a request: every point says so; with no
            // point left the baseline runs.
            let out = ok(&[args, &["--json"]].concat());
            let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
            let row = &plan["sweep"][0];
            assert!(
                row["error"].as_str().unwrap().contains("can never admit"),
                "{row}"
            );
            continue;
        }
        assert_eq!(fails(args), expected, "{args:?}");
    }
}
