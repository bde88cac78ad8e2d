//! Seeded, deterministic mutations of valid files, for the tests that every parser of
//! outside bytes answers damage with a typed error or a consistent value, never a panic.
//!
//! cargo-fuzz needs a nightly toolchain; this is its stand-in: a fixed seed gives the same
//! cases on every run and machine, so a failure names a case that reproduces. Each case
//! applies one to three mutations, byte-level (truncation, bit flips, deleted, duplicated or
//! inserted spans, numbers swapped for extremes) or, for JSON, structural (a field deleted,
//! a value replaced with another type, a huge, negative or fractional number, an empty
//! container).
//!
//! `MUTATION_CASES` (default 1,000) and `MUTATION_SEED` (default 1) set a campaign's size
//! and seed: `MUTATION_CASES=200000 MUTATION_SEED=9 cargo test -p model --test mutation`.
//!
//! ```
//! let report = mutation::campaign("a JSON number", b"[1, 2.5, 3]", mutation::Kind::Json, |bytes| {
//!     let _ = serde_json::from_slice::<Vec<f64>>(bytes);
//!     Ok(())
//! });
//! assert!(report.cases >= 1000);
//! ```

#![forbid(unsafe_code)]

use std::panic::{self, AssertUnwindSafe};

use policy::SplitMix64;
use serde_json::Value;

/// What the valid input is, which decides the mutations that apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Any bytes: byte-level mutations only.
    Bytes,
    /// UTF-8 JSON (one document): structural mutations half of the time.
    Json,
    /// Lines of JSON (JSONL): structural mutations of one line half of the time.
    JsonLines,
    /// A safetensors file: an 8-byte header length, a JSON header, then tensor bytes.
    /// Structural mutations of the header half of the time.
    Safetensors,
}

/// The project's SplitMix64 ([`policy::SplitMix64`]): small, seedable, the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n`; `n` must be positive. By remainder, not by
    /// [`SplitMix64::below`]'s multiply-shift: a seed names the same cases it always has.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Numbers a parser must not trust: zero, negatives, huge, beyond every integer type,
/// fractional where a count is expected, and the extremes of f64.
const EXTREMES: [&str; 16] = [
    "0",
    "-1",
    "1",
    "2",
    "255",
    "65536",
    "4294967296",
    "1000000000000",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "1e308",
    "-1e308",
    "1e-320",
    "0.5",
    "1e400",
];

/// One case: one to three mutations of `valid`.
pub fn mutate(valid: &[u8], kind: Kind, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    for _ in 0..1 + rng.below(3) {
        let structural = kind != Kind::Bytes && rng.below(2) == 0;
        let done = structural
            && match kind {
                Kind::Json => mutate_json_text(&bytes, rng),
                Kind::JsonLines => mutate_json_line(&bytes, rng),
                Kind::Safetensors => mutate_safetensors_header(&bytes, rng),
                Kind::Bytes => None,
            }
            .map(|mutated| bytes = mutated)
            .is_some();
        if !done {
            bytes = mutate_bytes(&bytes, rng);
        }
    }
    bytes
}

/// A byte-level mutation.
pub fn mutate_bytes(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let len = out.len();
    match rng.below(8) {
        0 => out.truncate(rng.below(len + 1)),
        1 if len > 0 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
        }
        2 if len > 0 => {
            let i = rng.below(len);
            out[i] = rng.next_u64() as u8;
        }
        3 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(64)).min(len);
            out.drain(start..end);
        }
        4 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(64)).min(len);
            let span = out[start..end].to_vec();
            let at = rng.below(len + 1);
            out.splice(at..at, span);
        }
        5 => {
            let at = rng.below(len + 1);
            let junk: Vec<u8> = (0..1 + rng.below(8))
                .map(|_| rng.next_u64() as u8)
                .collect();
            out.splice(at..at, junk);
        }
        6 => return replace_number(&out, rng),
        _ => {
            let text = [&b"\xff\xfe"[..], b"\0", b"\"", b"{", b"]", b",", b"\n"][rng.below(7)];
            let at = rng.below(len + 1);
            out.splice(at..at, text.iter().copied());
        }
    }
    out
}

/// Replaces one run of ASCII digits (with its sign, fraction and exponent) by an extreme.
fn replace_number(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return bytes.to_vec();
    }
    let start = starts[rng.below(starts.len())];
    let end = (start..bytes.len())
        .find(|&i| !matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
        .unwrap_or(bytes.len());
    let start = if start > 0 && bytes[start - 1] == b'-' {
        start - 1
    } else {
        start
    };
    let mut out = bytes[..start].to_vec();
    out.extend_from_slice(EXTREMES[rng.below(EXTREMES.len())].as_bytes());
    out.extend_from_slice(&bytes[end..]);
    out
}

/// A structural mutation of a JSON document, or `None` when the text is not JSON.
pub fn mutate_json_text(bytes: &[u8], rng: &mut Rng) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    mutate_value(&mut value, rng);
    serde_json::to_vec(&value).ok()
}

fn mutate_json_line(bytes: &[u8], rng: &mut Rng) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return None;
    }
    let i = rng.below(lines.len());
    let mutated = mutate_json_text(lines[i].as_bytes(), rng)?;
    lines[i] = String::from_utf8(mutated).ok()?;
    Some((lines.join("\n") + "\n").into_bytes())
}

fn mutate_safetensors_header(bytes: &[u8], rng: &mut Rng) -> Option<Vec<u8>> {
    let len = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let end = usize::try_from(len).ok()?.checked_add(8)?;
    let header = bytes.get(8..end)?;
    let mutated = mutate_json_text(header, rng)?;
    let mut out = (mutated.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&mutated);
    out.extend_from_slice(&bytes[end..]);
    Some(out)
}

/// Every node of a JSON value, as a path of indices and keys.
fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(prefix.clone());
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                prefix.push(Step::Index(i));
                paths(item, prefix, out);
                prefix.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                prefix.push(Step::Key(key.clone()));
                paths(item, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum Step {
    Index(usize),
    Key(String),
}

fn node<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Index(i) => v.get_mut(*i),
        Step::Key(k) => v.get_mut(k.as_str()),
    })
}

fn mutate_value(root: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    paths(root, &mut Vec::new(), &mut all);
    let path = &all[rng.below(all.len())];
    // Deleting a field or an item acts on the parent.
    if rng.below(4) == 0 {
        if let Some((last, parent_path)) = path.split_last() {
            if let Some(parent) = node(root, parent_path) {
                match (parent, last) {
                    (Value::Array(items), Step::Index(i)) => {
                        items.remove(*i);
                    }
                    (Value::Object(map), Step::Key(k)) => {
                        map.remove(k);
                    }
                    _ => {}
                }
                return;
            }
        }
    }
    let Some(target) = node(root, path) else {
        return;
    };
    *target = match rng.below(10) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => Value::String(String::new()),
        3 => Value::String("\u{0}\u{ffff}é".into()),
        4 => Value::Array(Vec::new()),
        5 => Value::Object(Default::default()),
        6 => match target {
            // A longer array: an item repeated.
            Value::Array(items) if !items.is_empty() => {
                let mut items = items.clone();
                let i = rng.below(items.len());
                items.push(items[i].clone());
                Value::Array(items)
            }
            _ => Value::from(-1),
        },
        _ => {
            let text = EXTREMES[rng.below(EXTREMES.len())];
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()))
        }
    };
}

/// What a campaign ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Mutated inputs tried.
    pub cases: usize,
    /// The seed they came from.
    pub seed: u64,
}

/// How many cases a campaign runs: `MUTATION_CASES`, else 1,000.
pub fn cases() -> usize {
    std::env::var("MUTATION_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// The campaign's seed: `MUTATION_SEED`, else 1.
pub fn seed() -> u64 {
    std::env::var("MUTATION_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// Runs [`cases`] mutations of `valid` through `check`. `check` parses the bytes and,
/// when they parse, checks the value against the format's own consistency rules,
/// returning `Err` with a description when a parsed value is inconsistent. A panic or an
/// `Err` fails the campaign with the case's index and seed, so that it reproduces.
///
/// # Panics
/// When `check` panics or returns `Err` for any case: this is a test helper.
pub fn campaign(
    name: &str,
    valid: &[u8],
    kind: Kind,
    mut check: impl FnMut(&[u8]) -> Result<(), String>,
) -> Report {
    let seed = seed();
    let cases = cases();
    let mut rng = Rng::new(seed ^ fnv(name));
    let mut failures = Vec::new();
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    for case in 0..cases {
        let bytes = mutate(valid, kind, &mut rng);
        match panic::catch_unwind(AssertUnwindSafe(|| check(&bytes))) {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => failures.push(format!("case {case}: inconsistent: {reason}")),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!(
                    "case {case}: panicked: {message}; input starts {:?}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                ));
            }
        }
        if failures.len() >= 5 {
            break;
        }
    }
    panic::set_hook(hook);
    assert!(
        failures.is_empty(),
        "{name}: {} of the mutations (seed {seed}) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{name}: {cases} mutations (seed {seed}), no panic");
    Report { cases, seed }
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_cases() {
        let valid = br#"{"a": [1, 2, {"b": "c"}], "d": 3.5}"#;
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| mutate(valid, Kind::Json, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn mutations_change_the_input_and_reach_every_structure() {
        let valid = br#"{"a": [1, 2, {"b": "c"}], "d": 3.5}"#;
        let mut rng = Rng::new(1);
        let mutated: Vec<_> = (0..500)
            .map(|_| mutate(valid, Kind::Json, &mut rng))
            .collect();
        let changed = mutated.iter().filter(|m| m.as_slice() != valid).count();
        assert!(changed > 450, "only {changed} of 500 changed");
        let still_json = mutated
            .iter()
            .filter(|m| serde_json::from_slice::<Value>(m).is_ok())
            .count();
        // Both valid-but-wrong documents and broken text are produced.
        assert!(
            still_json > 100 && still_json < 450,
            "{still_json} of 500 still JSON"
        );
        assert!(mutated.iter().any(|m| !m.windows(3).any(|w| w == b"\"d\"")));
    }

    #[test]
    fn a_panicking_parser_fails_the_campaign_with_the_case() {
        let result = panic::catch_unwind(|| {
            campaign("always panics", b"[1]", Kind::Json, |_| panic!("boom"))
        });
        let payload = result.unwrap_err();
        let message = payload.downcast_ref::<String>().unwrap();
        assert!(message.contains("case 0: panicked: boom"), "{message}");
    }

    #[test]
    fn safetensors_headers_are_mutated_and_reframed() {
        let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0; 8]);
        let mut rng = Rng::new(5);
        let framed = (0..200)
            .filter_map(|_| mutate_safetensors_header(&file, &mut rng))
            .filter(|m| {
                let len = u64::from_le_bytes(m[..8].try_into().unwrap()) as usize;
                m.len() == 8 + len + 8
            })
            .count();
        assert_eq!(framed, 200);
    }
}
