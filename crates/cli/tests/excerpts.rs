//! Messages quote at most an excerpt of what the user gave (`policy::Excerpt`): a
//! 100,000-character flag, field or line makes an error of a few hundred bytes that still
//! names the value's start and its length.

mod common;

use common::decode_lab;

/// Runs `decode-lab args` and returns standard error, which must be short and say how long
/// the quoted input was.
fn short_error(args: &[&str], length: usize) -> String {
    let out = decode_lab(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{:?} succeeded", &args[..1]);
    assert!(
        stderr.len() < 1_500,
        "{:?}: {} bytes of error",
        &args[..1],
        stderr.len()
    );
    assert!(
        stderr.contains(&format!("({length} characters in all)")),
        "{:?}: {stderr}",
        &args[..1]
    );
    stderr
}

#[test]
fn a_huge_flag_or_field_is_quoted_as_an_excerpt() {
    let long = "k".repeat(100_000);
    short_error(&["generate", "--prompt", "hi", "--tag", &long], 100_000);
    let flags = format!("--temperature {}", "9".repeat(100_000));
    short_error(
        &["compare", "--prompt", "hi", "--a", "", "--b", &flags],
        flags.len(),
    );
    short_error(&["capacity", "--hardware", &long], 100_000);
    let dir = std::env::temp_dir().join(format!("decode-lab-excerpts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, row) in [
        ("tokens.csv", format!("1,{},5,en", "9".repeat(100_000))),
        ("slice.csv", format!("1,10,5,{long}")),
    ] {
        let trace = dir.join(name);
        std::fs::write(
            &trace,
            format!("arrival_s,prompt_tokens,output_tokens,slice\n0,10,5,en\n{row}\n"),
        )
        .unwrap();
        short_error(&["capacity", "--trace", trace.to_str().unwrap()], 100_000);
    }
    // A record (from before digests) whose rendered prompt is a megabyte and not its
    // template's: named, not copied.
    let mut big: serde_json::Value =
        serde_json::from_str(include_str!("bad_input/files/run-at-10.jsonl")).unwrap();
    for field in ["record_digest", "run_id", "version_id"] {
        big.as_object_mut().unwrap().remove(field);
    }
    big["rendered_prompt"] = serde_json::Value::String("x".repeat(1_000_000));
    let runs = dir.join("big.jsonl");
    std::fs::write(&runs, format!("{big}\n")).unwrap();
    let runs = runs.to_str().unwrap();
    short_error(&["replay", runs], 1_000_000);
    let observed = decode_lab(&["observe", runs]);
    let stdout = String::from_utf8_lossy(&observed.stdout);
    assert!(
        stdout.len() < 3_000,
        "observe printed {} bytes",
        stdout.len()
    );
    assert!(stdout.contains("(1000000 characters in all)"), "{stdout}");
    let out = dir.join("pq");
    let exported = decode_lab(&["export", "--parquet", runs, "-o", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&exported.stderr);
    assert_eq!(exported.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.len() < 1_500 && stderr.contains("(1000000 characters in all)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flags that take a value, of every subcommand `decode-lab --help` lists, as its help
/// names them.
fn value_flags(command: &[&str]) -> Vec<String> {
    let help = common::ok(&[command, &["--help"]].concat());
    help.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix("-o, ").unwrap_or(line);
            let (flag, rest) = line.split_once(' ')?;
            (flag.starts_with("--") && rest.starts_with('<')).then(|| flag.to_string())
        })
        .collect()
}

/// Every flag that takes a value, given 100,000 characters where a value belongs: whatever
/// the command says of it is a few hundred bytes (clap's own errors included).
#[test]
fn every_value_flag_of_every_subcommand_is_quoted_as_an_excerpt() {
    let long = "z".repeat(100_000);
    let mut tried = 0;
    for command in [
        &["choose"][..],
        &["pipeline"],
        &["generate", "--prompt", "hi"],
        &["replay"],
        &["compare", "--prompt", "hi"],
        &["paths", "--prompt", "hi"],
        &["eval"],
        &["capacity"],
        &["speculate"],
        &["lengths"],
        &["observe"],
        &["traffic"],
        &["export"],
        &["ngram", "train"],
        &["langid", "train"],
    ] {
        let help_of = if command.len() == 3 {
            &command[..1]
        } else {
            command
        };
        for flag in value_flags(help_of) {
            let args = [command, &[flag.as_str(), long.as_str()]].concat();
            let out = decode_lab(&args);
            let said = out.stderr.len() + out.stdout.len();
            assert!(said < 1_500, "{command:?} {flag}: {said} bytes");
            tried += 1;
        }
    }
    assert!(tried > 200, "only {tried} flags");
}
