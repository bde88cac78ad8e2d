//! `cargo xtask serve` builds and serves the lab; `cargo xtask test` runs every test.
//!
//! Both first install what is missing on a fresh machine (the wasm target, Trunk, the
//! wasm-bindgen CLI that matches Cargo.lock, Chromium, Mesa's lavapipe Vulkan driver, the
//! npm packages of `e2e/`) and skip what is already there, so a repeated run costs seconds.

#![forbid(unsafe_code)]

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{exit, Command, Stdio};

const TRUNK_VERSION: &str = "0.21.14";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// Debian packages: headless Chromium for the browser tests and the lavapipe CPU Vulkan
/// driver for native wgpu tests.
const APT_PACKAGES: [&str; 3] = ["chromium", "mesa-vulkan-drivers", "libvulkan1"];
const CHROMIUM: &str = "/usr/bin/chromium";
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

/// What only a worker links: its Trunk profile and binary, the symbols, and what must run
/// there.
const WORKER_ONLY: [(&str, &str, &[&str], &str); 3] = [
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
];

/// The page only renders: in Trunk's release build, the page's wasm (before wasm-opt, with
/// its name section) names no function of the capacity simulator or report, nor the
/// capacity form's check, which the planner worker runs for it, nor the decoding step,
/// which the model worker takes. Each worker's wasm must name its symbols, or the scan
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

fn test(root: &Path) -> Result<(), String> {
    install(root)?;
    let path = tool_path(root);

    run(cargo().args(["fmt", "--all", "--check"]))?;
    // The lab four times: the page alone, with the model worker's code (`worker` feature),
    // with the capacity planner's (`planner` feature) and with the observation worker's
    // (`observer` feature).
    // The trainer (candle) and the DuckDB check are outside the default members; their
    // tests still run here. The DuckDB check is not linted here: clippy would build DuckDB's
    // C++ a second time (its build script does not share its run with `cargo test`).
    clippy(&[])?;
    clippy(&["-p", "lab", "--features", "worker"])?;
    clippy(&["-p", "lab", "--features", "planner"])?;
    clippy(&["-p", "lab", "--features", "observer"])?;
    clippy(&["-p", "trainer"])?;

    // Architecture invariants: the policy core is pure; it, the model and the tokenizer build
    // for the browser.
    // The policy core, the model, the capacity planner, the n-gram draft and the language
    // identifier are pure; the GPU runtime knows nothing of the UI.
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
    // The page's wasm (the lab without its `worker` feature) links no model, tokenizer or GPU
    // runtime, and no record reader or language identifier (the `observer` feature); its
    // build script may read the model's config natively, so only normal dependencies count.
    // No wasm of the lab links the Parquet writer, which is native only. Then the page builds
    // for the browser on its own.
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
    )?;
    lint(&["-p", "lab", "--bin", "lab", "--target", WASM_TARGET])?;
    lint(&[
        "-p",
        "lab",
        "--bin",
        "observer",
        "--features",
        "observer",
        "--target",
        WASM_TARGET,
    ])?;
    lint(&[
        "-p",
        "lab",
        "--bin",
        "planner",
        "--features",
        "planner",
        "--target",
        WASM_TARGET,
    ])?;
    run(cargo().args([
        "build",
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
        "--target",
        WASM_TARGET,
    ]))?;
    // The GPU runtime's browser-only code is linted too.
    lint(&["-p", "gpu", "--target", WASM_TARGET])?;

    run(cargo().args(["test", "--features", "lab/worker,lab/planner,lab/observer"]))?;
    run(cargo().args(["test", "-p", "trainer"]))?;
    // DuckDB, built from its bundled sources, queries the Parquet export with the README's
    // SQL and must find observe's figures.
    run(cargo().args(["test", "-p", "duckdb-check"]))?;

    run(Command::new("trunk")
        .args(["build", "--release", "--offline"])
        .env("PATH", &path))?;
    run(cargo().args(["build", "-p", "decode-lab"]))?;
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    check_page_does_not_plan(&target)?;
    run(Command::new("node")
        .args(["--test", "e2e/"])
        .env("DIST_DIR", root.join("dist"))
        .env("DECODE_LAB_BIN", target.join("debug/decode-lab"))
        .env("CHROMIUM", CHROMIUM))
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
