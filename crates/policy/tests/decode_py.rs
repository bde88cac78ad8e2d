//! The chapter's `decode.py`, case by case against NumPy's own output.
//!
//! Fixtures: `tests/fixtures/decode_py_*.json`, written by `reference/make_fixtures.sh`
//! (NumPy version and pinned CPU features recorded inside). Each file holds the same
//! cases computed on one of NumPy's argpartition paths.

use policy::chapter::{choose, Argpartition};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    numpy_version: String,
    argpartition_path: String,
    cases: Vec<Case>,
    your_turn: YourTurn,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    logits: Vec<f64>,
    temperature: f64,
    top_k: usize,
    seed: u64,
    token: usize,
    kept: Vec<usize>,
    probs: Vec<f64>,
    printed: String,
}

#[derive(Deserialize)]
struct YourTurn {
    logits: Vec<f64>,
    top_k: usize,
    draws: Vec<Draw>,
}

#[derive(Deserialize)]
struct Draw {
    temperature: f64,
    seed: u64,
    token: usize,
}

/// Probabilities agree with NumPy to this absolute tolerance (both compute in f64;
/// `exp` may differ in the last bit between libms).
const PROB_TOLERANCE: f64 = 1e-12;

fn check(file: &str, path: Argpartition) {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let fixture: Fixture = serde_json::from_str(&text).unwrap();
    assert_eq!(fixture.argpartition_path, path.name());
    assert!(
        fixture.cases.len() >= 300,
        "only {} cases",
        fixture.cases.len()
    );
    let mut failures = Vec::new();
    for case in &fixture.cases {
        let got = choose(&case.logits, case.temperature, case.top_k, case.seed, path).unwrap();
        let probs_agree = got.probs.len() == case.probs.len()
            && got
                .probs
                .iter()
                .zip(&case.probs)
                .all(|(a, b)| (a - b).abs() <= PROB_TOLERANCE);
        if got.token != case.token || got.kept != case.kept || !probs_agree {
            failures.push(format!(
                "{}: token {} (numpy {}), kept {:?} (numpy {:?})",
                case.name,
                got.token,
                case.token,
                &got.kept[..got.kept.len().min(8)],
                &case.kept[..case.kept.len().min(8)]
            ));
        } else if got.to_string() != case.printed {
            failures.push(format!(
                "{}: printed {:?}, numpy {:?}",
                case.name,
                got.to_string(),
                case.printed
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from NumPy {} ({}):\n{}",
        failures.len(),
        fixture.cases.len(),
        fixture.numpy_version,
        file,
        failures.join("\n")
    );
    let turn = &fixture.your_turn;
    for draw in &turn.draws {
        let got = choose(&turn.logits, draw.temperature, turn.top_k, draw.seed, path).unwrap();
        assert_eq!(
            got.token, draw.token,
            "your turn: T={} seed={}",
            draw.temperature, draw.seed
        );
    }
}

#[test]
fn x86_avx2_path_matches_numpy() {
    check("decode_py_x86_avx2.json", Argpartition::X86Avx2);
}

#[test]
fn portable_path_matches_numpy() {
    check("decode_py_portable.json", Argpartition::Portable);
}

#[test]
fn your_turn_high_temperature_varies_more() {
    // The chapter's exercise: across the same seeds, 1.5 gives more distinct tokens than 0.2.
    let logits = [1.2, 0.1, 2.4, 1.7];
    let distinct = |t: f64| {
        let mut tokens: Vec<usize> = (0..20)
            .map(|seed| {
                choose(&logits, t, 3, seed, Argpartition::default())
                    .unwrap()
                    .token
            })
            .collect();
        tokens.sort_unstable();
        tokens.dedup();
        tokens.len()
    };
    assert!(
        distinct(1.5) > distinct(0.2),
        "{} vs {}",
        distinct(1.5),
        distinct(0.2)
    );
}
