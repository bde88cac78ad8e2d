//! DuckDB over an export gives what `observe` gives: 2 versions × 2 slices × 300 runs, made
//! from the shipped model's record with other seeds, timings and tags and sealed again,
//! with outcomes for most; exported as `decode-lab export --parquet` does; then the SQL of
//! `sql/` (the README's) asked of DuckDB, and each figure compared with `observe`'s report
//! of the same runs read from their JSONL.

use std::path::{Path, PathBuf};

use observe::{DriftRule, Inspector, Observation, Outcome, Outcomes, Report, Verdict};
use policy::RunRecord;
use runs_parquet::Export;
use serde_json::{json, Value};

const BASE: &str = include_str!("../../policy/tests/fixtures/records-before-backend-kind.jsonl");
const VIEWS: &str = include_str!("../sql/views.sql");
const VERSIONS: &str = include_str!("../sql/versions.sql");
const SLICES: &str = include_str!("../sql/slices.sql");

/// Every run here is tagged with its slice, so the inspector is never asked.
struct Tagged;

impl Inspector for Tagged {
    fn slice_of(&self, prompt: &str) -> String {
        panic!("untagged run: {prompt}")
    }

    fn unseen_bytes(&self, _: &str) -> usize {
        0
    }
}

/// A well-mixed 64-bit hash of `i` (SplitMix64's finaliser): made-up timings and outcomes
/// that follow no pattern a query could get right by accident.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Run `i` of version `v` (0 or 1: its temperature) in `slice`; version 1's Basque runs
/// have a slower tail.
fn run(i: u64, v: u64, slice: &str) -> RunRecord {
    let mut r = policy::parse_records(BASE.lines().next().unwrap())
        .unwrap()
        .remove(0);
    let h = mix(i);
    r.config.seed = i;
    r.config.policy.temperature = [0.7, 1.1][v as usize];
    let tail = if v == 1 && slice == "eu" && h.is_multiple_of(10) {
        400.0
    } else {
        0.0
    };
    r.ttft_us = (20.0 + (h % 10_000) as f64 / 97.0 + tail) * 1e3;
    r.token_latencies_us = (0..r.steps.len())
        .map(|k| 300.0 + ((h >> 16) % 200) as f64 + k as f64)
        .collect();
    r.tags.insert("slice".into(), slice.into());
    r.tags.insert("at_s".into(), (i as f64 * 0.25).to_string());
    r.seal();
    r
}

/// Four runs in five get an outcome; acceptance depends on the version and the slice.
fn outcome(r: &RunRecord, i: u64, v: u64, slice: &str) -> Option<Outcome> {
    let h = mix(i ^ 0x5151);
    if h.is_multiple_of(5) {
        return None;
    }
    let accept_per_100 = match (v, slice) {
        (0, "en") => 80,
        (0, _) => 70,
        (_, "en") => 85,
        _ => 55,
    };
    Some(Outcome {
        run_id: r.run_id.clone().unwrap(),
        outcome: if (h >> 8) % 100 < accept_per_100 {
            Verdict::Accepted
        } else {
            Verdict::Rejected
        },
        at_s: 1_000.0 + i as f64,
    })
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("peer-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The runs as JSONL lines, their outcomes as JSONL rows, and the export of both in `dir`.
fn make(dir: &Path) -> (Vec<String>, Vec<String>) {
    let (mut lines, mut rows) = (Vec::new(), Vec::new());
    let mut export = Export::create(dir).unwrap();
    let mut i = 0;
    for v in 0..2 {
        for slice in ["en", "eu"] {
            for _ in 0..300 {
                i += 1;
                let r = run(i, v, slice);
                let line = serde_json::to_string(&r).unwrap();
                export
                    .add_run(&line, &r, &observe::slice_of(&r, &Tagged))
                    .unwrap();
                if let Some(o) = outcome(&r, i, v, slice) {
                    export.add_outcome(&o).unwrap();
                    rows.push(serde_json::to_string(&o).unwrap());
                }
                lines.push(line);
            }
        }
    }
    export.finish().unwrap();
    (lines, rows)
}

/// What `observe RUNS.jsonl --outcomes OUTCOMES.jsonl` reports.
fn observe(lines: &[String], rows: &[String]) -> Report {
    let outcomes = Outcomes::parse(&rows.join("\n"), f64::INFINITY).unwrap();
    let mut o = Observation::new(&Tagged, outcomes, None);
    o.add_lines("runs.jsonl", &lines.join("\n"));
    o.finish(None, &DriftRule::default()).unwrap()
}

/// A figure row: version, slice ("all" for the version), runs, p99 TTFT, outcomes joined,
/// outcome rate.
type Figures = (String, String, i64, f64, i64, Option<f64>);

/// The DuckDB version the check pins (`cargo xtask test` installs its wheel).
const DUCKDB: &str = "1.5.6";

/// DuckDB's answers to `queries` over the export in `dir`, each a list of rows: DuckDB from
/// its prebuilt Python wheel (`query.py`), in memory, loading and installing no extension.
/// The Python is `PEER_PYTHON`, the virtual environment `cargo xtask test` makes.
fn duckdb(dir: &Path, queries: &[&str]) -> Vec<Vec<Vec<Value>>> {
    let job = json!({ "dir": dir, "views": VIEWS, "queries": queries });
    let out = peer_check::python("query.py", &job.to_string());
    assert!(
        out.status.success(),
        "query.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["version"], DUCKDB, "the DuckDB that answered");
    serde_json::from_value(answer["answers"].clone()).unwrap()
}

/// The figure rows of an answer (with a slice column when `sliced`).
fn rows_of(rows: &[Vec<Value>], sliced: bool) -> Vec<Figures> {
    let at = usize::from(sliced);
    rows.iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                if sliced {
                    row[1].as_str().unwrap().to_string()
                } else {
                    "all".to_string()
                },
                row[1 + at].as_i64().unwrap(),
                row[2 + at].as_f64().unwrap(),
                row[3 + at].as_i64().unwrap(),
                row[4 + at].as_f64(),
            )
        })
        .collect()
}

#[test]
fn duckdb_over_the_export_agrees_with_observe() {
    let dir = scratch();
    let (lines, rows) = make(&dir);
    let report = observe(&lines, &rows);
    assert_eq!((report.runs, report.rejected_count), (1_200, 0));

    let figures = |slice: &str, s: &observe::Summary, id: &str| -> Figures {
        (
            id.to_string(),
            slice.to_string(),
            s.runs as i64,
            s.ttft_p99_ms.unwrap(),
            s.outcomes_joined as i64,
            s.outcome_rate,
        )
    };
    let versions: Vec<Figures> = report
        .versions
        .iter()
        .map(|v| figures("all", &v.summary, &v.version_id))
        .collect();
    let slices: Vec<Figures> = report
        .versions
        .iter()
        .flat_map(|v| {
            v.slices
                .iter()
                .map(|s| figures(&s.slice, &s.summary, &v.version_id))
        })
        .collect();
    assert_eq!((versions.len(), slices.len()), (2, 4));

    // The steps table joins back on run_id: each version's steps, as observe counts them.
    let steps_sql = "SELECT r.version_id, count(*) FROM steps s JOIN runs r USING (run_id) \
                     GROUP BY r.version_id ORDER BY r.version_id";
    let answers = duckdb(&dir, &[VERSIONS, SLICES, steps_sql]);
    // Floats compared exactly: the Parquet holds the very doubles `observe` ranks.
    assert_eq!(rows_of(&answers[0], false), versions);
    assert_eq!(rows_of(&answers[1], true), slices);
    let steps: Vec<(String, i64)> = answers[2]
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                row[1].as_i64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, i64)> = report
        .versions
        .iter()
        .map(|v| (v.version_id.clone(), v.summary.predictions.steps as i64))
        .collect();
    assert_eq!(steps, expected);
    let _ = std::fs::remove_dir_all(dir);
}
