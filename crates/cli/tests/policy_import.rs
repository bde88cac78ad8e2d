//! `--policy-from`: a policy written for another engine runs here as its flags would, with
//! the run's own settings the file gives; every field read is listed; `decode-lab policy`
//! writes it back in each form.

mod common;

use std::path::PathBuf;

use common::{decode_lab, ok, workspace};
use serde_json::Value;

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("policy-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn record(args: &[&str]) -> Value {
    let line = ok(args);
    serde_json::from_str(line.lines().last().unwrap()).unwrap()
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
fn a_request_body_runs_as_the_flags_it_says_with_its_seed_and_length() {
    let body = scratch(
        "body.json",
        r#"{"model": "tiny", "prompt": "x", "temperature": 0.9, "top_p": 0.8, "frequency_penalty": 0.5, "seed": 11, "max_tokens": 6}"#,
    );
    let body = body.to_str().unwrap();
    let imported = record(&[
        "generate",
        "--prompt",
        "The ",
        "--policy-from",
        body,
        "--json",
    ]);
    let typed = record(&[
        "generate",
        "--prompt",
        "The ",
        "--engine",
        "vllm",
        "--temperature",
        "0.9",
        "--top-p",
        "0.8",
        "--frequency-penalty",
        "0.5",
        "--seed",
        "11",
        "--max-tokens",
        "6",
        "--json",
    ]);
    assert_eq!(imported["config"], typed["config"]);
    assert_eq!(tokens(&imported), tokens(&typed));
    assert_eq!(imported["config"]["seed"], 11);
    assert_eq!(imported["config"]["max_tokens"], 6);
    // A flag typed beside the file takes the place of its setting.
    let seeded = record(&[
        "generate",
        "--prompt",
        "The ",
        "--policy-from",
        body,
        "--seed",
        "12",
        "--top-p",
        "0.5",
        "--json",
    ]);
    assert_eq!(seeded["config"]["seed"], 12);
    assert_eq!(seeded["config"]["policy"]["top_p"], 0.5);
    assert_eq!(seeded["config"]["policy"]["temperature"], 0.9);
}

/// A vLLM body's `bad_words` run under vLLM's own rule (the generated tokens alone), as the
/// token-id sequences the tokenizer finds for each word with and without a leading space:
/// the same run as those sequences typed as flags. (vLLM was refused bad words before.)
#[test]
fn a_vllm_body_with_bad_words_runs_as_their_sequences() {
    let body = scratch(
        "bad_words.json",
        r#"{"bad_words": ["the"], "temperature": 0, "max_tokens": 12}"#,
    );
    let args = ["generate", "--prompt", "Once upon a time", "--json"];
    let imported = record(&[&args[..], &["--policy-from", body.to_str().unwrap()]].concat());
    let words = imported["config"]["policy"]["bad_words"]
        .as_array()
        .unwrap();
    assert_eq!(words.len(), 2, "\"the\" and \" the\": {words:?}");
    let flag = words
        .iter()
        .map(|w| {
            let ids: Vec<String> = w
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.to_string())
                .collect();
            ids.join(",")
        })
        .collect::<Vec<_>>()
        .join(";");
    let typed = record(
        &[
            &args[..],
            &[
                "--engine",
                "vllm",
                "--temperature",
                "0",
                "--max-tokens",
                "12",
            ],
            &["--bad-words", &flag],
        ]
        .concat(),
    );
    assert_eq!(tokens(&imported), tokens(&typed));
    // A one-token bad word is banned at every step.
    for word in words.iter().filter(|w| w.as_array().unwrap().len() == 1) {
        assert!(!tokens(&imported).contains(&word[0].as_u64().unwrap()));
    }
}

#[test]
fn every_field_read_is_listed_with_what_it_became() {
    let config = workspace()
        .join("crates/policy/tests/fixtures/generation_configs/llama-3.1-8b-instruct.json");
    let out = decode_lab(&["policy", "--policy-from", config.to_str().unwrap()]);
    assert!(out.status.success());
    let said = String::from_utf8(out.stderr).unwrap();
    for line in [
        "a Hugging Face generation_config.json, read under the hf engine's rules:",
        "  do_sample true: sampling: the warpers run",
        "  eos_token_id [128001,128008,128009]: --eos 128001,128008,128009",
        "  temperature 0.6: --temperature 0.6",
        "  top_k (not given): --top-k 50",
        "  transformers_version \"4.42.3\": left alone (not a decoding setting)",
    ] {
        assert!(said.contains(line), "{line}\nin\n{said}");
    }
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "--engine hf --temperature 0.6 --top-k 50 --top-p 0.9 --eos 128001,128008,128009"
    );
}

/// The file's token ids are its model's: `pipeline` takes them given logits that long.
#[test]
fn another_models_ids_step_in_pipeline_given_its_vocabulary() {
    let config = workspace()
        .join("crates/policy/tests/fixtures/generation_configs/qwen2.5-7b-instruct.json");
    let mut logits = vec![0.0f64; 151_646];
    logits[151_645] = 13.0;
    logits[7] = 12.0;
    let logits = scratch("logits.json", &serde_json::to_string(&logits).unwrap());
    let step: Value = serde_json::from_str(&ok(&[
        "pipeline",
        "--logits-file",
        logits.to_str().unwrap(),
        "--policy-from",
        config.to_str().unwrap(),
        "--min-new-tokens",
        "1",
        "--context",
        "1,2",
        "--prompt-len",
        "2",
    ]))
    .unwrap();
    // Qwen's end ids are masked until the first new token; then token 7 alone makes Qwen's
    // top-p 0.8 (e^(12/0.7) against 151,644 tokens at e^0).
    assert_eq!(step["policy"]["eos_token"], 151645);
    assert_eq!(step["policy"]["top_k"], 20);
    assert_ne!(step["token"], 151645);
    assert_eq!(step["token"], 7);
}

#[test]
fn policy_writes_each_form_and_reads_it_back() {
    let line = scratch(
        "line.txt",
        "llama-cli -m m.gguf --temp 0.7 --top-k 30 --repeat-penalty 1.1 --xtc-probability 0.5 --seed 4 -n 20",
    );
    let flags = ok(&["policy", "--policy-from", line.to_str().unwrap()]);
    assert_eq!(
        flags.trim(),
        "--engine llama.cpp --temperature 0.7 --top-k 30 --top-p 0.95 --min-p 0.05 --xtc-probability 0.5 --repetition-penalty 1.1 --seed 4 --max-tokens 20"
    );
    let written = ok(&[
        "policy",
        "--policy-from",
        line.to_str().unwrap(),
        "--to",
        "llama.cpp",
    ]);
    let again = scratch("again.txt", &written);
    assert_eq!(
        ok(&["policy", "--policy-from", again.to_str().unwrap()]),
        flags
    );
}

/// A policy piped in is read once, though the command asks for its knobs and its run
/// settings apart.
#[test]
fn a_policy_from_a_pipe_is_read_once() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_decode-lab"))
        .args(["policy", "--policy-from", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"temperature": 0.4, "seed": 3}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "--engine vllm --temperature 0.4 --seed 3"
    );
}
