//! `decode-lab export --parquet` on runs the CLI generated: the tables `observe` reads back
//! to the same report as the JSONL, a damaged line named and left out with exit code 1, and
//! a bad outcome row named with exit code 2 and the old tables left whole.

use std::path::PathBuf;

mod common;

use common::{decode_lab, fails_with, ok};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn generate(prompt: &str, seed: u64, extra: &[&str]) -> String {
    let seed = seed.to_string();
    let args = [
        &[
            "generate",
            "--prompt",
            prompt,
            "--max-tokens",
            "4",
            "--seed",
            &seed,
            "--json",
        ][..],
        extra,
    ]
    .concat();
    ok(&args).trim().to_string()
}

fn outcome(record: &str, accepted: bool) -> String {
    let record: serde_json::Value = serde_json::from_str(record).unwrap();
    format!(
        r#"{{"run_id":{},"outcome":"{}","at_s":5}}"#,
        record["run_id"],
        if accepted { "accepted" } else { "rejected" }
    )
}

fn observe(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(&[&["observe"][..], args, &["--json"]].concat())).unwrap()
}

#[test]
fn observe_reads_the_export_as_it_reads_the_jsonl() {
    let (mut runs, mut outcomes) = (Vec::new(), Vec::new());
    for seed in 0..3u64 {
        // Untagged (the identifier slices it), tagged, and another version.
        let en = generate("Insert a table ", seed, &[]);
        let eu = generate("Insert a table ", seed, &["--tag", "slice=eu"]);
        let hot = generate("Hautatu taula ", seed, &["--temperature", "1.3"]);
        for (r, ok) in [(&en, true), (&eu, seed > 0), (&hot, false)] {
            outcomes.push(outcome(r, ok));
            runs.push(r.clone());
        }
    }
    let good = runs.join("\n");
    let (runs_file, outcomes_file) = (scratch("runs.jsonl"), scratch("outcomes.jsonl"));
    std::fs::write(&runs_file, &good).unwrap();
    std::fs::write(&outcomes_file, outcomes.join("\n")).unwrap();
    let out = scratch("export");
    let (runs_path, outcomes_path, out_path) = (
        runs_file.to_str().unwrap(),
        outcomes_file.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let said = ok(&[
        "export",
        "--parquet",
        runs_path,
        "--outcomes",
        outcomes_path,
        "-o",
        out_path,
    ]);
    assert!(
        said.starts_with("wrote 9 runs, 36 steps and 9 outcomes"),
        "{said}"
    );

    let from_jsonl = observe(&[runs_path, "--outcomes", outcomes_path]);
    let outcomes_table = out.join("outcomes.parquet");
    let from_parquet = observe(&[out_path, "--outcomes", outcomes_table.to_str().unwrap()]);
    assert_eq!(from_parquet["versions"], from_jsonl["versions"]);
    assert_eq!(from_parquet["runs"], 9);
    // The runs table named as a file, and the outcomes as the export's directory.
    let runs_table = out.join("runs.parquet");
    let named = observe(&[runs_table.to_str().unwrap(), "--outcomes", out_path]);
    assert_eq!(named["versions"], from_jsonl["versions"]);
    // The JSONL beside its own export: each run counted once, each repeat named.
    let both = observe(&[runs_path, out_path, "--outcomes", outcomes_path]);
    assert_eq!(both["versions"], from_jsonl["versions"]);
    assert_eq!(
        (both["runs"].as_u64(), both["duplicate_count"].as_u64()),
        (Some(9), Some(9))
    );
    assert_eq!(both["duplicates"][0]["first_source"], runs_path);

    // A record edited after it was sealed, and a line that is no record: each is named on
    // standard error, left out, and the export exits with 1.
    let damaged = runs[1].replacen("\"seed\":0", "\"seed\":7", 1);
    assert_ne!(damaged, runs[1]);
    let mixed = [
        &runs[..1],
        &[damaged, "{\"not\": 1}".to_string()],
        &runs[2..],
    ]
    .concat();
    std::fs::write(&runs_file, mixed.join("\n")).unwrap();
    let result = decode_lab(&["export", "--parquet", runs_path, "-o", out_path]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "rejected: {runs_path} line 2: altered after it was written"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("rejected: {runs_path} line 3: ")),
        "{stderr}"
    );
    assert!(
        stdout.contains("wrote 8 runs, 32 steps and 0 outcomes")
            && stdout.contains("; 2 lines rejected and left out"),
        "{stdout}"
    );
    assert_eq!(observe(&[out_path])["runs"], 8);

    // An outcome row that is not one: named, exit code 2, and the last export's tables
    // left as they were.
    std::fs::write(&runs_file, &good).unwrap();
    std::fs::write(
        &outcomes_file,
        format!(
            "{}\n{{\"run_id\":\"x\",\"outcome\":\"maybe\",\"at_s\":1}}",
            outcomes[0]
        ),
    )
    .unwrap();
    fails_with(
        &[
            "export",
            "--parquet",
            runs_path,
            "--outcomes",
            outcomes_path,
            "-o",
            out_path,
        ],
        &format!("{outcomes_path}: outcomes line 2: unknown variant `maybe`"),
    );
    assert_eq!(observe(&[out_path])["runs"], 8);
    fails_with(&["export", runs_path, "-o", out_path], "--parquet");
    let _ = std::fs::remove_dir_all(out);
}
