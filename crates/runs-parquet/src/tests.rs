//! Exports of made-up runs whose answers are known: the shipped model's record, copied with
//! other seeds, slices, timings, tags and versions and sealed again; every column checked
//! against the record it came from, and `observe` over the Parquet against `observe` over
//! the JSONL.

use std::path::PathBuf;

use observe::{DriftRule, Inspector, Observation, Outcome, Outcomes, Report, Verdict};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::record::{Field, Row, RowAccessor};
use policy::RunRecord;

use super::*;

const BASE: &str = include_str!("../../policy/tests/fixtures/records-before-backend-kind.jsonl");

/// Slices by the prompt's first word, as a stand-in for the language identifier.
struct FirstWord;

impl Inspector for FirstWord {
    fn slice_of(&self, prompt: &str) -> String {
        if prompt.starts_with("Hautatu") {
            "eu"
        } else {
            "en"
        }
        .into()
    }

    fn unseen_bytes(&self, prompt: &str) -> usize {
        prompt.bytes().filter(|b| !b.is_ascii()).count()
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runs-parquet-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Run `i`: two versions (temperatures), both slices, tagged or not, a seed past
/// `i64::MAX` now and then, and timings that differ run to run.
fn run(i: u64) -> RunRecord {
    let mut r = policy::parse_records(BASE.lines().next().unwrap())
        .unwrap()
        .remove(0);
    r.config.seed = if i.is_multiple_of(7) { u64::MAX - i } else { i };
    r.config.policy.temperature = if i.is_multiple_of(2) { 0.7 } else { 1.1 };
    let prompt = if i.is_multiple_of(3) {
        "Hautatu taula"
    } else {
        "Insert a table"
    };
    r.config.prompt = prompt.into();
    r.rendered_prompt = prompt.into();
    r.ttft_us = 1_000.0 + ((i * 37) % 101) as f64 * 13.5;
    r.token_latencies_us = (0..r.steps.len())
        .map(|k| 400.0 + (i % 11) as f64 * 3.25 + k as f64)
        .collect();
    r.tags.insert("at_s".into(), (i as f64 * 0.5).to_string());
    if i.is_multiple_of(4) {
        r.tags.insert("slice".into(), "eu".into());
        r.tags.insert("tenant".into(), format!("course-{}", i % 3));
    }
    r.seal();
    r
}

fn line(r: &RunRecord) -> String {
    serde_json::to_string(r).unwrap()
}

fn outcome(r: &RunRecord, i: u64) -> Outcome {
    Outcome {
        run_id: r.run_id.clone().unwrap(),
        outcome: if i.is_multiple_of(5) {
            Verdict::Rejected
        } else {
            Verdict::Accepted
        },
        at_s: 100.0 + i as f64,
    }
}

/// Small row groups, so that a test of a few hundred runs crosses several.
const SMALL: GroupLimits = GroupLimits {
    runs: 64,
    record_bytes: 1 << 20,
    rows: 100,
};

/// Exports `records` (with an outcome for two runs in three) into a fresh directory.
fn export(name: &str, records: &[RunRecord]) -> (PathBuf, Vec<Outcome>) {
    let dir = scratch(name);
    let mut export = Export::with_limits(&dir, SMALL).unwrap();
    let mut outcomes = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if i % 3 != 0 {
            outcomes.push(outcome(r, i as u64));
            export.add_outcome(outcomes.last().unwrap()).unwrap();
        }
        let slice = observe::slice_of(r, &FirstWord);
        export.add_run(&line(r), r, &slice).unwrap();
    }
    let written = export.finish().unwrap();
    let steps: usize = records.iter().map(|r| r.steps.len()).sum();
    assert_eq!(
        written,
        Written {
            runs: records.len() as u64,
            steps: steps as u64,
            outcomes: outcomes.len() as u64,
        }
    );
    (dir, outcomes)
}

fn report(lines: impl Iterator<Item = (usize, String)>, outcomes: Outcomes) -> Report {
    let mut o = Observation::new(&FirstWord, outcomes, None);
    for (n, text) in lines {
        o.add_line("runs", n, &text);
    }
    o.finish(None, &DriftRule::default()).unwrap()
}

/// Every row of a table, every column.
fn rows(path: &std::path::Path) -> Vec<Row> {
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn the_record_column_gives_back_the_records_and_the_same_report() {
    let records: Vec<RunRecord> = (0..300).map(run).collect();
    let (dir, outcomes) = export("round-trip", &records);
    let groups = SerializedFileReader::new(std::fs::File::open(Table::Runs.file_in(&dir)).unwrap())
        .unwrap()
        .metadata()
        .num_row_groups();
    assert_eq!(groups, 300usize.div_ceil(SMALL.runs));

    let read: Vec<(usize, String)> = RecordLines::open(&dir.join("runs.parquet"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let written: Vec<(usize, String)> = records
        .iter()
        .map(line)
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .collect();
    assert_eq!(read, written);

    let jsonl = outcomes
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let from_jsonl = report(
        written.into_iter(),
        Outcomes::parse(&jsonl, f64::INFINITY).unwrap(),
    );
    let from_parquet = report(
        read.into_iter(),
        read_outcomes(&Table::Outcomes.file_in(&dir), f64::INFINITY).unwrap(),
    );
    assert_eq!(from_parquet, from_jsonl);
    assert_eq!(from_parquet.versions.len(), 2);
    assert_eq!(from_parquet.runs, 300);
    assert!(from_parquet
        .versions
        .iter()
        .all(|v| v.summary.outcomes_joined > 0 && v.slices.len() == 2));
}

/// A step as compared: run id, step, token, prob, entropy, survivors, draw.
type StepRow = (String, i64, i64, f64, f64, i64, Option<f64>);

#[test]
fn every_column_is_what_its_record_says() {
    let records: Vec<RunRecord> = (0..40).map(run).collect();
    let (dir, outcomes) = export("columns", &records);
    let runs = rows(&Table::Runs.file_in(&dir));
    assert_eq!(runs.len(), records.len());
    for (row, r) in runs.iter().zip(&records) {
        let text = |name: &str| {
            row.get_column_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| f.clone())
                .unwrap()
        };
        let str_of = |name: &str| match text(name) {
            Field::Str(s) => s,
            other => panic!("{name} is {other:?}"),
        };
        assert_eq!(str_of("run_id"), r.run_id.clone().unwrap());
        assert_eq!(str_of("version_id"), r.version_id.clone().unwrap());
        assert_eq!(str_of("model_hash"), r.model.hash);
        assert_eq!(str_of("backend"), "cpu-reference");
        assert_eq!(
            text("temperature"),
            Field::Double(r.config.policy.temperature)
        );
        assert_eq!(text("seed"), Field::ULong(r.config.seed));
        assert_eq!(text("max_tokens"), Field::ULong(r.config.max_tokens as u64));
        assert_eq!(
            serde_json::from_str::<policy::VersionKey>(&str_of("version_key")).unwrap(),
            policy::VersionKey::of(r)
        );
        let expected_slice = r
            .tags
            .get("slice")
            .cloned()
            .unwrap_or_else(|| FirstWord.slice_of(&r.config.prompt));
        assert_eq!(str_of("slice"), expected_slice);
        let Field::MapInternal(map) = text("tags") else {
            panic!("tags is not a map")
        };
        let tags: Vec<(String, String)> = map
            .entries()
            .iter()
            .map(|(k, v)| match (k, v) {
                (Field::Str(k), Field::Str(v)) => (k.clone(), v.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        let expected: Vec<(String, String)> =
            r.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(tags, expected);
        assert_eq!(
            text("prompt_bytes"),
            Field::Long(r.rendered_prompt.len() as i64)
        );
        assert_eq!(text("output_tokens"), Field::Long(r.steps.len() as i64));
        assert_eq!(text("ttft_ms"), Field::Double(r.ttft_us / 1000.0));
        // By hand: the latencies after the first token, summed and averaged.
        let later: Vec<f64> = r.token_latencies_us[1..].to_vec();
        let decode_us: f64 = later.iter().sum();
        assert_eq!(text("decode_ms"), Field::Double(decode_us / 1000.0));
        assert_eq!(
            text("tpot_ms"),
            Field::Double(decode_us / later.len() as f64 / 1000.0)
        );
        assert_eq!(text("precision"), Field::Null, "recorded before precision");
        assert_eq!(text("at_s"), Field::Double(r.tags["at_s"].parse().unwrap()));
        assert_eq!(str_of("stop_reason"), r.stop_reason.name());
        assert_eq!(str_of("record"), line(r));
    }

    let steps = rows(&Table::Steps.file_in(&dir));
    let expected: Vec<StepRow> = records
        .iter()
        .flat_map(|r| {
            r.steps.iter().map(move |s| {
                (
                    r.run_id.clone().unwrap(),
                    s.step as i64,
                    i64::from(s.token),
                    s.prob,
                    s.entropy,
                    s.survivors as i64,
                    s.draw,
                )
            })
        })
        .collect();
    let found: Vec<StepRow> = steps
        .iter()
        .map(|row| {
            (
                row.get_string(0).unwrap().clone(),
                row.get_long(2).unwrap(),
                row.get_long(3).unwrap(),
                row.get_double(5).unwrap(),
                row.get_double(7).unwrap(),
                row.get_long(8).unwrap(),
                row.get_double(9).ok(),
            )
        })
        .collect();
    assert_eq!(found, expected);
    assert!(found.iter().any(|s| s.6.is_some()), "a sampled run draws");

    let outcome_rows: Vec<(String, String, f64)> = rows(&Table::Outcomes.file_in(&dir))
        .iter()
        .map(|row| {
            (
                row.get_string(0).unwrap().clone(),
                row.get_string(1).unwrap().clone(),
                row.get_double(2).unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, String, f64)> = outcomes
        .iter()
        .map(|o| (o.run_id.clone(), o.outcome.name().to_string(), o.at_s))
        .collect();
    assert_eq!(outcome_rows, expected);
}

#[test]
fn a_damaged_record_in_the_table_is_rejected_by_row() {
    let records: Vec<RunRecord> = (0..3).map(run).collect();
    let dir = scratch("damaged");
    let mut export = Export::create(&dir).unwrap();
    for (i, r) in records.iter().enumerate() {
        let mut text = line(r);
        if i == 1 {
            // An edit after the record was sealed: its digest no longer matches.
            text = text.replacen("\"seed\":1,", "\"seed\":2,", 1);
            assert_ne!(text, line(r));
        }
        export.add_run(&text, r, "en").unwrap();
    }
    export.finish().unwrap();
    let path = Table::Runs.file_in(&dir);
    let mut o = Observation::new(&FirstWord, Outcomes::default(), None);
    let source = path.display().to_string();
    for row in RecordLines::open(&path).unwrap() {
        let (n, text) = row.unwrap();
        o.add_line(&source, n, &text);
    }
    let report = o.finish(None, &DriftRule::default()).unwrap();
    assert_eq!((report.runs, report.rejected_count), (2, 1));
    let rejected = &report.rejected[0];
    assert_eq!(
        (rejected.source.as_str(), rejected.line),
        (source.as_str(), 2)
    );
    assert!(
        rejected.reason.starts_with("altered after it was written"),
        "{}",
        rejected.reason
    );
}

#[test]
fn an_outcome_row_that_is_not_one_is_an_error_naming_its_row() {
    let dir = scratch("bad-outcomes");
    std::fs::create_dir_all(&dir).unwrap();
    let rows = [
        ("a", "accepted", 1.0),
        ("b", "maybe", 2.0),
        ("c", "rejected", f64::NAN),
    ];
    let mut table = crate::write::TableFile::<crate::write::Outcomes>::with_limits(
        &dir,
        GroupLimits::default(),
    )
    .unwrap();
    for (run_id, verdict, at_s) in rows {
        table.buffer.push(run_id, verdict, at_s);
    }
    table.finish().unwrap();
    let path = Table::Outcomes.file_in(&dir);
    let err = read_outcomes(&path, f64::INFINITY).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}: outcomes line 2: unknown variant `maybe`",
            path.display()
        )),
        "{err}"
    );

    // A run id twice names both rows; a null-free file of good rows reads.
    let mut table = crate::write::TableFile::<crate::write::Outcomes>::with_limits(
        &dir,
        GroupLimits::default(),
    )
    .unwrap();
    for (run_id, at_s) in [("a", 1.0), ("b", 2.0), ("a", 3.0)] {
        table.buffer.push(run_id, "accepted", at_s);
    }
    table.finish().unwrap();
    assert_eq!(
        read_outcomes(&path, f64::INFINITY).unwrap_err().to_string(),
        format!(
            "{}: outcome for run_id \"a\" on line 3 repeats the one on line 1: a run has one outcome",
            path.display()
        )
    );
    let mut table = crate::write::TableFile::<crate::write::Outcomes>::with_limits(
        &dir,
        GroupLimits::default(),
    )
    .unwrap();
    table.buffer.push("a", "accepted", 1.0);
    table.buffer.push("b", "rejected", 9.0);
    table.finish().unwrap();
    let mut known = read_outcomes(&path, 5.0).unwrap();
    assert_eq!((known.len(), known.late), (1, 1), "b is after the cut-off");
    assert_eq!(known.join("a"), Some(Verdict::Accepted));
}

#[test]
fn a_table_without_the_column_is_named() {
    let (dir, _) = export("missing", &[run(1)]);
    let steps = Table::Steps.file_in(&dir);
    let err = RecordLines::open(&steps).err().unwrap().to_string();
    assert_eq!(
        err,
        format!(
            "{} has no record column: it is not the runs table of an export",
            steps.display()
        )
    );
}

#[test]
fn a_path_is_parquet_by_its_extension_or_as_an_export_directory() {
    let dir = scratch("paths");
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(
        parquet_path(&dir, Table::Runs),
        Some(dir.join("runs.parquet"))
    );
    assert_eq!(
        parquet_path(&dir, Table::Outcomes),
        Some(dir.join("outcomes.parquet"))
    );
    let file = dir.join("x.parquet");
    assert_eq!(parquet_path(&file, Table::Outcomes), Some(file.clone()));
    assert_eq!(parquet_path(&dir.join("runs.jsonl"), Table::Runs), None);
}
