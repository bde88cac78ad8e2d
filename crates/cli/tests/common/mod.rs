//! What the tests that run `decode-lab` share: the binary run from the workspace root, where
//! its default model directory is, and that model's `config.json`.

#![allow(dead_code)] // each test file uses its own part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The model that ships in the workspace, which `decode-lab` loads by default.
pub fn model_dir() -> PathBuf {
    workspace().join("models/decode-lab-tiny-v1")
}

/// `decode-lab args`, run from the workspace root.
pub fn decode_lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_decode-lab"))
        .args(args)
        .current_dir(workspace())
        .output()
        .unwrap()
}

/// The standard output of `decode-lab args`, which must succeed.
pub fn ok(args: &[&str]) -> String {
    let out = decode_lab(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts that `decode-lab args` fails, without a panic, with `message` in its standard
/// error.
pub fn fails_with(args: &[&str], message: &str) {
    let out = decode_lab(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// The shipped model's `config.json`.
pub fn config() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(model_dir().join("config.json")).unwrap())
        .unwrap()
}

/// The SHA-256 that the shipped model's `config.json` records for the file of `role`.
pub fn recorded_hash(role: &str) -> String {
    config()["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["role"] == role)
        .unwrap()["sha256"]
        .as_str()
        .unwrap()
        .to_string()
}
