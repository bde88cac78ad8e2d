//! `decode-lab capacity` as a user runs it: presets and trace files in, a byte-identical
//! plan out, the known-good file round trip, and one-line errors with exit code 2.

use std::path::PathBuf;

mod common;

use common::{decode_lab, ok};

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
    // Each names the flag, the value and what was expected (they named no flag before, and
    // a batch limit of 0 exited 0 with a degraded plan though it can never admit a request).
    let cases: [(&[&str], &str); 7] = [
        (
            &["capacity", "--rate", "-3"],
            "error: --rate -3: arrival rate (requests/s) must be a finite number above zero, got -3\n",
        ),
        (
            &["capacity", "--rate", "0"],
            "error: --rate 0: arrival rate (requests/s) must be a finite number above zero, got 0\n",
        ),
        (
            &["capacity", "--slo-ttft-p99", "0"],
            "error: --slo-ttft-p99 0: p99 TTFT SLO (s) must be a finite number above zero, got 0\n",
        ),
        (
            &["capacity", "--batch-limits", "0", "--requests", "10"],
            "error: --batch-limits 0: the policy can never admit a request: its batch limit (max_sequences) is 0, so no sequence can run; a batch limit must be at least 1\n",
        ),
        (
            &["capacity", "--hardware", "tpu"],
            "error: --hardware tpu: unknown hardware preset \"tpu\"; known: a100-80gb, h100-sxm, h200, l4, lab-cpu\n",
        ),
        (
            &["capacity", "--policy", "greedy"],
            "error: --policy greedy: \"greedy\" is not valid; expected static, continuous or chunked:BUDGET (BUDGET a whole number of tokens from 1 to 4294967295)\n",
        ),
        (
            &["capacity", "--load-scales", "1e-300"],
            "error: --load-scales 1e-300: load scale must lie in [1e-6, 1e6], got 1e-300\n",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(fails(args), expected, "{args:?}");
    }
}

#[test]
fn a_trace_without_a_rate_and_a_slice_without_quality_are_errors() {
    let one = scratch("one.csv");
    std::fs::write(
        &one,
        "arrival_s,prompt_tokens,output_tokens,slice\n0.5,10,5,en\n",
    )
    .unwrap();
    let err = fails(&["capacity", "--trace", one.to_str().unwrap()]);
    assert!(
        err.contains("the trace's 1 request all arrive at 0.5 s, so it has no arrival rate"),
        "{err}"
    );
    // An eval that measures English only, against a trace with Basque: no release with the
    // Basque gate gone.
    let eval: serde_json::Value = serde_json::from_str(capacity::TINY_EVAL_JSON).unwrap();
    let mut english = eval.clone();
    english["slices"]
        .as_array_mut()
        .unwrap()
        .retain(|s| s["slice"].as_str().unwrap().starts_with("en"));
    let quality = scratch("english.json");
    std::fs::write(&quality, english.to_string()).unwrap();
    let err = fails(&[
        "capacity",
        "--requests",
        "200",
        "--quality",
        quality.to_str().unwrap(),
    ]);
    assert!(
        err.contains("the trace has slice \"eu\", but the quality profile"),
        "{err}"
    );
}

#[test]
fn save_known_good_never_writes_over_a_file_the_run_reads() {
    let dir = scratch("inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.csv");
    let mut text = String::from("arrival_s,prompt_tokens,output_tokens,slice\n");
    for i in 0..100 {
        text.push_str(&format!(
            "{},{},8,{}\n",
            i as f64 * 0.01,
            20 + i % 7,
            if i % 10 == 0 { "eu" } else { "en" }
        ));
    }
    std::fs::write(&trace, &text).unwrap();
    let hard = dir.join("hard.csv");
    let soft = dir.join("soft.csv");
    let _ = std::fs::remove_file(&hard);
    let _ = std::fs::remove_file(&soft);
    std::fs::hard_link(&trace, &hard).unwrap();
    std::os::unix::fs::symlink(&trace, &soft).unwrap();
    let dotted = dir.join("..").join("inputs").join(".").join("trace.csv");
    for target in [&trace, &hard, &soft, &dotted] {
        let err = fails(&[
            "capacity",
            "--trace",
            trace.to_str().unwrap(),
            "--batch-limits",
            "4",
            "--save-known-good",
            target.to_str().unwrap(),
        ]);
        assert!(
            err.contains("a command never writes over what it reads"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&trace).unwrap(), text);
    }
    let quality = dir.join("eval.json");
    std::fs::write(&quality, capacity::TINY_EVAL_JSON).unwrap();
    let err = fails(&[
        "capacity",
        "--quality",
        quality.to_str().unwrap(),
        "--save-known-good",
        quality.to_str().unwrap(),
    ]);
    assert!(err.contains("is the file that --quality"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&quality).unwrap(),
        capacity::TINY_EVAL_JSON
    );
}

#[test]
fn replicas_routers_and_prefix_caches_sweep_and_bad_ones_exit_2() {
    let plan: serde_json::Value = serde_json::from_str(&ok(&[
        "capacity",
        "--trace",
        "chat-prefix",
        "--requests",
        "600",
        "--policy",
        "chunked:128",
        "--batch-limits",
        "16",
        "--weights",
        "full",
        "--load-scales",
        "2,8",
        "--replicas",
        "1,4",
        "--router",
        "round-robin,kv-aware",
        "--prefix-cache",
        "on",
        "--json",
    ]))
    .unwrap();
    // One replica is routed one way; four replicas once per router; at two loads.
    let rows = plan["sweep"].as_array().unwrap();
    let fleets: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["replicas"].as_u64().unwrap(),
                r["router"].as_str().unwrap(),
            )
        })
        .collect();
    let one_load = [(1, "round-robin"), (4, "round-robin"), (4, "kv-aware")];
    assert_eq!(fleets, [one_load, one_load].concat());
    // Every system prompt is 64 tokens of prompts 66 to 128 tokens long: most of the
    // prompt tokens hit once the eight prompts are cached.
    for r in rows {
        let hits = r["prefix_cache_hit_rate"].as_f64().unwrap();
        assert!((0.4..0.8).contains(&hits), "{hits}");
    }
    assert!(plan["decision"]["replicas"].as_u64().unwrap() >= 1);

    let cases: [(&[&str], &str); 15] = [
        (
            &["capacity", "--attention", "flash"],
            "error: --attention flash: unknown attention \"flash\"; expected fused or naive\n",
        ),
        (
            &["capacity", "--rollout", "half"],
            "error: --rollout half: expected canary:FRACTION, the candidate's share of the requests, e.g. canary:0.1\n",
        ),
        (
            &["capacity", "--rollout", "canary:0"],
            "error: --rollout canary:0: canary fraction must lie in [1e-6, 1], got 0\n",
        ),
        (
            &["capacity", "--rollout-trace", "bursty"],
            "error: --rollout-trace, --mitigation-delay and --detector-windows shape a canary; give --rollout canary:FRACTION too\n",
        ),
        (
            &["capacity", "--speculative", "0"],
            "error: --speculative 0: speculative decoding: k = 0 drafts nothing; k must be at least 1 (or leave speculation off)\n",
        ),
        (
            &["capacity", "--speculative", "4", "--decoding", "top-p"],
            "error: --decoding top-p: the measured profile has no policy \"top p\"; it has greedy, temperature 0.7, temperature 1.5\n",
        ),
        (
            &["capacity", "--disaggregate", "3"],
            "error: --disaggregate 3: expected P:D, the prefill and decode replicas as whole numbers, e.g. 3:1\n",
        ),
        (
            &["capacity", "--disaggregate", "2:0"],
            "error: --disaggregate 2:0: sweep: disaggregation 2:0 must have at least one prefill and one decode replica, and at most 4096 in all\n",
        ),
        (
            &["capacity", "--disaggregate", "1:1", "--kv-link-gbps", "0"],
            "error: --kv-link-gbps 0: KV link bandwidth (Gbit/s) must be a finite number above zero, got 0\n",
        ),
        (
            &["capacity", "--kv-link-gbps", "100"],
            "error: --kv-link-gbps 100: the KV link joins prefill and decode replicas; give --disaggregate P:D too\n",
        ),
        (
            &["capacity", "--replicas", "0"],
            "error: --replicas 0: replicas must be at least 1, got 0\n",
        ),
        (
            &["capacity", "--router", "fastest"],
            "error: --router fastest: \"fastest\" is not valid; expected round-robin, random, least-outstanding, least-kv, prefix-affinity or kv-aware\n",
        ),
        (
            &["capacity", "--router-staleness", "-1"],
            "error: --router-staleness -1: router staleness (s) must lie in [0, 1e6], got -1\n",
        ),
        (
            &["capacity", "--queue-cap", "0"],
            "error: --queue-cap 0: queue cap (requests waiting per replica) must be at least 1, got 0\n",
        ),
        (
            &["capacity", "--prefix-cache", "yes"],
            "error: --prefix-cache yes: expected on or off\n",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(fails(args), expected, "{args:?}");
    }
}

#[test]
fn a_prefix_longer_than_its_prompt_names_its_line() {
    let csv = scratch("prefix.csv");
    std::fs::write(
        &csv,
        "arrival_s,prompt_tokens,output_tokens,slice,prefix_id,prefix_tokens\n0,40,8,en,system,32\n0.1,30,8,en,,\n0.2,20,8,en,system,32\n",
    )
    .unwrap();
    let err = fails(&["capacity", "--trace", csv.to_str().unwrap()]);
    assert_eq!(
        err,
        format!(
            "error: --trace {}: trace line 4: prefix_tokens 32 of prefix \"system\" is not 1 to the prompt's 20 tokens (a prefix cannot be longer than its prompt)\n",
            csv.display()
        )
    );
}
