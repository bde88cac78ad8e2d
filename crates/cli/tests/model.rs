//! `decode-lab generate`, `replay` and `eval` on the model that ships in
//! `models/decode-lab-tiny-v1`, and every way a model directory can be wrong.

use std::path::{Path, PathBuf};

mod common;

use common::{config, decode_lab, fails_with, model_dir, ok, recorded_hash};

/// A scratch copy of the model directory.
fn scratch_copy(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(model_dir()).unwrap() {
        let entry = entry.unwrap();
        // The model's own files; the demo telemetry beside them is not the model.
        if entry.file_type().unwrap().is_dir() {
            continue;
        }
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

#[test]
fn generate_records_and_replays_identically() {
    let line = ok(&[
        "generate",
        "--prompt",
        "The ",
        "--temperature",
        "0.7",
        "--top-k",
        "40",
        "--seed",
        "3",
        "--max-tokens",
        "24",
        "--json",
    ]);
    let record: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(record["model"]["name"], "decode-lab-tiny-v1");
    assert_eq!(record["model"]["hash"], recorded_hash("weights-f32"));
    assert_eq!(record["tokenizer"]["hash"], recorded_hash("tokenizer"));
    let steps = record["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 24);
    assert!(record["ttft_us"].as_f64().unwrap() > 0.0);
    assert_eq!(
        record["token_latencies_us"].as_array().unwrap().len(),
        steps.len()
    );

    let file = std::env::temp_dir().join(format!("decode-lab-run-{}.json", std::process::id()));
    std::fs::write(&file, &line).unwrap();
    assert!(ok(&["replay", file.to_str().unwrap()]).starts_with("identical"));

    let mut tampered = record.clone();
    let token = tampered["steps"][1]["token"].as_u64().unwrap();
    tampered["steps"][1]["token"] = serde_json::json!((token + 1) % 700);
    std::fs::write(&file, tampered.to_string()).unwrap();
    let out = decode_lab(&["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("altered after it was written"));
    // Without its digest and ids (as a record written before them), the replay finds the step.
    for field in ["record_digest", "run_id", "version_id"] {
        tampered.as_object_mut().unwrap().remove(field);
    }
    std::fs::write(&file, tampered.to_string()).unwrap();
    let out = decode_lab(&["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("differs at step 1: token "));
}

/// `--tag` and `--weights` reach the record, sealed into its digest and ids: the same
/// request tagged another way is another run of the same version, and int8 another version.
#[test]
fn generate_tags_the_record_and_names_its_run_and_version() {
    let generate = |extra: &[&str]| -> serde_json::Value {
        let args = [
            &[
                "generate",
                "--prompt",
                "The ",
                "--max-tokens",
                "4",
                "--json",
            ][..],
            extra,
        ]
        .concat();
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let eu = generate(&["--tag", "slice=eu", "--tag", "tenant=course-a"]);
    assert_eq!(
        eu["tags"],
        serde_json::json!({"slice": "eu", "tenant": "course-a"})
    );
    assert_eq!(eu["precision"], "f32");
    let digest = eu["record_digest"].as_str().unwrap();
    assert_eq!(eu["run_id"].as_str().unwrap(), &digest[7..23]);
    let en = generate(&["--tag", "slice=en"]);
    assert_ne!(en["run_id"], eu["run_id"]);
    assert_eq!(en["version_id"], eu["version_id"]);
    let int8 = generate(&["--tag", "slice=en", "--weights", "int8"]);
    assert_eq!(int8["precision"], "int8");
    assert_ne!(int8["version_id"], en["version_id"]);
    // The summary names both ids: the same run as the one printed as JSON.
    let out = decode_lab(&[
        "generate",
        "--prompt",
        "The ",
        "--max-tokens",
        "4",
        "--tag",
        "slice=en",
    ]);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains(&format!(
            "run {}, version {}",
            en["run_id"].as_str().unwrap(),
            en["version_id"].as_str().unwrap()
        )),
        "{summary}"
    );
    fails_with(
        &["generate", "--prompt", "a", "--tag", "slice"],
        "--tag: tag \"slice\" is not key=value",
    );
    fails_with(
        &["generate", "--prompt", "a", "--tag", "a=1", "--tag", "a=2"],
        "--tag: tag key \"a\" is given twice",
    );
}

#[test]
fn generate_streams_text_and_int8_is_its_own_model() {
    let out = decode_lab(&[
        "generate",
        "--prompt",
        "To insert a ",
        "--max-tokens",
        "16",
        "--temperature",
        "0",
        "--stop",
        "\n",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("[stopped: "));
    let line = ok(&[
        "generate",
        "--prompt",
        "The ",
        "--max-tokens",
        "4",
        "--weights",
        "int8",
        "--json",
    ]);
    let record: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(record["model"]["hash"], recorded_hash("weights-int8"));
}

#[test]
fn bad_prompts_are_refused() {
    fails_with(&["generate", "--prompt", ""], "the prompt is empty");
    // 3,000 bytes could fit in 256 tokens of up to 13 bytes; these take more tokens.
    let long = "word ".repeat(600);
    fails_with(
        &["generate", "--prompt", &long],
        "more than the context of 256 tokens",
    );
    // 10,000 bytes cannot fit whatever the tokens: refused before it is encoded.
    let longer = "word ".repeat(2000);
    fails_with(
        &["generate", "--prompt", &longer],
        "the prompt in its template would be 10000 bytes, more than a context of 256 tokens can hold",
    );
}

fn generate_in(dir: &Path) -> [&str; 5] {
    [
        "generate",
        "--prompt",
        "The ",
        "--model",
        dir.to_str().unwrap(),
    ]
}

#[test]
fn a_wrong_model_directory_is_named() {
    let dir = scratch_copy("truncated");
    let weights = dir.join("model.f32.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    fails_with(&generate_in(&dir), "weights-f32 file has SHA-256");

    let dir = scratch_copy("tokenizer");
    let tokenizer = dir.join("tokenizer.json");
    let mut text = std::fs::read_to_string(&tokenizer).unwrap();
    text.push(' ');
    std::fs::write(&tokenizer, text).unwrap();
    fails_with(&generate_in(&dir), "tokenizer file has SHA-256");

    let dir = scratch_copy("shapes");
    let mut wrong = config();
    wrong["d_ff"] = serde_json::json!(wrong["d_ff"].as_u64().unwrap() + 1);
    std::fs::write(dir.join("config.json"), wrong.to_string()).unwrap();
    fails_with(&generate_in(&dir), "but the config needs");

    let dir = scratch_copy("missing");
    std::fs::remove_file(dir.join("model.int8.safetensors")).unwrap();
    fails_with(
        &[
            "generate",
            "--prompt",
            "The ",
            "--weights",
            "int8",
            "--model",
            dir.to_str().unwrap(),
        ],
        "cannot read",
    );
}

#[test]
fn eval_reports_each_slice_and_precision() {
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "eval",
        "--max-tokens",
        "300",
        "--new-tokens",
        "8",
        "--json",
    ]))
    .unwrap();
    let slices = report["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 4);
    for s in slices {
        let bpb = s["bits_per_byte"].as_f64().unwrap();
        assert!(bpb > 0.5 && bpb < 8.0, "{s}");
    }
    assert!(slices
        .iter()
        .any(|s| s["slice"].as_str().unwrap().starts_with("eu")));
    assert_eq!(report["policies"].as_array().unwrap().len(), 8);
}
