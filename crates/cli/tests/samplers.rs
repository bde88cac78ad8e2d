//! `--samplers`: any order of the stages, by llama.cpp's names, in `pipeline` and
//! `generate`; a run with a chain records it and replays.

mod common;

use common::{fails_with, ok};
use serde_json::Value;

fn pipeline(extra: &[&str]) -> Value {
    let mut args = vec!["pipeline", "--logits", "3,2,1", "--seed", "7"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&args)).unwrap()
}

fn kept(out: &Value) -> Vec<u64> {
    out["final"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect()
}

fn stage_names(out: &Value) -> Vec<String> {
    out["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap().to_string())
        .collect()
}

/// The example: logits [3, 2, 1], top-p 0.8, temperature 0.5.
#[test]
fn the_order_of_temperature_and_top_p_changes_what_is_kept() {
    let knobs = ["--top-p", "0.8", "--temperature", "0.5"];
    let last = pipeline(&[&knobs[..], &["--samplers", "top_p;temperature"]].concat());
    assert_eq!(kept(&last), [0, 1]);
    assert_eq!(stage_names(&last), ["constraints", "top_p", "temperature"]);
    let first = pipeline(&[&knobs[..], &["--samplers", "temperature,top_p"]].concat());
    assert_eq!(kept(&first), [0]);
    // The fixed orders say the same.
    let fixed = pipeline(&[&knobs[..], &["--order", "temperature-last"]].concat());
    assert_eq!(kept(&fixed), [0, 1]);
    assert_eq!(fixed["final"], last["final"]);
}

#[test]
fn a_chain_without_temperature_runs_at_temperature_one() {
    let out = pipeline(&["--samplers", "top_k", "--top-k", "2"]);
    assert_eq!(kept(&out), [0, 1]);
    let e = 1f64.exp();
    let p0 = out["final"][0]["prob"].as_f64().unwrap();
    assert!((p0 - e / (e + 1.0)).abs() < 1e-12);
}

#[test]
fn generate_with_the_temperature_last_chain_is_the_fixed_order() {
    let run = |flags: &[&str]| {
        let mut args = vec![
            "generate",
            "--prompt",
            "To insert a table, ",
            "--seed",
            "5",
            "--max-tokens",
            "12",
            "--top-k",
            "20",
            "--top-p",
            "0.9",
            "--json",
        ];
        args.extend_from_slice(flags);
        ok(&args)
    };
    let chained = run(&["--samplers", "penalties;top_k;top_p;min_p;temperature"]);
    let fixed = run(&["--order", "temperature-last"]);
    let tokens = |line: &str| {
        let record: Value = serde_json::from_str(line).unwrap();
        record["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["token"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(tokens(&chained), tokens(&fixed));
    let record: Value = serde_json::from_str(&chained).unwrap();
    assert_eq!(
        record["config"]["policy"]["samplers"],
        serde_json::json!(["penalties", "top_k", "top_p", "min_p", "temperature"])
    );
    let file = std::env::temp_dir().join(format!("decode-lab-chain-{}.json", std::process::id()));
    std::fs::write(&file, &chained).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));
    std::fs::remove_file(&file).ok();
}

#[test]
fn bad_chains_are_named() {
    let base = ["pipeline", "--logits", "3,2,1"];
    for (extra, says) in [
        (
            vec!["--samplers", "top_k;temp"],
            "sampler \"temp\" is not known: expected penalties, dry, top_n_sigma, top_h, top_k, \
             typ_p, top_p, min_p, epsilon, eta, xtc or temperature",
        ),
        (vec!["--samplers", ";"], "the sampler list is empty"),
        (
            vec!["--samplers", "top_k;top_k"],
            "sampler top_k is listed twice",
        ),
        (
            vec!["--samplers", "top_k", "--min-p", "0.2"],
            "min-p 0.2 is set but min_p is not in the sampler list",
        ),
        (vec!["--samplers", "top_k", "--order", "hf"], "--order"),
    ] {
        fails_with(&[&base[..], &extra[..]].concat(), says);
    }
}

#[test]
fn an_engine_preset_sets_its_order_and_semantics() {
    // The example: llama.cpp runs temperature last.
    let knobs = ["--top-p", "0.8", "--temperature", "0.5"];
    let llama = pipeline(&[&knobs[..], &["--engine", "llama.cpp"]].concat());
    assert_eq!(kept(&llama), [0, 1]);
    let hf = pipeline(&[&knobs[..], &["--engine", "hf"]].concat());
    assert_eq!(kept(&hf), [0]);
    // llama.cpp takes top-p 0 and keeps the top token; vLLM refuses it.
    let zero = pipeline(&["--engine", "llama.cpp", "--top-p", "0"]);
    assert_eq!(kept(&zero), [0]);
    fails_with(
        &[
            "pipeline", "--logits", "3,2,1", "--engine", "vllm", "--top-p", "0",
        ],
        "vllm does not take top-p 0: it takes a top-p greater than 0 and at most 1",
    );
    fails_with(
        &[
            "pipeline", "--logits", "3,2,1", "--engine", "hf", "--order", "hf",
        ],
        "--order",
    );
    fails_with(
        &["pipeline", "--logits", "3,2,1", "--engine", "gemini"],
        "gemini",
    );
    fails_with(
        &["pipeline", "--logits", "3,2,1", "--penalty-last-n", "4"],
        "a penalty window (penalty-last-n) is llama.cpp's",
    );
}

#[test]
fn a_llama_cpp_run_records_its_engine_and_window_and_replays() {
    let line = ok(&[
        "generate",
        "--prompt",
        "To insert a table, ",
        "--seed",
        "9",
        "--max-tokens",
        "12",
        "--engine",
        "llama.cpp",
        "--repetition-penalty",
        "1.3",
        "--penalty-last-n",
        "16",
        "--top-k",
        "40",
        "--json",
    ]);
    let record: Value = serde_json::from_str(&line).unwrap();
    let policy = &record["config"]["policy"];
    assert_eq!(policy["engine"], "llama.cpp");
    assert_eq!(policy["penalty_last_n"], 16);
    let file = std::env::temp_dir().join(format!("decode-lab-engine-{}.json", std::process::id()));
    std::fs::write(&file, &line).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));
    std::fs::remove_file(&file).ok();
}

/// The modern samplers from the command line: each flag switches its stage on, in the
/// order's place or the chain's.
#[test]
fn the_modern_samplers_run_from_their_flags() {
    let logits = ["pipeline", "--logits", "2,1.9,1.8,0", "--seed", "3"];
    let with = |extra: &[&str]| -> Value {
        serde_json::from_str(&ok(&[&logits[..], extra].concat())).unwrap()
    };
    let xtc = with(&["--xtc-probability", "1", "--xtc-threshold", "0.1"]);
    assert_eq!(kept(&xtc), [2, 3]);
    assert!(stage_names(&xtc).contains(&"xtc".to_string()));
    let sigma = with(&["--top-n-sigma", "1"]);
    assert_eq!(kept(&sigma), [0, 1, 2]);
    let typical = with(&["--typical", "0.5", "--engine", "llama.cpp"]);
    // llama.cpp's order: typical among the filters, temperature last.
    let names = stage_names(&typical);
    assert_eq!(names[names.len() - 2..], ["typical", "temperature"]);
    let chained = with(&[
        "--samplers",
        "eta;epsilon",
        "--epsilon-cutoff",
        "0.05",
        "--eta-cutoff",
        "0.1",
    ]);
    assert_eq!(stage_names(&chained), ["constraints", "eta", "epsilon"]);
    fails_with(
        &[&logits[..], &["--engine", "vllm", "--typical", "0.9"]].concat(),
        "vllm does not take typical-p 0.9: it takes no such sampler",
    );
}

/// DRY from the command line: in `pipeline` breakers are token ids; in `generate`
/// strings, found in the vocabulary, recorded as token sequences and replayed.
#[test]
fn dry_runs_in_pipeline_and_generate() {
    // Context 0 1 2 0 1: token 2 would extend the repeat 0 1 (length 2 = allowed), so it
    // loses the multiplier 1 from its logit (llama.cpp's test case, dry.2).
    let out: Value = serde_json::from_str(&ok(&[
        "pipeline",
        "--logits",
        "0,0,0,0",
        "--context",
        "0,1,2,0,1",
        "--prompt-len",
        "5",
        "--dry-multiplier",
        "1",
        "--dry-base",
        "1.1",
    ]))
    .unwrap();
    let dry = out["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "dry")
        .unwrap();
    assert_eq!(dry["tokens"][2]["logit"], -1.0);
    // Token 2 as a breaker: the repeat 0 1 begins after it, still long enough, but token 2
    // itself is never penalised.
    let broken: Value = serde_json::from_str(&ok(&[
        "pipeline",
        "--logits",
        "0,0,0,0",
        "--context",
        "0,1,2,0,1",
        "--prompt-len",
        "5",
        "--dry-multiplier",
        "1",
        "--dry-sequence-breaker",
        "2",
    ]))
    .unwrap();
    assert!(broken["final"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["prob"] == 0.25));
    fails_with(
        &["pipeline", "--logits", "0,0", "--dry-sequence-breaker", "1"],
        "--dry-sequence-breaker needs --dry-multiplier",
    );
    fails_with(
        &[
            "pipeline",
            "--logits",
            "0,0",
            "--dry-multiplier",
            "1",
            "--dry-sequence-breaker",
            " , ",
        ],
        "--dry-sequence-breaker \" , \" names no token",
    );
    fails_with(
        &[
            "pipeline",
            "--logits",
            "0,0",
            "--dry-multiplier",
            "1",
            "--dry-sequence-breaker",
            "9",
        ],
        "DRY sequence breaker token id 9 is out of range",
    );

    let line = ok(&[
        "generate",
        "--prompt",
        "To insert a table, choose Table - Insert Table. To insert a table, ",
        "--seed",
        "4",
        "--max-tokens",
        "12",
        "--dry-multiplier",
        "0.8",
        "--json",
    ]);
    let record: Value = serde_json::from_str(&line).unwrap();
    let breakers = record["config"]["policy"]["dry_sequence_breakers"]
        .as_array()
        .unwrap();
    assert!(
        !breakers.is_empty(),
        "llama.cpp's default breakers are found in the vocabulary"
    );
    let file = std::env::temp_dir().join(format!("decode-lab-dry-{}.json", std::process::id()));
    std::fs::write(&file, &line).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));
    std::fs::remove_file(&file).ok();
}

/// Mirostat 2.0 in `generate`: μ starts at 2τ, each step records the μ it truncated at, a
/// replay reproduces them, and a tampered μ is named.
#[test]
fn mirostat_records_its_mu_and_replays() {
    let line = ok(&[
        "generate",
        "--prompt",
        "To insert a table, ",
        "--seed",
        "8",
        "--max-tokens",
        "10",
        "--temperature",
        "1",
        "--mirostat",
        "2",
        "--mirostat-tau",
        "3",
        "--mirostat-eta",
        "0.2",
        "--json",
    ]);
    let record: Value = serde_json::from_str(&line).unwrap();
    let steps = record["steps"].as_array().unwrap();
    assert_eq!(steps[0]["mirostat_mu"], 6.0);
    let mus: Vec<f64> = steps
        .iter()
        .map(|s| s["mirostat_mu"].as_f64().unwrap())
        .collect();
    // μ moves by −η (surprise − τ), the surprise in bits of the chosen token under the
    // truncated, renormalised distribution, which is the step's recorded prob.
    for (i, s) in steps.iter().enumerate().take(steps.len() - 1) {
        let surprise = -s["prob"].as_f64().unwrap().log2();
        assert!(
            (mus[i + 1] - (mus[i] - 0.2 * (surprise - 3.0))).abs() < 1e-9,
            "step {i}"
        );
    }
    let file =
        std::env::temp_dir().join(format!("decode-lab-mirostat-{}.json", std::process::id()));
    std::fs::write(&file, &line).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));
    // Tampered, the digest fails first; without the digest (as an older record), the replay
    // names the step and the field.
    let mut tampered = record.clone();
    tampered["steps"][3]["mirostat_mu"] = serde_json::json!(mus[3] + 0.5);
    std::fs::write(&file, tampered.to_string()).unwrap();
    let out = common::decode_lab(&["replay", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("altered after it was written"));
    for field in ["record_digest", "run_id", "version_id"] {
        tampered.as_object_mut().unwrap().remove(field);
    }
    std::fs::write(&file, tampered.to_string()).unwrap();
    let out = common::decode_lab(&["replay", file.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("differs at step 3: mirostat_mu "),
        "{said}"
    );
    std::fs::remove_file(&file).ok();
    fails_with(
        &[
            "pipeline",
            "--logits",
            "1,2",
            "--mirostat",
            "2",
            "--top-k",
            "40",
        ],
        "so top-k 40 would be ignored",
    );
}

/// Several end-of-sequence ids, Hugging Face's bad words and sequence bias, and the stop
/// named in the record.
#[test]
fn sequences_and_several_eos_ids() {
    // Context ends with 1: the bad word 1,2 removes token 2; the sequence bias 1,3:-2
    // lowers token 3 by 2; the one-token bad word 0 always removes token 0.
    let out: Value = serde_json::from_str(&ok(&[
        "pipeline",
        "--logits",
        "1,1,1,1,1",
        "--context",
        "4,1",
        "--prompt-len",
        "2",
        "--bad-words",
        "1,2;0",
        "--sequence-bias",
        "1,3:-2;4,4:9",
    ]))
    .unwrap();
    let constraints = &out["stages"][0]["tokens"];
    let ids: Vec<u64> = constraints
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 3, 4]);
    assert_eq!(constraints[1]["logit"], -1.0);
    assert_eq!(
        constraints[2]["logit"], 1.0,
        "4,4 does not apply: the context ends with 1"
    );
    // min-new-tokens masks every end-of-sequence id.
    let masked: Value = serde_json::from_str(&ok(&[
        "pipeline",
        "--logits",
        "1,1,1",
        "--eos",
        "0,2",
        "--min-new-tokens",
        "1",
    ]))
    .unwrap();
    assert_eq!(kept(&masked), [1]);
    for (flags, says) in [
        (
            &["--bad-words", "1,x"][..],
            "sequence \"1,x\" is not token ids",
        ),
        (
            &["--sequence-bias", "1:nan"][..],
            "sequence \"1:nan\" is not token ids",
        ),
        (
            &["--bad-words", "9"][..],
            "bad-word token id 9 is out of range",
        ),
        (
            &["--eos", "2", "--bad-words", "2"][..],
            "bad word 2 is an end-of-sequence token",
        ),
        (
            &["--engine", "llama.cpp", "--bad-words", "1"][..],
            "llama.cpp does not take 1 bad words",
        ),
        (
            &["--engine", "vllm", "--sequence-bias", "1:2"][..],
            "vllm does not take 1 sequence biases: it takes no sequence bias",
        ),
    ] {
        fails_with(
            &[&["pipeline", "--logits", "1,1,1"][..], flags].concat(),
            says,
        );
    }

    // A run that ends at its second end-of-sequence id names it, and the step.
    let probe: Value = serde_json::from_str(&ok(&[
        "generate",
        "--prompt",
        "To insert a table, ",
        "--seed",
        "2",
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--json",
    ]))
    .unwrap();
    let third = probe["steps"][2]["token"].as_u64().unwrap().to_string();
    let line = ok(&[
        "generate",
        "--prompt",
        "To insert a table, ",
        "--seed",
        "2",
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--eos",
        &format!("0,{third}"),
        "--json",
    ]);
    let record: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(record["stop_reason"], "eos");
    assert_eq!(record["stop_token"].to_string(), third);
    assert_eq!(record["stop_step"], 2);
    let file = std::env::temp_dir().join(format!("decode-lab-eos-{}.json", std::process::id()));
    std::fs::write(&file, &line).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));
    std::fs::remove_file(&file).ok();
}

/// `--min-keep`: Hugging Face's top-k keeps max(k, min_keep), llama.cpp's top-k ignores it,
/// and vLLM, which has no such setting, refuses it by name. A run records it and replays.
/// vLLM v1's bad words match the generated tokens alone
/// (`vllm/v1/sample/ops/bad_words.py`): a prompt that ends with a word's prefix bans
/// nothing under vLLM and bans the word's last token under Hugging Face; once the prefix is
/// generated, both ban it.
#[test]
fn vllm_bad_words_match_the_output_alone() {
    let step = |engine: &str, prompt_len: &str| {
        kept(&pipeline(&[
            "--engine",
            engine,
            "--bad-words",
            "0,1",
            "--context",
            "0",
            "--prompt-len",
            prompt_len,
        ]))
    };
    assert_eq!(step("vllm", "1"), [0, 1, 2]);
    assert_eq!(step("hf", "1"), [0, 2]);
    assert_eq!(step("vllm", "0"), [0, 2]);
    assert_eq!(step("hf", "0"), [0, 2]);
}

#[test]
fn min_keep_follows_the_engine_and_is_recorded() {
    let hf = pipeline(&["--engine", "hf", "--top-k", "1", "--min-keep", "2"]);
    assert_eq!(kept(&hf), [0, 1]);
    let llama = pipeline(&["--engine", "llama.cpp", "--top-k", "1", "--min-keep", "2"]);
    assert_eq!(kept(&llama), [0]);
    fails_with(
        &[
            "pipeline",
            "--logits",
            "3,2,1",
            "--engine",
            "vllm",
            "--min-keep",
            "2",
        ],
        "min-keep 2",
    );
    let record = ok(&[
        "generate",
        "--prompt",
        "To insert",
        "--max-tokens",
        "4",
        "--top-p",
        "0.2",
        "--min-keep",
        "3",
        "--json",
    ]);
    let parsed: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(parsed["config"]["policy"]["min_keep"], 3);
    assert!(parsed["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["survivors"].as_u64().unwrap() >= 3));
    let file =
        std::env::temp_dir().join(format!("decode-lab-min-keep-{}.json", std::process::id()));
    std::fs::write(&file, &record).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));
    std::fs::remove_file(&file).ok();
}
