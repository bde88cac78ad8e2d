//! Observations of made-up telemetry whose answers are known: the shipped model's record,
//! copied with other seeds, slices, timings and versions, and sealed again. Every figure is
//! checked against a direct computation over the same runs.

use observe::{DriftRule, Inspector, Observation, ObserveError, Outcomes, Report};
use policy::RunRecord;

/// The CLI's record of the shipped model: 6 sampled steps at temperature 0.7.
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

fn base() -> RunRecord {
    policy::parse_records(BASE.lines().next().unwrap())
        .unwrap()
        .remove(0)
}

/// A run of `version` (its temperature), `slice` by tag or by prompt, `ttft_ms`, at `at_s`.
fn run(
    seed: u64,
    temperature: f64,
    prompt: &str,
    tag: Option<&str>,
    ttft_ms: f64,
    at_s: f64,
) -> RunRecord {
    let mut r = base();
    r.config.seed = seed;
    r.config.policy.temperature = temperature;
    r.config.prompt = prompt.into();
    r.rendered_prompt = prompt.into();
    r.ttft_us = ttft_ms * 1e3;
    r.token_latencies_us = (0..r.steps.len())
        .map(|i| 500.0 + 10.0 * (seed % 7) as f64 + i as f64)
        .collect();
    r.tags.insert("at_s".into(), at_s.to_string());
    if let Some(slice) = tag {
        r.tags.insert("slice".into(), slice.into());
    }
    r.seal();
    r
}

fn line(r: &RunRecord) -> String {
    serde_json::to_string(r).unwrap()
}

fn outcome(r: &RunRecord, accepted: bool, at_s: f64) -> String {
    format!(
        r#"{{"run_id":"{}","outcome":"{}","at_s":{at_s}}}"#,
        r.run_id.as_deref().unwrap(),
        if accepted { "accepted" } else { "rejected" }
    )
}

fn nearest_rank(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((p * values.len() as f64).ceil() as usize).max(1) - 1]
}

fn observe(runs: &str, outcomes: &str, baseline: Option<&str>) -> Result<Report, ObserveError> {
    let outcomes = Outcomes::parse(outcomes, f64::INFINITY)?;
    let mut o = Observation::new(&FirstWord, outcomes, None);
    o.add_lines("runs.jsonl", runs);
    o.finish(baseline, &DriftRule::default())
}

#[test]
fn figures_equal_a_direct_computation_per_version_and_slice() {
    let (mut runs, mut outcomes) = (Vec::new(), Vec::new());
    let mut ttft = (Vec::new(), Vec::new());
    let mut accepted = (0, 0);
    for i in 0..150u64 {
        let eu = i % 5 == 0;
        let ms = 10.0 + ((i * 37) % 101) as f64;
        let r = run(
            i,
            0.7,
            if eu {
                "Hautatu taula"
            } else {
                "Insert a table"
            },
            None,
            ms,
            i as f64,
        );
        // Every third run has no outcome yet.
        if i % 3 != 0 {
            let ok = i % 4 != 0;
            outcomes.push(outcome(&r, ok, 1000.0 + i as f64));
            if eu {
                accepted.1 += u64::from(ok)
            } else {
                accepted.0 += u64::from(ok)
            }
        }
        if eu {
            ttft.1.push(ms)
        } else {
            ttft.0.push(ms)
        }
        runs.push(line(&r));
    }
    let report = observe(&runs.join("\n"), &outcomes.join("\n"), None).unwrap();
    assert_eq!(
        (report.runs, report.rejected_count, report.versions.len()),
        (150, 0, 1)
    );
    let v = &report.versions[0];
    assert_eq!(v.version_id, base().computed_version_id());
    let slices: Vec<&str> = v.slices.iter().map(|s| s.slice.as_str()).collect();
    assert_eq!(slices, ["en", "eu"]);
    for (s, (values, ok)) in v
        .slices
        .iter()
        .zip([(&mut ttft.0, accepted.0), (&mut ttft.1, accepted.1)])
    {
        let summary = &s.summary;
        assert_eq!(summary.runs, values.len() as u64);
        assert_eq!(summary.ttft_p99_ms, Some(nearest_rank(values, 0.99)));
        assert_eq!(
            summary.health.ttft_p50_ms.unwrap().value,
            nearest_rank(values, 0.5)
        );
        assert!(summary.health.ttft_p99_ms.unwrap().exact);
        let joined = summary.outcomes_joined;
        assert_eq!(summary.outcome_rate, Some(ok as f64 / joined as f64));
        assert_eq!(summary.outcomes.unjoined, summary.runs - joined);
        // Ages at the latest time seen (the last outcome, 1149 s): the oldest unjoined run is run 0 (en) or 15 (eu).
        let oldest = if s.slice == "en" {
            1149.0 - 3.0
        } else {
            1149.0
        };
        assert_eq!(
            summary.outcomes.oldest_unjoined_s,
            Some(oldest),
            "{}",
            s.slice
        );
        assert_eq!(summary.predictions.stop_reasons["max_tokens"], summary.runs);
        assert_eq!(summary.predictions.steps, 6 * summary.runs);
    }
    assert_eq!(v.summary.runs, 150);
    assert_eq!(v.summary.outcomes_joined, 100);

    // The rows in words: the version, then each slice, with the same figures.
    let rows = observe::table::rows(&report);
    let slices: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(slices, ["all", "en", "eu"]);
    let eu = &rows[2];
    assert_eq!(eu[2], ttft.1.len().to_string());
    assert_eq!(
        eu[3],
        format!(
            "{:.2} / {:.2}",
            nearest_rank(&mut ttft.1, 0.5),
            nearest_rank(&mut ttft.1, 0.99)
        )
    );
    let joined = v.slices[1].summary.outcomes_joined;
    assert!(eu[7].starts_with(&format!(
        "{:.1} % (",
        100.0 * accepted.1 as f64 / joined as f64
    )));
    assert_eq!(eu[8], format!("{joined} of {}", ttft.1.len()));
}

#[test]
fn bad_lines_are_rejected_by_line_and_reason_never_dropped() {
    let good = run(1, 0.7, "Insert", None, 20.0, 1.0);
    let mut altered = serde_json::to_value(&good).unwrap();
    altered["steps"][0]["token"] = serde_json::json!(5);
    let mut renamed = serde_json::to_value(&good).unwrap();
    renamed["run_id"] = serde_json::json!("0000000000000000");
    let text = [
        line(&good),
        "{not json".into(),
        altered.to_string(),
        renamed.to_string(),
        String::new(),
        line(&run(2, 0.7, "Insert", None, 30.0, 2.0)),
    ]
    .join("\n");
    let report = observe(&text, "", None).unwrap();
    assert_eq!((report.runs, report.rejected_count), (2, 3));
    let lines: Vec<usize> = report.rejected.iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 3, 4]);
    assert!(
        report.rejected[1]
            .reason
            .starts_with("altered after it was written"),
        "{:?}",
        report.rejected[1]
    );
    assert!(
        report.rejected[2]
            .reason
            .contains("run_id is \"0000000000000000\""),
        "{:?}",
        report.rejected[2]
    );
    assert!(report.rejected.iter().all(|r| r.source == "runs.jsonl"));
}

#[test]
fn the_join_counts_missing_late_and_unmatched_outcomes_and_names_a_duplicate() {
    let a = run(1, 0.7, "Insert", None, 20.0, 10.0);
    let b = run(2, 0.7, "Insert", None, 20.0, 11.0);
    let ghost = run(3, 0.7, "Insert", None, 20.0, 12.0);
    let outcomes = [
        outcome(&a, true, 50.0),
        outcome(&b, false, 500.0),
        outcome(&ghost, true, 60.0),
    ]
    .join("\n");
    let parsed = Outcomes::parse(&outcomes, 100.0).unwrap();
    let mut o = Observation::new(&FirstWord, parsed, Some(100.0));
    o.add_lines("runs", &[line(&a), line(&b), line(&a)].join("\n"));
    let report = o.finish(None, &DriftRule::default()).unwrap();
    let s = &report.versions[0].summary.outcomes;
    // a logged twice is one run that meets its outcome once; b's outcome not yet known.
    assert_eq!((s.joined, s.accepted, s.unjoined), (1, 1, 1));
    assert_eq!((report.runs, report.duplicate_count), (2, 1));
    assert_eq!(s.oldest_unjoined_s, Some(100.0 - 11.0));
    assert_eq!((report.outcomes_late, report.outcomes_unmatched), (1, 1));

    let dup = format!("{outcomes}\n{}", outcome(&a, false, 70.0));
    assert_eq!(
        Outcomes::parse(&dup, f64::INFINITY).unwrap_err(),
        ObserveError::DuplicateOutcome {
            run_id: a.run_id.clone().unwrap(),
            first: 1,
            again: 4
        }
    );
}

/// The chapter's failure: a candidate better on the aggregate and worse on the rare slice is
/// stopped by the slice, and the verdict names both and the rollback.
#[test]
fn a_candidate_that_hides_a_worse_rare_slice_in_the_aggregate_is_stopped() {
    let (mut runs, mut outcomes) = (Vec::new(), Vec::new());
    // (temperature, en accepted of 400, eu accepted of 100)
    for (version, t, en_ok, eu_ok) in [(0u64, 0.7, 280, 80), (1, 0.8, 340, 60)] {
        for i in 0..500u64 {
            let eu = i >= 400;
            let seed = version * 10_000 + i;
            let r = run(
                seed,
                t,
                if eu { "Hautatu" } else { "Insert" },
                eu.then_some("eu"),
                20.0,
                i as f64,
            );
            let ok = if eu { i - 400 < eu_ok } else { i < en_ok };
            outcomes.push(outcome(&r, ok, 900.0));
            runs.push(line(&r));
        }
    }
    let baseline = run(0, 0.7, "x", None, 1.0, 0.0).version_id.unwrap();
    let report = observe(&runs.join("\n"), &outcomes.join("\n"), Some(&baseline)).unwrap();
    let drift = report.drift.as_ref().unwrap();
    assert_eq!(drift.baseline, baseline);
    let c = &drift.candidates[0];
    // Aggregate 360/500 → 400/500: +8 points; eu 80 → 60 of 100: −20 points.
    assert!((c.aggregate.outcome_rate_diff.unwrap() - 0.08).abs() < 1e-12);
    let eu = c.slices.iter().find(|s| s.slice == "eu").unwrap();
    assert!((eu.outcome_rate_diff.unwrap() + 0.2).abs() < 1e-12);
    assert!(c.aggregate.breaches.is_empty());
    assert_eq!(eu.breaches.len(), 1);
    assert_eq!(c.verdict.decision, "stop");
    assert_eq!(c.verdict.rollback_to.as_deref(), Some(baseline.as_str()));
    assert!(
        c.verdict
            .words
            .starts_with("outcome rate aggregate +8.0, en +15.0, eu −20.0 points: stop."),
        "{}",
        c.verdict.words
    );
    assert!(c
        .verdict
        .words
        .contains(&format!("Roll back to {baseline}")));
    assert!(report.verdict.unwrap().starts_with(&c.version_id));

    // Against itself nothing moves; a baseline that was never observed is named.
    assert!(matches!(
        observe(&runs.join("\n"), "", Some("ffffffffffff")),
        Err(ObserveError::UnknownBaseline(..))
    ));
}

/// p99 TTFT is judged only with enough runs a side, and then a rise past the line stops.
#[test]
fn a_slower_tail_stops_only_when_there_are_runs_enough_to_have_one() {
    let lines = |n: u64| -> (String, String) {
        let mut runs = Vec::new();
        for (version, t, ms) in [(0u64, 0.7, 20.0), (1, 0.8, 30.0)] {
            for i in 0..n {
                runs.push(line(&run(
                    version * 10_000 + i,
                    t,
                    "Insert",
                    None,
                    ms + (i % 10) as f64,
                    i as f64,
                )));
            }
        }
        (
            runs.join("\n"),
            run(0, 0.7, "x", None, 1.0, 0.0).version_id.unwrap(),
        )
    };
    let (few, baseline) = lines(99);
    let report = observe(&few, "", Some(&baseline)).unwrap();
    let c = &report.drift.unwrap().candidates[0];
    // Only the watched TTFT shift: the tail of 99 runs is not judged.
    let stopping: Vec<_> = c.aggregate.breaches.iter().filter(|b| b.stops).collect();
    assert!(stopping.is_empty(), "{stopping:?}");
    assert_eq!(c.aggregate.breaches[0].detector, "distribution shift");
    assert_eq!(c.verdict.decision, "insufficient-data");

    let (enough, _) = lines(100);
    let report = observe(&enough, "", Some(&baseline)).unwrap();
    let c = &report.drift.unwrap().candidates[0];
    // p99 of 100 runs is the 99th value: 29 ms against 39 ms.
    assert_eq!(
        (c.aggregate.baseline_ttft_p99_ms, c.aggregate.ttft_p99_ms),
        (Some(29.0), Some(39.0))
    );
    assert_eq!(c.verdict.decision, "stop");
    let p99 = c.aggregate.breaches.iter().find(|b| b.stops).unwrap();
    assert_eq!(
        (p99.detector.as_str(), p99.owner.as_str()),
        ("p99 TTFT", "serving on-call")
    );
}

/// Each run once: the same lines from two sources, or one line twice, are counted once and
/// each repeat named with both places; the same run id with other timings is rejected.
#[test]
fn a_run_read_twice_is_counted_once_and_named() {
    let a = run(1, 0.7, "Insert", None, 20.0, 10.0);
    let b = run(2, 0.7, "Insert", None, 30.0, 11.0);
    let outcomes = Outcomes::parse(&outcome(&a, true, 50.0), f64::INFINITY).unwrap();
    let mut o = Observation::new(&FirstWord, outcomes, None);
    let text = [line(&a), line(&b)].join("\n");
    o.add_lines("runs.jsonl", &text);
    o.add_lines("copy.jsonl", &text);
    o.add_lines("again.jsonl", &line(&a));
    let mut slower = a.clone();
    slower.ttft_us += 1.0;
    o.add_lines("edited.jsonl", &line(&slower));
    let report = o.finish(None, &DriftRule::default()).unwrap();
    let summary = &report.versions[0].summary;
    assert_eq!((report.runs, summary.outcomes.joined), (2, 1));
    assert_eq!(report.duplicate_count, 3);
    let d = &report.duplicates[2];
    assert_eq!(
        (
            d.source.as_str(),
            d.line,
            d.first_source.as_str(),
            d.first_line
        ),
        ("again.jsonl", 1, "runs.jsonl", 1)
    );
    assert_eq!(d.run_id, a.run_id.clone().unwrap());
    assert_eq!(report.rejected_count, 1);
    assert!(
        report.rejected[0].reason.contains("other timings")
            && report.rejected[0].reason.contains("runs.jsonl line 1"),
        "{:?}",
        report.rejected[0]
    );
    // The p99 time to first token is over the two runs, not four.
    let alone = observe(&text, "", None).unwrap();
    assert_eq!(alone.versions[0].summary.health, summary.health);
}

/// Timings, which the digest does not cover, are bounded where the record is read: a line
/// with a negative, huge or far-off time is rejected naming the field and the value.
#[test]
fn a_timing_out_of_range_is_rejected_with_its_field() {
    let mut lines = Vec::new();
    for (field, value) in [
        ("ttft_us", -1e300),
        ("ttft_us", -5.0),
        ("ttft_us", 1e308),
        ("token_latencies_us[0]", -1.0),
        ("step 0's model_us", 9e10),
        ("step 1's policy_us", -0.5),
    ] {
        let mut r = run(lines.len() as u64, 0.7, "Insert", None, 20.0, 10.0);
        match field {
            "ttft_us" => r.ttft_us = value,
            "token_latencies_us[0]" => r.token_latencies_us[0] = value,
            "step 0's model_us" => r.steps[0].model_us = value,
            _ => r.steps[1].policy_us = value,
        }
        lines.push((field, value, line(&r)));
    }
    let text: Vec<&str> = lines.iter().map(|(_, _, l)| l.as_str()).collect();
    let report = observe(&text.join("\n"), "", None).unwrap();
    assert_eq!(
        (report.runs, report.rejected_count),
        (0, lines.len() as u64)
    );
    for (rejected, (field, value, _)) in report.rejected.iter().zip(&lines) {
        let value = policy::Shortest(*value).to_string();
        assert!(
            rejected.reason.contains(field) && rejected.reason.contains(&value),
            "{field} {value}: {}",
            rejected.reason
        );
    }
}

/// `--as-of` inside the runs' span leaves out the runs after it, so no age is negative; a
/// cut-off before the first run is refused.
#[test]
fn the_cut_off_leaves_out_later_runs_and_refuses_a_time_before_the_first() {
    let runs: Vec<RunRecord> = (0..10)
        .map(|i| run(i, 0.7, "Insert", None, 20.0 + i as f64, 10.0 * i as f64))
        .collect();
    let text = runs.iter().map(line).collect::<Vec<_>>().join("\n");
    let mut o = Observation::new(&FirstWord, Outcomes::default(), Some(45.0));
    o.add_lines("runs", &text);
    let report = o.finish(None, &DriftRule::default()).unwrap();
    // Runs at 0, 10, 20, 30 and 40 s were known at 45 s.
    assert_eq!((report.runs, report.runs_after_as_of), (5, 5));
    let outcomes = &report.versions[0].summary.outcomes;
    assert_eq!(outcomes.newest_unjoined_s, Some(5.0));
    assert_eq!(outcomes.oldest_unjoined_s, Some(45.0));
    for before in [-1.0, 0.0 - 1e-9] {
        let mut o = Observation::new(&FirstWord, Outcomes::default(), Some(before));
        o.add_lines("runs", &text);
        assert_eq!(
            o.finish(None, &DriftRule::default()).unwrap_err(),
            ObserveError::AsOfBeforeRuns {
                as_of_s: before,
                first_s: 0.0
            }
        );
    }
}
