//! Every subcommand writing to a reader that has gone (`| head -1`) ends quietly with exit
//! code 0, and to a full disk (`> /dev/full`) with one `error:` line and exit code 1.

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A record to replay, made once per test.
fn record(name: &str) -> String {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("output-{name}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_decode-lab"))
        .args([
            "generate",
            "--prompt",
            "The ",
            "--max-tokens",
            "4",
            "--json",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::write(&path, &out.stdout).unwrap();
    path.to_string_lossy().into_owned()
}

fn subcommands(record: &str) -> Vec<Vec<String>> {
    let lines: &[&[&str]] = &[
        &["choose", "--logits", "1.2,0.1,2.4,1.7"],
        &["choose", "--logits", "1.2,0.1,2.4,1.7", "--json"],
        &["pipeline", "--logits", "1.2,0.1,2.4,1.7", "--top-k", "2"],
        &["generate", "--prompt", "The ", "--max-tokens", "24"],
        &[
            "generate",
            "--prompt",
            "The ",
            "--max-tokens",
            "4",
            "--json",
        ],
        &["replay", record],
        &["eval", "--max-tokens", "64", "--new-tokens", "2"],
        &["capacity", "--requests", "200", "--load-scales", "1"],
        &[
            "capacity",
            "--requests",
            "200",
            "--load-scales",
            "1",
            "--json",
        ],
    ];
    lines
        .iter()
        .map(|l| l.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn a_closed_pipe_ends_every_subcommand_quietly() {
    let record = record("pipe");
    for args in subcommands(&record) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_decode-lab"))
            .args(&args)
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes before the first byte is written, as `head -1` goes after one line.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("error"),
            "decode-lab {}: {stderr}",
            args.join(" ")
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "decode-lab {}: {stderr}",
            args.join(" ")
        );
    }
}

#[test]
fn a_full_disk_is_one_error_line_and_exit_code_1() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: this system has no /dev/full");
        return;
    }
    let record = record("full");
    for args in subcommands(&record) {
        let out = Command::new(env!("CARGO_BIN_EXE_decode-lab"))
            .args(&args)
            .current_dir(root())
            .stdout(File::options().write(true).open("/dev/full").unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert!(
            !stderr.contains("panicked"),
            "decode-lab {}: {stderr}",
            args.join(" ")
        );
        assert_eq!(errors.len(), 1, "decode-lab {}: {stderr}", args.join(" "));
        assert!(errors[0].contains("No space left"), "{}", errors[0]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "decode-lab {}: {stderr}",
            args.join(" ")
        );
    }
}
