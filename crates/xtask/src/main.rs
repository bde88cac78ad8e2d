//! `cargo xtask serve` builds and serves the lab; `cargo xtask test` runs every test.
//!
//! Both first install what is missing on a fresh machine (the wasm target, Trunk, the
//! wasm-bindgen CLI that matches Cargo.lock, Chromium, Mesa's lavapipe Vulkan driver, the
//! npm packages of `e2e/`, the Python environment of the peers' checks) and skip what is
//! already there, so a repeated run costs seconds.

#![forbid(unsafe_code)]

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{exit, Command, Stdio};
use std::time::{Duration, Instant};

const TRUNK_VERSION: &str = "0.21.14";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// Debian packages: headless Chromium for the browser tests and the lavapipe CPU Vulkan
/// driver for native wgpu tests.
const APT_PACKAGES: [&str; 3] = ["chromium", "mesa-vulkan-drivers", "libvulkan1"];
const CHROMIUM: &str = "/usr/bin/chromium";
/// Python packages, pinned, in a virtual environment under the target folder, for the
/// checks of `crates/peer-check`: DuckDB's prebuilt wheel reads the Parquet export, and
/// the OpenTelemetry protobuf definitions (with the protobuf runtime they need) read the
/// OTLP spans.
const PYTHON_PACKAGES: [&str; 3] = [
    "duckdb==1.5.6",
    "opentelemetry-proto==1.45.2",
    "protobuf==7.36.2",
];
/// Crates the pure policy crate (and the capacity planner, the n-gram draft, the language
/// identifier and the observation) must never depend on.
const POLICY_MUST_NOT_USE: [&str; 6] = [
    "web-sys",
    "js-sys",
    "wasm-bindgen",
    "wgpu",
    "leptos",
    "getrandom",
];

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let root = workspace_root();
    env::set_current_dir(&root)
        .unwrap_or_else(|e| fail(&format!("cannot enter {}: {e}", root.display())));
    let result = match args.first().map(String::as_str) {
        Some("serve") => serve(&root, &args[1..]),
        Some("test") => test(&root),
        Some("install") => install(&root),
        _ => Err(
            "usage: cargo xtask serve [--port N] | cargo xtask test | cargo xtask install".into(),
        ),
    };
    if let Err(message) = result {
        fail(&message);
    }
}

fn fail(message: &str) -> ! {
    eprintln!("xtask: {message}");
    exit(1)
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or(manifest)
}

/// Runs a command with inherited output; an error names the command.
fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    println!("xtask: $ {shown}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

/// Runs a command and returns its standard output, or `None` if it cannot run or fails.
fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cargo() -> Command {
    Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// PATH with `e2e/node_modules/.bin` first: Trunk finds binaryen's wasm-opt there.
fn tool_path(root: &Path) -> OsString {
    let mut paths = vec![root.join("e2e/node_modules/.bin")];
    if let Some(home) = env::var_os("HOME") {
        paths.push(PathBuf::from(home).join(".cargo/bin"));
    }
    paths.extend(env::split_paths(&env::var_os("PATH").unwrap_or_default()));
    env::join_paths(paths).unwrap_or_default()
}

/// The version of a package in Cargo.lock.
fn locked_version(root: &Path, package: &str) -> Result<String, String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock"))
        .map_err(|e| format!("cannot read Cargo.lock: {e}"))?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock
        .find(&needle)
        .ok_or_else(|| format!("{package} is not in Cargo.lock"))?
        + needle.len();
    Ok(lock[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_string())
}

fn install(root: &Path) -> Result<(), String> {
    let path = tool_path(root);
    let has = |program: &str, args: &[&str], expected: &str| {
        output(Command::new(program).args(args).env("PATH", &path))
            .is_some_and(|out| out.contains(expected))
    };

    if has("rustup", &["target", "list", "--installed"], WASM_TARGET) {
        println!("xtask: {WASM_TARGET} target present");
    } else {
        run(Command::new("rustup").args(["target", "add", WASM_TARGET]))?;
    }

    if has("trunk", &["--version"], &format!("trunk {TRUNK_VERSION}")) {
        println!("xtask: trunk {TRUNK_VERSION} present");
    } else {
        // Trunk 0.22 needs a newer rustc than this machine's; 0.21.14 builds with rustls.
        run(cargo()
            .args(["install", "trunk", "--version", TRUNK_VERSION, "--locked"])
            .args(["--no-default-features", "--features", "rustls"]))?;
    }

    let bindgen = locked_version(root, "wasm-bindgen")?;
    if has(
        "wasm-bindgen",
        &["--version"],
        &format!("wasm-bindgen {bindgen}"),
    ) {
        println!("xtask: wasm-bindgen {bindgen} present");
    } else {
        // Not `--locked`: the CLI's own lock file pins a crate the registry mirror lacks.
        run(cargo().args([
            "install",
            "wasm-bindgen-cli",
            "--version",
            &bindgen,
            "--force",
        ]))?;
    }

    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            !output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_some_and(|s| s.contains("ok installed"))
        })
        .collect();
    if missing.is_empty() {
        println!("xtask: {} present", APT_PACKAGES.join(", "));
    } else {
        run(Command::new("apt-get")
            .args(["update", "-qq"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }

    let python = python(root);
    if !python.exists() {
        run(Command::new("python3")
            .args(["-m", "venv"])
            .arg(python.ancestors().nth(2).unwrap_or(root)))?;
    }
    let frozen = output(Command::new(&python).args(["-m", "pip", "freeze"])).unwrap_or_default();
    let wanted: Vec<&str> = PYTHON_PACKAGES
        .iter()
        .copied()
        .filter(|p| !frozen.lines().any(|l| l == *p))
        .collect();
    if wanted.is_empty() {
        println!("xtask: {} present", PYTHON_PACKAGES.join(", "));
    } else {
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(&wanted))?;
    }

    let e2e = root.join("e2e");
    let installed = [
        "node_modules/.package-lock.json",
        "node_modules/.bin/wasm-opt",
        "node_modules/playwright-core/package.json",
        "node_modules/axe-core/package.json",
    ]
    .iter()
    .all(|f| e2e.join(f).exists());
    if installed {
        println!("xtask: e2e npm packages present");
    } else {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&e2e))?;
    }
    Ok(())
}

/// The Python of the virtual environment that `install` makes.
fn python(root: &Path) -> PathBuf {
    target_dir(root).join("python/bin/python")
}

fn serve(root: &Path, args: &[String]) -> Result<(), String> {
    let port = match args {
        [] => "8080".to_string(),
        [flag, port] if flag == "--port" => port.clone(),
        _ => return Err("usage: cargo xtask serve [--port N]".into()),
    };
    install(root)?;
    println!("xtask: building the lab; it will be served at http://127.0.0.1:{port}/");
    run(Command::new("trunk")
        .args([
            "serve",
            "--release",
            "--offline",
            "--address",
            "127.0.0.1",
            "--port",
            &port,
        ])
        .env("PATH", tool_path(root)))
}

/// Fails when `krate`'s normal or build dependencies include any of `banned`.
fn check_boundary(krate: &str, banned: &[&str]) -> Result<(), String> {
    check_tree(krate, &["-e", "normal,build"], banned)
}

/// Fails when `cargo tree -p krate` with `args` lists any of `banned`.
fn check_tree(krate: &str, args: &[&str], banned: &[&str]) -> Result<(), String> {
    let tree = output(
        cargo()
            .args(["tree", "-p", krate])
            .args(args)
            .args(["--prefix", "none", "--format", "{p}"]),
    )
    .ok_or(format!("cargo tree -p {krate} failed"))?;
    for name in banned {
        if tree
            .lines()
            .any(|l| l.split_whitespace().next() == Some(name))
        {
            return Err(format!(
                "the {krate} crate must not depend on {name}, but cargo tree lists it"
            ));
        }
    }
    println!("xtask: {krate} depends on none of {}", banned.join(", "));
    Ok(())
}

/// `cargo clippy` over every target of what `args` selects, warnings denied.
fn clippy(args: &[&str]) -> Result<(), String> {
    let mut all = args.to_vec();
    all.push("--all-targets");
    lint(&all)
}

/// `cargo clippy` over what `args` selects, warnings denied.
fn lint(args: &[&str]) -> Result<(), String> {
    run(cargo()
        .arg("clippy")
        .args(args)
        .args(["--", "-D", "warnings"]))
}

/// Symbols (as segments of their mangled names) of the capacity plan: the simulator (its
/// entry point, which `simulate` and `simulate_fleet` call and may be inlined into), the
/// report, and the capacity form's check (30.7 kB of the page's wasm before it moved, with
/// the presets and bounds it reads). Only the planner worker links them.
const PLANNING: [&str; 3] = [
    "8capacity3sim20simulate_speculative",
    "8capacity11plan_report",
    "CapacityForm$u20$as$u20$lab..widgets..form..Form$GT$5check",
];

/// Symbols of the decoding step (the step with its snapshots, and the conformance view that
/// runs it under every engine), which only the model worker links since the panel's step
/// moved there.
const STEPPING: [&str; 2] = ["6policy8pipeline4step", "6policy6engine11conformance"];

/// The Compare panel's report, which the model worker builds (`policy::compare_report`).
const COMPARING: [&str; 1] = ["6policy14compare_report9tree_part"];

/// The reader of policies in other engines' forms, which the importer runs for Generate's
/// "Import a policy" (`policy::formats::import`).
const IMPORTING: [&str; 1] = ["6policy7formats6import"];

/// What only a worker links: its Trunk profile and binary, the symbols, and what must run
/// there.
const WORKER_ONLY: [(&str, &str, &[&str], &str); 4] = [
    (
        "wasm-planner",
        "planner",
        &PLANNING,
        "the capacity plan and the form's check must run in the planner worker",
    ),
    (
        "wasm-worker",
        "worker",
        &STEPPING,
        "the decoding step and its conformance view must run in the model worker",
    ),
    (
        "wasm-worker",
        "worker",
        &COMPARING,
        "the Compare panel's report must be built in the model worker",
    ),
    (
        "wasm-planner",
        "importer",
        &IMPORTING,
        "a policy in another engine's form must be read in the importer",
    ),
];

/// The page only renders: in Trunk's release build, the page's wasm (before wasm-opt, with
/// its name section) names no function of the capacity simulator or report, nor the
/// capacity form's check, which the planner worker runs for it, nor the decoding step or the
/// reader of other engines' policies, which the model worker and the importer run. Each worker's wasm must name its symbols, or the scan
/// could not see them in the page's either.
fn check_page_does_not_plan(target: &Path) -> Result<(), String> {
    let read = |profile: &str, bin: &str| {
        let path = target
            .join(WASM_TARGET)
            .join(profile)
            .join(format!("{bin}.wasm"));
        std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let page = read("wasm-release", "lab")?;
    for (profile, bin, symbols, why) in WORKER_ONLY {
        let worker = read(profile, bin)?;
        for symbol in symbols {
            if !names(&worker, symbol) {
                return Err(format!(
                    "the {bin}'s wasm names no {symbol}: without names, the page's cannot be checked"
                ));
            }
            if names(&page, symbol) {
                return Err(format!("the page's wasm links {symbol}: {why}"));
            }
        }
    }
    Ok(())
}

/// Whether `wasm` holds `symbol`'s bytes (a name of its name section).
fn names(wasm: &[u8], symbol: &str) -> bool {
    wasm.windows(symbol.len()).any(|w| w == symbol.as_bytes())
}

/// The wall-clock time of each step of `cargo xtask test`, printed as each ends and as a
/// table at the end: where CI's minutes go.
#[derive(Default)]
struct Clock(Vec<(&'static str, Duration)>);

impl Clock {
    fn step(
        &mut self,
        name: &'static str,
        f: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        let result = f();
        let took = start.elapsed();
        println!("xtask: step `{name}` took {:.0} s", took.as_secs_f64());
        self.0.push((name, took));
        result
    }

    fn table(&self) -> String {
        let total: Duration = self.0.iter().map(|(_, t)| *t).sum();
        let mut out = String::from("| step | seconds |\n|---|---:|\n");
        for (name, took) in &self.0 {
            out += &format!("| {name} | {:.0} |\n", took.as_secs_f64());
        }
        out + &format!("| all | {:.0} |\n", total.as_secs_f64())
    }
}

fn target_dir(root: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// The lab's features that the native lint and tests build together (they do not conflict;
/// the page alone is linted for the browser, where it is built).
const ALL_LAB_FEATURES: &str = "lab/worker,lab/planner,lab/observer,lab/importer";

fn test(root: &Path) -> Result<(), String> {
    let mut clock = Clock::default();
    let result = test_steps(root, &mut clock);
    println!("xtask: time by step\n{}", clock.table());
    result
}

fn test_steps(root: &Path, clock: &mut Clock) -> Result<(), String> {
    clock.step("install", || install(root))?;
    let path = tool_path(root);
    let target = target_dir(root);

    clock.step("fmt", || run(cargo().args(["fmt", "--all", "--check"])))?;
    // Natively, one lint of every crate but the candle peer's benchmarks, with every lab
    // feature: the lab's page, model worker, planner and observer code, the trainer (candle)
    // and the peers' checks, which are outside the default members.
    clock.step("clippy", || {
        clippy(&[
            "--workspace",
            "--exclude",
            "policy-bench",
            "--features",
            ALL_LAB_FEATURES,
        ])
    })?;

    // Architecture invariants: the policy core, the model, the capacity planner, the n-gram
    // draft, the language identifier, the observation and the report are pure; the GPU
    // runtime knows nothing of the UI.
    clock.step("boundaries", || {
        for (krate, banned) in [
            ("policy", &POLICY_MUST_NOT_USE[..]),
            ("capacity", &POLICY_MUST_NOT_USE[..]),
            ("ngram", &POLICY_MUST_NOT_USE[..]),
            ("langid", &POLICY_MUST_NOT_USE[..]),
            ("artifact-file", &POLICY_MUST_NOT_USE[..]),
            ("observe", &POLICY_MUST_NOT_USE[..]),
            ("report", &POLICY_MUST_NOT_USE[..]),
            // (safetensors brings getrandom in through tempfile; the model never draws from it.)
            (
                "model",
                &["web-sys", "js-sys", "wasm-bindgen", "wgpu", "leptos"][..],
            ),
            ("gpu", &["leptos"][..]),
        ] {
            check_boundary(krate, banned)?;
        }
        // The page's wasm (the lab without its `worker` feature) links no model, tokenizer or
        // GPU runtime, and no record reader or language identifier (the `observer` feature);
        // its build script may read the model's config natively, so only normal dependencies
        // count. No wasm of the lab links the Parquet writer, which is native only.
        check_tree(
            "lab",
            &["-e", "normal", "--target", WASM_TARGET],
            &["model", "tokenizer", "gpu", "wgpu", "observe", "langid"],
        )?;
        check_tree(
            "lab",
            &[
                "-e",
                "normal",
                "--features",
                "worker,planner,observer",
                "--target",
                WASM_TARGET,
            ],
            &["runs-parquet", "parquet"],
        )
    })?;
    // For the browser: the page alone (without features, as Trunk builds it), then the lab
    // with the workers' binaries, with every pure crate's library (those the workers build
    // on, and `ngram` and `artifact-file`, which no lab wasm links) and the GPU runtime's
    // browser-only code.
    clock.step("clippy wasm", || {
        lint(&["-p", "lab", "--bin", "lab", "--target", WASM_TARGET])?;
        lint(&[
            "-p",
            "lab",
            "--lib",
            "--bins",
            "--features",
            ALL_LAB_FEATURES,
            "-p",
            "policy",
            "-p",
            "model",
            "-p",
            "tokenizer",
            "-p",
            "gpu",
            "-p",
            "capacity",
            "-p",
            "ngram",
            "-p",
            "langid",
            "-p",
            "observe",
            "-p",
            "report",
            "-p",
            "artifact-file",
            "--target",
            WASM_TARGET,
        ])
    })?;

    // Every test of the workspace, the trainer's and the peers' checks included: DuckDB,
    // from its prebuilt wheel, queries the Parquet export with the README's SQL and must
    // find observe's figures; the OpenTelemetry protobuf definitions decode the spans.
    clock.step("test", || {
        run(cargo()
            .args(["test", "--workspace", "--exclude", "policy-bench"])
            .args(["--features", ALL_LAB_FEATURES])
            .env("PEER_PYTHON", python(root)))
    })?;

    clock.step("trunk", || {
        run(Command::new("trunk")
            .args(["build", "--release", "--offline"])
            .env("PATH", &path))?;
        check_page_does_not_plan(&target)
    })?;
    clock.step("e2e", || {
        // The binary the test step built, with the same features, so nothing is rebuilt.
        run(cargo()
            .args(["build", "--workspace", "--exclude", "policy-bench"])
            .args(["--features", ALL_LAB_FEATURES, "--bin", "decode-lab"]))?;
        run(Command::new("node")
            .args(["--test", "e2e/"])
            .env("DIST_DIR", root.join("dist"))
            .env("DECODE_LAB_BIN", target.join("debug/decode-lab"))
            .env("CHROMIUM", CHROMIUM))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legacy mangling rustc writes into a wasm's name section (length-prefixed path
    /// segments, then the hash), written out by hand.
    #[test]
    fn a_mangled_name_is_found_by_its_segments() {
        let section = b"\x00\x04name_ZN8capacity3sim20simulate_speculative17h667b3a0fae060140E\x01";
        assert!(names(section, PLANNING[0]));
        assert!(!names(section, PLANNING[1]));
        assert!(names(
            b"_ZN8capacity11plan_report12profile_part17h10f1E",
            PLANNING[1]
        ));
        assert!(!names(b"_ZN8capacity3sim3Slo8validate17hE", PLANNING[0]));
        assert!(!names(b"_ZN8capacity3sim8simulate17hE", PLANNING[0]));
        assert!(!names(b"", PLANNING[0]));
        // The check as the page's wasm named it before it moved to the planner; the form's
        // reading of the URL stays on the page.
        let check = b"_ZN92_$LT$lab..panels..capacity..view_model..CapacityForm$u20$as$u20$lab..widgets..form..Form$GT$5check17hdcba8ef89ed21f2aE";
        assert!(names(check, PLANNING[2]));
        let from_pairs = b"_ZN92_$LT$lab..panels..capacity..view_model..CapacityForm$u20$as$u20$lab..widgets..form..Form$GT$10from_pairs17h0123E";
        assert!(!names(from_pairs, PLANNING[2]));
        // The step, not the stepper's methods the page's form check never calls either.
        assert!(names(b"_ZN6policy8pipeline4step17h3c59E", STEPPING[0]));
        assert!(!names(b"_ZN6policy8pipeline7Stepper4new17hE", STEPPING[0]));
    }
}
