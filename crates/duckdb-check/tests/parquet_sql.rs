//! DuckDB over an export gives what `observe` gives: 2 versions × 2 slices × 300 runs, made
//! from the shipped model's record with other seeds, timings and tags and sealed again,
//! with outcomes for most; exported as `decode-lab export --parquet` does; then the SQL of
//! `sql/` (the README's) asked of DuckDB, and each figure compared with `observe`'s report
//! of the same runs read from their JSONL.

use std::path::{Path, PathBuf};

use duckdb::{Config, Connection};
use observe::{DriftRule, Inspector, Observation, Outcome, Outcomes, Report, Verdict};
use policy::RunRecord;
use runs_parquet::Export;

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
    let dir = std::env::temp_dir().join(format!("duckdb-check-{}", std::process::id()));
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

/// DuckDB, in memory, that loads and installs no extension: the Parquet reader is linked in
/// (the `parquet` feature), and nothing may be fetched at run time.
fn duckdb(dir: &Path) -> Connection {
    let config = Config::default()
        .enable_autoload_extension(false)
        .unwrap()
        .with("autoinstall_known_extensions", "false")
        .unwrap();
    let db = Connection::open_in_memory_with_flags(config).unwrap();
    db.execute_batch(&VIEWS.replace("DIR", dir.to_str().unwrap()))
        .unwrap();
    db
}

fn query(db: &Connection, sql: &str, sliced: bool) -> Vec<Figures> {
    let mut statement = db.prepare(sql).unwrap();
    let at = usize::from(sliced);
    statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                if sliced {
                    row.get::<_, String>(1)?
                } else {
                    "all".to_string()
                },
                row.get::<_, i64>(1 + at)?,
                row.get::<_, f64>(2 + at)?,
                row.get::<_, i64>(3 + at)?,
                row.get::<_, Option<f64>>(4 + at)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
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

    let db = duckdb(&dir);
    // Floats compared exactly: the Parquet holds the very doubles `observe` ranks.
    assert_eq!(query(&db, VERSIONS, false), versions);
    assert_eq!(query(&db, SLICES, true), slices);

    // The steps table joins back on run_id: each version's steps, as observe counts them.
    let mut statement = db
        .prepare(
            "SELECT r.version_id, count(*) FROM steps s JOIN runs r USING (run_id) \
             GROUP BY r.version_id ORDER BY r.version_id",
        )
        .unwrap();
    let steps: Vec<(String, i64)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<(String, i64)> = report
        .versions
        .iter()
        .map(|v| (v.version_id.clone(), v.summary.predictions.steps as i64))
        .collect();
    assert_eq!(steps, expected);
    let _ = std::fs::remove_dir_all(dir);
}
