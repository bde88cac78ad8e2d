//! Seeded mutations of valid run records (one JSON document, and JSONL): reading them
//! never panics, and whatever reads back as a record either is refused with a typed error
//! (by `check` or `replay`) or is consistent: a record whose digest matches its content
//! replays identically, one whose digest does not is reported as altered, and every record
//! survives a JSON round trip unchanged. `MUTATION_CASES` and `MUTATION_SEED` set the size
//! and seed (see the `mutation` crate).

mod support;

use mutation::{campaign, Kind};
use policy::generate::GenerateError;
use policy::{parse_records, replay, Policy, RecordError, ReplayReport, RunRecord, StopConfig};
use support::{config, run, Bytes, Ticks, Toy};

fn records() -> Vec<RunRecord> {
    let sampled = Policy {
        temperature: 0.9,
        top_k: 6,
        top_p: 0.95,
        eos_token: Some(0),
        min_new_tokens: 2,
        ..Policy::default()
    };
    let greedy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    let stop = StopConfig {
        strings: vec!["c".into()],
        tokens: vec![7],
    };
    vec![
        run(&mut Toy::new(64), &config(sampled, 12, stop)),
        run(&mut Toy::new(64), &config(greedy, 5, StopConfig::default())),
        run(
            &mut Toy::new(64),
            &config(Policy::default(), 8, StopConfig::default()),
        ),
    ]
}

/// Reads `bytes` as records and holds each that reads to the rules above.
fn check(bytes: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(()); // records are text; a reader refuses other bytes before parsing
    };
    let Ok(records) = parse_records(text) else {
        return Ok(());
    };
    for record in &records {
        let line = serde_json::to_string(record).map_err(|e| e.to_string())?;
        let back = parse_records(&line).map_err(|e| format!("round trip: {e}"))?;
        if back.as_slice() != std::slice::from_ref(record) {
            let start: String = line.chars().take(300).collect();
            return Err(format!("the record changed in a JSON round trip: {start}"));
        }
        let altered = record.alteration();
        let report = replay(record, &mut Toy::new(64), &Bytes, &mut Ticks(0.0));
        match (altered, report) {
            (Some(altered), Ok(report)) if report == altered => {}
            (Some(altered), other) => {
                return Err(format!("{altered} but the replay said {other:?}"));
            }
            // An unaltered record with a digest is the record the run wrote.
            (None, Ok(ReplayReport::Identical { .. })) => {}
            // Its ids are derived from the content, not covered by the digest: an edited
            // id is named by the record's check.
            (None, Err(GenerateError::Record(RecordError::Id { .. }))) => {}
            // So are its timings: one out of range is named by the record's check.
            (None, Err(GenerateError::Record(RecordError::Timing { .. }))) => {}
            (None, other) if record.record_digest.is_some() => {
                let start: String = line.chars().take(300).collect();
                return Err(format!(
                    "a record whose digest matches replayed as {other:?}: {start}"
                ));
            }
            (None, _) => {} // no digest: any typed verdict will do
        }
    }
    Ok(())
}

fn jsonl(records: &[RunRecord]) -> String {
    let lines: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    lines.join("\n") + "\n"
}

#[test]
fn a_mutated_pretty_record_never_panics_and_reads_back_consistent() {
    let one = serde_json::to_string_pretty(&records()[0]).unwrap();
    check(one.as_bytes()).unwrap();
    campaign(
        "a pretty-printed run record",
        one.as_bytes(),
        Kind::Json,
        check,
    );
}

#[test]
fn mutated_jsonl_records_never_panic_and_read_back_consistent() {
    let text = jsonl(&records());
    check(text.as_bytes()).unwrap();
    campaign(
        "run records, JSONL",
        text.as_bytes(),
        Kind::JsonLines,
        check,
    );
}

/// Without digests (as records written before them), every edit that parses reaches the
/// consistency check and the field-by-field comparison.
#[test]
fn mutated_records_without_digests_never_panic() {
    let mut records = records();
    for r in &mut records {
        // As a record made before digests and ids existed.
        r.record_digest = None;
        r.run_id = None;
        r.version_id = None;
    }
    let text = jsonl(&records);
    check(text.as_bytes()).unwrap();
    campaign(
        "run records without digests, JSONL",
        text.as_bytes(),
        Kind::JsonLines,
        check,
    );
}
