//! The bad-input table: every `.cases` file in `tests/bad_input/` is a list of inputs a user
//! could give `decode-lab`, each with the exit code and a phrase its message must contain.
//! No case may panic, hang, or print a plausible answer where an error is due.
//!
//! One case a line, `#` starts a comment:
//!
//! ```text
//! EXIT | ARGS | PHRASE | SETUP
//! 2 | pipeline --logits 1e308,1 --bias 0:1e308 | overflow
//! 2 | generate --model {model} --prompt hi | context_len | set config.json /context_len 1000000000000
//! ```
//!
//! ARGS splits on whitespace; 'single quotes' group. `{model}` is a per-case copy of the
//! released model (its files linked until a step changes one), `{tmp}` a per-case empty
//! folder, `{files}` the checked-in fixtures in `tests/bad_input/files/`, `{corpus}` the
//! repository's corpus. PHRASE (`\n` is a newline) must appear in standard error (in
//! standard output too when EXIT is 0 or 1). SETUP is `;`-separated steps:
//! - `set FILE /json/pointer JSON`: edits a JSON file of `{model}`;
//! - `truncate FILE BYTES`: cuts a file of `{model}` short;
//! - `delete FILE`: removes a file of `{model}`;
//! - `write PATH TEXT`: writes TEXT (`\n` is a newline) to `{tmp}/PATH`;
//! - `stdin TEXT`: standard input (`\n` is a newline).
//!
//! Every file of `{model}` that a step changes, other than `config.json`, gets its new
//! SHA-256 in `config.json`, so that the damage reaches the parser and not only the hash
//! check.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIME_LIMIT: Duration = Duration::from_secs(120);
/// The issue that asked for this table asked for at least this many cases.
const AT_LEAST: usize = 150;

struct Case {
    file: String,
    line: usize,
    exit: i32,
    args: String,
    phrase: String,
    setup: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_input");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cases"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (i, line) in fs::read_to_string(&path).unwrap().lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.splitn(4, " | ").map(str::trim).collect();
            assert!(
                fields.len() >= 3,
                "{name}:{}: expected `EXIT | ARGS | PHRASE [| SETUP]`",
                i + 1
            );
            cases.push(Case {
                file: name.clone(),
                line: i + 1,
                exit: fields[0]
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}:{}: exit code {:?}", i + 1, fields[0])),
                args: fields[1].to_string(),
                phrase: unescape(fields[2]),
                setup: fields.get(3).copied().unwrap_or_default().to_string(),
            });
        }
    }
    cases
}

/// Whitespace-separated words; 'single quotes' group and may be empty.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in text.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

fn unescape(text: &str) -> String {
    text.replace("\\n", "\n").replace("\\t", "\t")
}

/// A per-case copy of the released model: files linked, replaced by real files when a
/// setup step changes them.
struct ModelCopy {
    dir: PathBuf,
    changed: Vec<String>,
}

impl ModelCopy {
    fn new(dir: PathBuf) -> ModelCopy {
        let release = root().join("models/decode-lab-tiny-v1");
        fs::create_dir_all(&dir).unwrap();
        for entry in fs::read_dir(&release).unwrap() {
            let from = entry.unwrap().path();
            std::os::unix::fs::symlink(&from, dir.join(from.file_name().unwrap())).unwrap();
        }
        ModelCopy {
            dir,
            changed: Vec::new(),
        }
    }

    fn replace(&mut self, file: &str, bytes: &[u8]) {
        let path = self.dir.join(file);
        let _ = fs::remove_file(&path);
        fs::write(&path, bytes).unwrap();
        if file != "config.json" {
            self.changed.push(file.to_string());
        }
    }

    fn read(&self, file: &str) -> Vec<u8> {
        fs::read(self.dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// Writes the changed files' SHA-256 into config.json (when it still parses).
    fn rehash(&mut self) {
        if self.changed.is_empty() {
            return;
        }
        let Ok(mut config) = serde_json::from_slice::<serde_json::Value>(&self.read("config.json"))
        else {
            return;
        };
        for file in std::mem::take(&mut self.changed) {
            let Ok(bytes) = fs::read(self.dir.join(&file)) else {
                continue;
            };
            if let Some(files) = config["files"].as_array_mut() {
                for entry in files.iter_mut().filter(|f| f["path"] == file.as_str()) {
                    entry["sha256"] = model::sha256_hex(&bytes).into();
                }
            }
        }
        let text = serde_json::to_vec_pretty(&config).unwrap();
        self.replace("config.json", &text);
    }
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

fn run_case(case: &Case, scratch: &Path) -> Outcome {
    let tmp = scratch.join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    let mut model = (case.args.contains("{model}") || !case.setup.is_empty())
        .then(|| ModelCopy::new(scratch.join("model")));
    let mut stdin = String::new();
    for step in case
        .setup
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (op, rest) = step.split_once(' ').unwrap_or((step, ""));
        let model = model.as_mut().unwrap();
        match op {
            "set" => {
                let mut parts = rest.splitn(3, ' ');
                let (file, pointer, value) = (
                    parts.next().unwrap(),
                    parts.next().unwrap(),
                    parts.next().unwrap(),
                );
                let mut json: serde_json::Value =
                    serde_json::from_slice(&model.read(file)).unwrap();
                let value: serde_json::Value =
                    serde_json::from_str(value).unwrap_or_else(|e| panic!("setup {step:?}: {e}"));
                match pointer.rsplit_once('/') {
                    // A new key, or a new value of an existing one.
                    Some((parent, key)) if json.pointer(pointer).is_none() => {
                        json.pointer_mut(parent)
                            .unwrap_or_else(|| panic!("setup {step:?}: no {parent}"))
                            .as_object_mut()
                            .unwrap()
                            .insert(key.to_string(), value);
                    }
                    _ => *json.pointer_mut(pointer).unwrap() = value,
                }
                model.replace(file, &serde_json::to_vec_pretty(&json).unwrap());
            }
            "truncate" => {
                let (file, bytes) = rest.split_once(' ').unwrap();
                let mut data = model.read(file);
                data.truncate(bytes.parse().unwrap());
                model.replace(file, &data);
            }
            "delete" => fs::remove_file(model.dir.join(rest)).unwrap(),
            "write" => {
                let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
                let path = tmp.join(path);
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, unescape(text)).unwrap();
            }
            "stdin" => stdin = unescape(rest),
            _ => panic!("{}:{}: unknown setup step {op:?}", case.file, case.line),
        }
    }
    if let Some(model) = model.as_mut() {
        model.rehash();
    }
    let files = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_input/files");
    let args: Vec<String> = words(&case.args)
        .into_iter()
        .map(|w| {
            w.replace("{tmp}", &tmp.to_string_lossy())
                .replace("{files}", &files.to_string_lossy())
                .replace("{corpus}", &root().join("corpus").to_string_lossy())
                .replace("{model}", &scratch.join("model").to_string_lossy())
        })
        .collect();
    let stdout_path = scratch.join("stdout");
    let stderr_path = scratch.join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_decode-lab"))
        .args(&args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(fs::File::create(&stdout_path).unwrap())
        .stderr(fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    // A command that never reads its input closes the pipe; that is not this test's concern.
    let _ = pipe.write_all(stdin.as_bytes());
    drop(pipe);
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIME_LIMIT {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: status.code(),
        stdout: fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr: fs::read_to_string(&stderr_path).unwrap_or_default(),
        timed_out,
    }
}

/// What is wrong with an outcome, if anything.
fn judge(case: &Case, outcome: &Outcome) -> Option<String> {
    if outcome.timed_out {
        return Some(format!("ran past {TIME_LIMIT:?}"));
    }
    if outcome.stderr.contains("panicked") || outcome.stderr.contains("memory allocation") {
        return Some("panicked or aborted".into());
    }
    if outcome.code != Some(case.exit) {
        return Some(format!(
            "exit code {:?}, expected {}",
            outcome.code, case.exit
        ));
    }
    let searched = if case.exit == 2 {
        outcome.stderr.clone()
    } else {
        format!("{}{}", outcome.stdout, outcome.stderr)
    };
    if !searched.contains(&case.phrase) {
        return Some(format!("the message lacks {:?}", case.phrase));
    }
    if case.exit == 2 && !outcome.stderr.contains("error:") {
        return Some("exit code 2 without an `error:` line".into());
    }
    // A refusal prints no answer beside it.
    if case.exit == 2 && !outcome.stdout.trim().is_empty() {
        return Some("printed output beside the error".into());
    }
    None
}

#[test]
fn every_bad_input_gets_its_error() {
    let cases = cases();
    let scratch_root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad_input");
    let _ = fs::remove_dir_all(&scratch_root);
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let scratch = scratch_root.join(i.to_string());
        let outcome = run_case(case, &scratch);
        if let Some(problem) = judge(case, &outcome) {
            failures.push(format!(
                "{}:{}: `decode-lab {}`: {problem}\n  stdout: {}\n  stderr: {}",
                case.file,
                case.line,
                case.args,
                outcome.stdout.chars().take(400).collect::<String>(),
                outcome.stderr.trim_end()
            ));
        } else {
            let _ = fs::remove_dir_all(&scratch);
        }
    }
    eprintln!(
        "bad input: {} cases, {} failed",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        cases.len() >= AT_LEAST,
        "the table holds {} cases; keep at least {AT_LEAST}",
        cases.len()
    );
}

#[test]
fn words_split_as_documented() {
    assert_eq!(
        words("generate --prompt 'a b' --stop '' x"),
        ["generate", "--prompt", "a b", "--stop", "", "x"]
    );
}
