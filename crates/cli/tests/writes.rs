//! The write rule (`src/files.rs`) for every subcommand that writes a file: an output that is
//! an input, by its own path, through `..`, a symbolic link or a hard link, or a directory
//! that holds one, is refused naming both, and every input's bytes are as they were; a
//! failed export leaves the old tables whole. The list of writers is checked against the
//! command line's own definition, and the source against any write outside the rule, so a
//! new subcommand cannot skip it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;

use common::{decode_lab, model_dir, ok, workspace};

/// Subcommands that write files, and the flags that name what they write.
const WRITERS: [(&str, &[&str]); 6] = [
    ("capacity", &["--save-known-good"]),
    ("eval", &["--lab-table"]),
    ("export", &["--out", "--otlp"]),
    ("langid train", &["--out"]),
    ("ngram train", &["--out"]),
    ("traffic", &["--out", "--outcomes"]),
];

/// Subcommands that write nothing but standard output and standard error.
const READERS: [&str; 10] = [
    "choose",
    "pipeline",
    "generate",
    "replay",
    "compare",
    "paths",
    "speculate",
    "lengths",
    "observe",
    "policy",
];

/// A fresh folder with copies of the model's files and the corpus, the inputs the cases
/// alias.
fn sandbox(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("decode-lab-writes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (from, to, files) in [
        (
            model_dir(),
            "model",
            &[
                "config.json",
                "tokenizer.json",
                "model.f32.safetensors",
                "model.int8.safetensors",
                "langid.bin",
                "draft.ngram",
                "speculate.json",
                "lengths.json",
            ][..],
        ),
        (
            workspace().join("corpus"),
            "corpus",
            &[
                "train.en.txt",
                "train.eu.txt",
                "valid.en.txt",
                "valid.eu.txt",
            ][..],
        ),
    ] {
        std::fs::create_dir_all(dir.join(to)).unwrap();
        for file in files {
            std::fs::copy(from.join(file), dir.join(to).join(file)).unwrap();
        }
    }
    dir
}

/// Every file under `dir` and its bytes' hash.
fn contents(dir: &Path) -> BTreeMap<PathBuf, u64> {
    use std::hash::{Hash, Hasher};
    let mut all = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::fs::read(&path).unwrap().hash(&mut hasher);
                all.insert(path, hasher.finish());
            }
        }
    }
    all
}

/// `decode-lab args` must fail with exit code 2, naming `phrase`, and leave every file under
/// `dir` as it was.
fn refused(dir: &Path, args: &[String], phrase: &str) {
    let before = contents(dir);
    let out = decode_lab(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(phrase), "{args:?}: {stderr}");
    assert_eq!(contents(dir), before, "{args:?} changed a file");
}

/// `path` and the other ways to name it: through `..`, a symbolic link to its directory and
/// a hard link.
fn aliases(path: &Path) -> Vec<PathBuf> {
    let parent = path.parent().unwrap();
    let name = path.file_name().unwrap();
    let folder = parent.file_name().unwrap();
    let link = parent.with_file_name(format!("{}-link", folder.to_string_lossy()));
    if !link.exists() {
        std::os::unix::fs::symlink(parent, &link).unwrap();
    }
    let hard = parent.join(format!("hard-{}", name.to_string_lossy()));
    if !hard.exists() {
        std::fs::hard_link(path, &hard).unwrap();
    }
    vec![
        path.to_path_buf(),
        parent.join("..").join(folder).join(".").join(name),
        link.join(name),
        hard,
    ]
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn with(mut args: Vec<String>, flag: &str, path: &Path) -> Vec<String> {
    args.push(flag.to_string());
    args.push(path.to_str().unwrap().to_string());
    args
}

const OVER: &str = "a command never writes over what it reads";

#[test]
fn no_writer_writes_over_the_corpus_or_the_model() {
    let dir = sandbox("inputs");
    let (model, corpus) = (dir.join("model"), dir.join("corpus"));
    let (m, c) = (model.to_str().unwrap(), corpus.to_str().unwrap());
    let traffic = strings(&[
        "traffic",
        "--version",
        "a=",
        "--version",
        "b=",
        "--runs",
        "2",
        "--model",
        m,
        "--corpus",
        c,
    ]);
    let fresh = dir.join("fresh.jsonl");
    let writers: Vec<(Vec<String>, &str)> = vec![
        (traffic.clone(), "--out"),
        (with(traffic.clone(), "--out", &fresh), "--outcomes"),
        (strings(&["langid", "train", "--corpus", c]), "--out"),
        (
            strings(&["ngram", "train", "--model", m, "--corpus", c]),
            "--out",
        ),
        (
            strings(&["eval", "--alternatives", "--model", m, "--corpus", c]),
            "--lab-table",
        ),
    ];
    for (args, flag) in &writers {
        let mut targets = aliases(&corpus.join("valid.en.txt"));
        targets.extend(aliases(&corpus.join("train.en.txt")));
        if args[0] != "langid" {
            targets.push(model.join("tokenizer.json"));
            targets.push(model.join("model.f32.safetensors"));
            targets.push(model.join("config.json"));
        }
        for target in targets {
            let mut args = with(args.clone(), flag, &target);
            if args[0] == "traffic" && *flag == "--out" {
                args = with(args, "--outcomes", &dir.join("outcomes.jsonl"));
            }
            refused(&dir, &args, OVER);
        }
        // A directory that holds an input is not written either.
        let mut args = with(args.clone(), flag, &corpus);
        if args[0] == "traffic" && *flag == "--out" {
            args = with(args, "--outcomes", &dir.join("outcomes.jsonl"));
        }
        refused(&dir, &args, "");
    }
    // Both of traffic's outputs on one new file.
    let both = with(
        with(traffic, "--out", &fresh),
        "--outcomes",
        &dir.join("./fresh.jsonl"),
    );
    refused(&dir, &both, "are one file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_known_good_plan_is_never_saved_over_a_file_the_plan_reads() {
    let dir = sandbox("capacity");
    let model = dir.join("model");
    let trace = dir.join("trace.csv");
    std::fs::write(
        &trace,
        "arrival_s,prompt_tokens,output_tokens,slice\n0,10,5,en\n1,10,5,eu\n",
    )
    .unwrap();
    let base = strings(&["capacity", "--batch-limits", "4"]);
    for (flag, file) in [
        ("--speculation", model.join("speculate.json")),
        ("--lengths", model.join("lengths.json")),
        ("--rollout-trace", trace.clone()),
        ("--trace", trace.clone()),
    ] {
        for target in aliases(&file) {
            let args = with(
                with(base.clone(), flag, &file),
                "--save-known-good",
                &target,
            );
            refused(&dir, &args, OVER);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn generate(seed: &str) -> String {
    ok(&[
        "generate",
        "--prompt",
        "Insert a table ",
        "--max-tokens",
        "3",
        "--seed",
        seed,
        "--json",
    ])
    .trim()
    .to_string()
}

#[test]
fn an_export_never_replaces_what_it_reads_and_a_failed_one_leaves_the_old_tables() {
    let dir = sandbox("export");
    let runs = dir.join("runs.jsonl");
    let record = generate("1");
    std::fs::write(&runs, format!("{record}\n")).unwrap();
    let run_id = serde_json::from_str::<serde_json::Value>(&record).unwrap()["run_id"].clone();
    let outcomes = dir.join("outcomes.jsonl");
    std::fs::write(
        &outcomes,
        format!("{{\"run_id\":{run_id},\"outcome\":\"accepted\",\"at_s\":5}}\n"),
    )
    .unwrap();
    let pq = dir.join("pq");
    let export = |out: &Path, extra: &[&Path]| {
        let mut args = strings(&["export", "--parquet"]);
        args.extend(extra.iter().map(|p| p.to_str().unwrap().to_string()));
        with(args, "--out", out)
    };
    let first = export(&pq, &[&runs]);
    let first = with(first, "--outcomes", &outcomes);
    ok(&first.iter().map(String::as_str).collect::<Vec<_>>());
    let tables = pq.join("runs.parquet");
    // The export's own tables as its input, by every alias of the directory and the file.
    for target in [pq.clone(), pq.join("..").join("pq"), dir.join("pq-link")] {
        if !dir.join("pq-link").exists() {
            std::os::unix::fs::symlink(&pq, dir.join("pq-link")).unwrap();
        }
        refused(&dir, &export(&target, &[&tables]), OVER);
        refused(&dir, &export(&target, &[&pq]), OVER);
        refused(
            &dir,
            &with(
                export(&target, &[&runs]),
                "--outcomes",
                &pq.join("outcomes.parquet"),
            ),
            OVER,
        );
    }
    // A hard link of an input inside the directory would be replaced too.
    std::fs::hard_link(&runs, pq.join("outcomes.parquet.bak")).unwrap();
    std::fs::remove_file(pq.join("outcomes.parquet")).unwrap();
    std::fs::hard_link(&runs, pq.join("outcomes.parquet")).unwrap();
    refused(&dir, &export(&pq, &[&runs]), OVER);
    std::fs::remove_file(pq.join("outcomes.parquet")).unwrap();
    std::fs::rename(pq.join("outcomes.parquet.bak"), pq.join("outcomes.parquet")).unwrap();
    // The runs' own directory.
    refused(&dir, &export(&dir, &[&runs]), OVER);
    // A bad outcome row fails the export, and the old tables stay whole.
    let new = dir.join("new.jsonl");
    std::fs::write(&new, format!("{}\n", generate("2"))).unwrap();
    let bad = dir.join("bad-outcomes.jsonl");
    std::fs::write(&bad, "{\"run_id\": 5}\n").unwrap();
    let before = contents(&pq);
    let out = decode_lab(
        &with(export(&pq, &[&new]), "--outcomes", &bad)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        contents(&pq),
        before,
        "a failed export changed the old tables"
    );
    let names: Vec<_> = std::fs::read_dir(&pq)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        3,
        "a failed export left a file behind: {names:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_otlp_export_never_replaces_what_it_reads() {
    let dir = sandbox("otlp");
    // Runs kept under the name of the file the export writes.
    let runs = dir.join("traces.json");
    std::fs::write(&runs, format!("{}\n", generate("1"))).unwrap();
    let export = |out: &Path| with(strings(&["export", runs.to_str().unwrap()]), "--otlp", out);
    for target in [dir.clone(), dir.join("..").join(dir.file_name().unwrap())] {
        refused(&dir, &export(&target), OVER);
    }
    for alias in aliases(&runs) {
        let args = with(
            strings(&["export", alias.to_str().unwrap()]),
            "--otlp",
            &dir,
        );
        refused(&dir, &args, OVER);
    }
    // Written beside them, it is whole.
    let out = dir.join("traces");
    ok(&export(&out).iter().map(String::as_str).collect::<Vec<_>>());
    let written = std::fs::read_to_string(out.join("traces.json")).unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&written).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The subcommands `decode-lab PREFIX --help` lists, but `help`; none when it lists none.
fn subcommands(prefix: &[&str]) -> Vec<String> {
    let help = ok(&[prefix, &["--help"]].concat());
    let Some(commands) = help.split("Commands:\n").nth(1) else {
        return Vec::new();
    };
    commands
        .lines()
        .take_while(|l| !l.trim().is_empty())
        // A command's line is indented two spaces; its description's wrapped lines more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_subcommand_is_a_known_writer_or_writes_nothing() {
    let mut listed = Vec::new();
    for command in subcommands(&[]) {
        let nested = subcommands(&[command.as_str()]);
        if nested.is_empty() {
            listed.push(command);
        } else {
            listed.extend(nested.into_iter().map(|n| format!("{command} {n}")));
        }
    }
    for command in &listed {
        let writes = WRITERS.iter().find(|(name, _)| name == command);
        assert!(
            writes.is_some() || READERS.contains(&command.as_str()),
            "`decode-lab {command}` is new: list it in WRITERS with the flags it writes (and \
             add its aliases to these tests), or in READERS"
        );
        if let Some((_, flags)) = writes {
            let words: Vec<&str> = command.split(' ').collect();
            let help = ok(&[&words[..], &["--help"]].concat());
            for flag in *flags {
                assert!(help.contains(flag), "{command} has no {flag}");
            }
        }
    }
    assert_eq!(listed.len(), WRITERS.len() + READERS.len(), "{listed:?}");
}

/// Nothing in the command line writes a file but through `src/files.rs`.
#[test]
fn no_source_file_writes_outside_the_rule() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src.clone()];
    let forbidden = [
        "fs::write(",
        "File::create",
        "fs::rename(",
        "OpenOptions",
        "remove_file(",
        "remove_dir",
        "create_dir",
    ];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.file_name().is_some_and(|n| n == "files.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for word in forbidden {
                assert!(
                    !text.contains(word),
                    "{} calls {word}: write through files::write or files::StagedDir",
                    path.display()
                );
            }
            for (i, line) in text.lines().enumerate() {
                if line.contains("Export::create(") {
                    assert!(
                        line.contains("stage.path()"),
                        "{}:{}: an export is written in its StagedDir",
                        path.display(),
                        i + 1
                    );
                }
            }
        }
    }
}
