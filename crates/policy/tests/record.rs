//! Run records that lie: every field replay regenerates is compared exactly, an edited
//! record with a digest is reported as altered, records without one (written before
//! digests) still replay, and every JSON layout of records reads back.

mod support;

use policy::{
    generate::GenerateError, parse_records, record::compare, replay, BackendKind, Policy,
    RecordError, ReplayReport, RunRecord, StopConfig, StopReason,
};
use support::{config, run, sampled, Bytes, Ticks, Toy};

/// A sampled run of 16 steps on the toy model (no end of sequence, so it runs to the end).
fn record() -> RunRecord {
    let policy = Policy {
        temperature: 0.9,
        top_k: 6,
        ..Policy::default()
    };
    run(
        &mut Toy::new(64),
        &config(policy, 16, StopConfig::default()),
    )
}

fn replayed(record: &RunRecord) -> Result<ReplayReport, GenerateError> {
    replay(record, &mut Toy::new(64), &Bytes, &mut Ticks(0.0))
}

/// The float after `x`, the smallest change a record can carry.
fn next(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

type Tamper = fn(&mut RunRecord);

/// (what is changed, the field and step a replay must name).
fn tampers() -> Vec<(Tamper, &'static str, usize)> {
    vec![
        (|r| r.steps[3].text.push('z'), "text", 3),
        (
            |r| r.steps[3].token = (r.steps[3].token + 1) % 8,
            "token",
            3,
        ),
        (|r| r.steps[5].prob = next(r.steps[5].prob), "prob", 5),
        (
            |r| r.steps[5].logprob = next(r.steps[5].logprob),
            "logprob",
            5,
        ),
        (|r| r.steps[6].draw = r.steps[6].draw.map(next), "draw", 6),
        (
            |r| r.steps[7].entropy = next(r.steps[7].entropy),
            "entropy",
            7,
        ),
        (|r| r.steps[8].survivors += 1, "survivors", 8),
        (|r| r.steps[2].top.truncate(1), "top", 2),
        (|r| r.steps[2].top[0].text = "?".into(), "top", 2),
        (
            |r| r.steps[9].top[1].prob = next(r.steps[9].top[1].prob),
            "top",
            9,
        ),
        (|r| r.prompt_tokens[0] = 3, "prompt_tokens", 0),
        (|r| r.rendered_prompt.push(' '), "rendered_prompt", 0),
        (
            |r| r.policy_version = "policy-0".into(),
            "policy_version",
            0,
        ),
        (|r| r.output_text.push('x'), "output_text", 16),
        (|r| r.steps.truncate(15), "steps", 15),
    ]
}

#[test]
fn a_record_replays_identically_and_its_digest_matches() {
    let record = record();
    assert_eq!(record.steps.len(), 16);
    assert_eq!(record.stop_reason, StopReason::MaxTokens);
    assert_eq!(record.record_digest, Some(record.content_digest()));
    assert_eq!(record.check(), Ok(()));
    assert_eq!(
        replayed(&record).unwrap(),
        ReplayReport::Identical { steps: 16 }
    );
}

#[test]
fn every_edited_field_is_named_with_its_step() {
    let original = record();
    for (tamper, field, step) in tampers() {
        // Without a digest, as a record written before digests: the comparison finds it.
        let mut edited = original.clone();
        // As a record made before digests and ids existed.
        edited.record_digest = None;
        edited.run_id = None;
        edited.version_id = None;
        tamper(&mut edited);
        let report = compare(&edited, &original);
        match &report {
            ReplayReport::Differs {
                step: s,
                field: f,
                detail,
                ..
            } => {
                assert_eq!((f.as_str(), *s), (field, step), "{detail}");
                assert!(field == "steps" || detail.starts_with(field), "{detail}");
                if field == "top" {
                    assert!(detail.starts_with("top alternative "), "{detail}");
                }
                assert!(!detail.contains("Some("), "{detail}");
            }
            other => panic!("{field}: expected a difference, got {other:?}"),
        }
        // A replay finds the same, or refuses a record no run could write, naming the field.
        match replayed(&edited) {
            Ok(r) => assert_eq!(r, report),
            Err(GenerateError::Record(e)) => assert!(e.to_string().contains(field), "{e}"),
            Err(e) => panic!("{field}: {e}"),
        }

        // With the digest written at generation time, the edit is an alteration, found
        // before anything is regenerated.
        let mut edited = original.clone();
        tamper(&mut edited);
        let altered = ReplayReport::Altered {
            expected: original.record_digest.clone().unwrap(),
            found: edited.content_digest(),
        };
        assert_eq!(compare(&edited, &original), altered, "{field}");
        assert_eq!(replayed(&edited).unwrap(), altered, "{field}");
    }
}

#[test]
fn a_record_no_run_could_write_is_refused_with_the_field() {
    let original = record();
    let cases: [(Tamper, &str); 7] = [
        (
            |r| r.steps[4].step = 5,
            "step 4 of the record is numbered 5",
        ),
        (
            |r| r.stop_reason = StopReason::Eos,
            "the record says it stopped because the model chose the end-of-sequence token, \
             but its last token is",
        ),
        (
            |r| r.steps[2].prob = 1.5,
            "step 2's prob is 1.5, but it must be greater than 0 and at most 1",
        ),
        (
            |r| r.steps[2].draw = None,
            "step 2 has no draw, but the policy samples",
        ),
        (
            |r| r.config.max_tokens = 3,
            "the record holds 16 steps, more than its max_tokens of 3",
        ),
        (
            |r| r.prompt_tokens.clear(),
            "the record's prompt_tokens is empty",
        ),
        (
            |r| r.record_digest = Some("sha256:xyz".into()),
            "record_digest \"sha256:xyz\" is not",
        ),
    ];
    for (tamper, phrase) in cases {
        let mut edited = original.clone();
        tamper(&mut edited);
        let digest_format = edited.record_digest != original.record_digest;
        if !digest_format {
            // As a record made before digests and ids existed.
            edited.record_digest = None;
            edited.run_id = None;
            edited.version_id = None;
        }
        let err = edited.check().unwrap_err().to_string();
        assert!(err.contains(phrase), "{err:?} lacks {phrase:?}");
        if !digest_format {
            let err = replayed(&edited).unwrap_err();
            assert!(matches!(err, GenerateError::Record(_)), "{err}");
        }
    }
    // A bad step number is also what the comparison names first.
    let mut edited = original.clone();
    edited.steps[4].step = 5;
    // As a record made before digests and ids existed.
    edited.record_digest = None;
    edited.run_id = None;
    edited.version_id = None;
    assert!(matches!(
        compare(&edited, &original),
        ReplayReport::Differs { step: 4, ref field, .. } if field == "step"
    ));
}

#[test]
fn timings_are_neither_compared_nor_digested() {
    let mut record = record();
    record.ttft_us = 1e9;
    record.token_latencies_us.clear();
    record.steps[0].model_us = 123.0;
    record.steps[1].policy_us = 0.5;
    assert_eq!(record.record_digest, Some(record.content_digest()));
    assert_eq!(
        replayed(&record).unwrap(),
        ReplayReport::Identical { steps: 16 }
    );
}

#[test]
fn a_record_written_before_digests_still_loads_and_replays() {
    let record = record();
    let mut value = serde_json::to_value(&record).unwrap();
    let object = value.as_object_mut().unwrap();
    object.remove("record_digest");
    object.remove("stop_string");
    let old = parse_records(&value.to_string()).unwrap().remove(0);
    assert_eq!(old.record_digest, None);
    assert_eq!(
        replayed(&old).unwrap(),
        ReplayReport::Identical { steps: 16 }
    );
}

#[test]
fn the_stop_string_that_fired_is_recorded_and_compared() {
    let stop = StopConfig {
        strings: vec!["zz".into(), "b".into(), "c".into()],
        tokens: vec![],
    };
    let policy = Policy {
        min_new_tokens: 0,
        ..sampled()
    };
    let record = run(&mut Toy::new(64), &config(policy, 40, stop));
    assert_eq!(record.stop_reason, StopReason::StopSequence);
    let fired = record.stop_string.clone().unwrap();
    assert!(fired == "b" || fired == "c", "{fired}");
    assert_eq!(
        replayed(&record).unwrap(),
        ReplayReport::Identical {
            steps: record.steps.len()
        }
    );
    let mut edited = record.clone();
    edited.stop_string = Some(if fired == "b" { "c" } else { "b" }.into());
    // As a record made before digests and ids existed.
    edited.record_digest = None;
    edited.run_id = None;
    edited.version_id = None;
    assert!(matches!(
        compare(&edited, &record),
        ReplayReport::Differs { ref field, .. } if field == "stop_string"
    ));
    edited.stop_string = Some("not listed".into());
    assert!(edited
        .check()
        .unwrap_err()
        .to_string()
        .contains("\"not listed\", which is not one of its stop strings"));
}

#[test]
fn one_line_pretty_and_jsonl_records_all_read_back() {
    let a = record();
    let b = run(
        &mut Toy::new(64),
        &config(sampled(), 4, StopConfig::default()),
    );
    let pretty = serde_json::to_string_pretty(&a).unwrap();
    assert!(pretty.lines().count() > 100);
    assert_eq!(parse_records(&pretty).unwrap(), std::slice::from_ref(&a));
    let line = |r: &RunRecord| serde_json::to_string(r).unwrap();
    let jsonl = format!("{}\n{}\n\n{}\n", line(&a), line(&b), line(&a));
    assert_eq!(
        parse_records(&jsonl).unwrap(),
        [a.clone(), b.clone(), a.clone()]
    );
    let mixed = format!("{pretty}\n{}", line(&b));
    assert_eq!(parse_records(&mixed).unwrap(), [a.clone(), b.clone()]);
    for r in parse_records(&mixed).unwrap() {
        assert_eq!(r.alteration(), None);
    }

    assert_eq!(parse_records(" \n\n"), Err(RecordError::Empty));
    let broken = format!("{}\n{{\"app_version\": 3}}\n", line(&a));
    match parse_records(&broken).unwrap_err() {
        RecordError::Json { record, line, .. } => assert_eq!((record, line), (2, 2)),
        other => panic!("{other}"),
    }
    let err = parse_records(&format!("{}\n[1, 2]", line(&a)))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("run record 2 (line 2, column "), "{err}");
}

#[test]
fn an_absurd_template_is_refused_before_it_is_rendered() {
    // A million slots times a megabyte of prompt would be a terabyte: refused for its
    // slots, before anything is rendered.
    let mut config = config(Policy::default(), 4, StopConfig::default());
    config.prompt_template = "{prompt}".repeat(1 << 20);
    config.prompt = "a".repeat(1 << 20);
    let generated = |config: &policy::RunConfig| {
        policy::generate(
            &mut Toy::new(64),
            &Bytes,
            config,
            &mut Ticks(0.0),
            &mut policy::generate::Unobserved,
        )
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        generated(&config),
        "the prompt template holds {prompt} 1048576 times: it must hold it exactly once, \
         where the prompt goes"
    );
    // One slot in a megabyte of template, and a megabyte of prompt: measured, not rendered.
    let one_slot = policy::RunConfig {
        prompt_template: "x".repeat(1 << 20) + "{prompt}",
        ..config.clone()
    };
    assert_eq!(
        generated(&one_slot),
        "the prompt in its template would be 2097152 bytes, more than a context of 64 \
         tokens can hold: at most 64 bytes, since no token is longer than 1 bytes"
    );
    // The same in a record to replay: its check compares the recorded rendering with the
    // template piece by piece, without rendering, and refuses it.
    let mut record = record();
    record.config = config;
    // As a record made before digests and ids existed.
    record.record_digest = None;
    record.run_id = None;
    record.version_id = None;
    let err = replayed(&record).unwrap_err().to_string();
    assert!(
        err.contains("rendered_prompt is \"a b\", which is not"),
        "{err}"
    );
}

#[test]
fn a_record_holds_no_null() {
    // Greedy (no draws), no end of sequence, no fallback: every absent value is left out.
    let greedy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    let record = run(&mut Toy::new(64), &config(greedy, 6, StopConfig::default()));
    assert!(record.steps.iter().all(|s| s.draw.is_none()));
    let line = serde_json::to_string(&record).unwrap();
    assert!(!line.contains("null"), "{line}");
    assert_eq!(parse_records(&line).unwrap(), [record]);
}

#[test]
fn the_digest_is_pinned() {
    // The canonical form is part of the record format: a change to it would report every
    // record written before as altered. Change this value only with a new DIGEST_DOMAIN,
    // or when the run itself changes (policy-2 changed its version and the last bits of
    // its numbers).
    let record = record();
    assert_eq!(
        record.record_digest.as_deref(),
        Some("sha256:383fac70226e9a4aa87436d6ef8283fc5e496a1f202f62d44231b6c7d28b680d")
    );
    // Without the model's own distribution (as records were before it was recorded) the
    // same run hashes as it did then: absent fields are left out of the canonical form.
    let mut before = record.clone();
    for step in &mut before.steps {
        step.model_prob = None;
        step.model_logprob = None;
        step.model_top.clear();
    }
    assert_eq!(
        before.content_digest(),
        "sha256:8805de55d76ea67bac56acf12aa5dbb5fb166ecb1cd0aef783133cb74fa8002f"
    );
}

/// Run records as they were written before the record's backend became an enum: the CLI's
/// `cpu-reference` record of the shipped model (from `decode-lab generate --json`), and
/// toy records on `webgpu` and fallen back to `cpu-reference` mid-run. Each must still
/// load, match its digest and write its backend back as it was written.
#[test]
fn records_written_before_the_backend_kind_still_load_and_match_their_digests() {
    let text = include_str!("fixtures/records-before-backend-kind.jsonl");
    let records = parse_records(text).unwrap();
    let kinds: Vec<BackendKind> = records.iter().map(|r| r.backend.name).collect();
    assert_eq!(
        kinds,
        [
            BackendKind::CpuReference,
            BackendKind::CpuReference,
            BackendKind::WebGpu,
            BackendKind::CpuReference
        ]
    );
    for (record, line) in records.iter().zip(text.lines()) {
        assert_eq!(record.alteration(), None, "{line}");
        assert!(record.record_digest.is_some(), "{line}");
        let written: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            serde_json::to_value(&record.backend).unwrap(),
            written["backend"]
        );
    }
}

/// Run and version ids: written with the record, computed on load for records made before
/// them, checked against the content, and the version fixed by exactly its key.
#[test]
fn records_written_before_ids_get_them_on_load() {
    let text = include_str!("fixtures/records-before-backend-kind.jsonl");
    for (record, line) in parse_records(text).unwrap().iter().zip(text.lines()) {
        assert!(!line.contains("run_id") && !line.contains("version_id"));
        let digest = record.record_digest.as_deref().unwrap();
        assert_eq!(record.run_id.as_deref(), Some(&digest[7..23]), "{line}");
        assert_eq!(
            record.version_id.as_deref(),
            Some(policy::VersionKey::of(record).id().as_str())
        );
        record.check().unwrap();
    }
}

#[test]
fn the_ids_are_pinned_and_an_edited_one_is_named() {
    let record = record();
    // The run id is the digest's first 16 hex digits (see `the_digest_is_pinned`); the
    // version id's canonical form is part of the record format like the digest's.
    assert_eq!(record.run_id.as_deref(), Some("383fac70226e9a4a"));
    assert_eq!(record.version_id.as_deref(), Some(VERSION_ID));
    for (field, edit) in [
        (
            "run_id",
            (|r| r.run_id = Some("0123456789abcdef".into())) as Tamper,
        ),
        ("version_id", |r| r.version_id = Some("0123456789ab".into())),
    ] {
        let mut edited = record.clone();
        edit(&mut edited);
        let err = edited.check().unwrap_err().to_string();
        let computed = if field == "run_id" {
            "383fac70226e9a4a"
        } else {
            VERSION_ID
        };
        assert_eq!(
            err,
            format!(
                "the record's {field} is {:?}, but its content gives {computed}",
                if field == "run_id" {
                    "0123456789abcdef"
                } else {
                    "0123456789ab"
                }
            )
        );
    }
}

const VERSION_ID: &str = "fb82bf0cb76c";

#[test]
fn tags_and_precision_are_sealed_into_the_digest_and_ids() {
    let plain = record();
    let tags = policy::parse_tags(&["slice=eu", "tenant=course-a"]).unwrap();
    let tagged = plain.clone().labelled(None, tags.clone());
    // Another run for telemetry, the same version.
    assert_ne!(tagged.run_id, plain.run_id);
    assert_eq!(tagged.version_id, plain.version_id);
    assert_eq!(tagged.alteration(), None);
    tagged.check().unwrap();
    let line = serde_json::to_string(&tagged).unwrap();
    assert!(
        line.contains(r#""tags":{"slice":"eu","tenant":"course-a"}"#),
        "{line}"
    );
    assert_eq!(parse_records(&line).unwrap(), std::slice::from_ref(&tagged));
    // Moving a run to another slice after the fact is an edit the digest catches.
    let mut moved = tagged.clone();
    moved.tags.insert("slice".into(), "en".into());
    assert!(matches!(
        moved.alteration(),
        Some(ReplayReport::Altered { .. })
    ));
    // The weights' precision is part of the version.
    let int8 = plain.clone().labelled(Some(policy::Precision::Int8), tags);
    assert_ne!(int8.version_id, tagged.version_id);
    assert_ne!(int8.record_digest, tagged.record_digest);
    // The prompt and the seed are the run's own: the same version, another run.
    let mut other = config(
        Policy {
            temperature: 0.9,
            top_k: 6,
            ..Policy::default()
        },
        16,
        StopConfig::default(),
    );
    other.prompt = "c".into();
    other.seed = 8;
    let again = run(&mut Toy::new(64), &other);
    assert_eq!(again.version_id, plain.version_id);
    assert_ne!(again.run_id, plain.run_id);
}
