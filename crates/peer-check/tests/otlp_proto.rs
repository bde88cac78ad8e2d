//! The spans of `observe::otlp`, for runs with and without outcomes, decode with the
//! official OpenTelemetry protobuf definitions (`opentelemetry-proto` 1.45.2, through
//! `otlp_check.py`), after the OTLP/JSON rules protobuf's reader leaves unchecked; each
//! attribute decodes with the type the pinned conventions give it.

use observe::otlp::{self, AttrType, SCORE_VALUE, SEMCONV};
use observe::{Outcome, Verdict};
use policy::RunRecord;
use serde_json::Value;

const BASE: &str = include_str!("../../policy/tests/fixtures/records-before-backend-kind.jsonl");

fn run(i: u64) -> RunRecord {
    let mut r = policy::parse_records(BASE.lines().next().unwrap())
        .unwrap()
        .remove(0);
    r.config.seed = i;
    r.config.policy.top_k = 5;
    r.config.stop.strings = vec!["\n".into()];
    r.tags
        .insert("at_s".into(), format!("{}", 1_700_000_000 + i));
    r.seal();
    r
}

fn decoded(request: &Value) -> Value {
    let out = peer_check::python("otlp_check.py", &request.to_string());
    assert!(
        out.status.success(),
        "otlp_check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The protobuf `AnyValue` field a type decodes to.
fn field(kind: AttrType) -> &'static str {
    match kind {
        AttrType::String => "string_value",
        AttrType::Int => "int_value",
        AttrType::Double => "double_value",
        AttrType::StringArray => "array_value",
    }
}

#[test]
fn the_spans_decode_with_the_official_protobuf_definitions() {
    let runs: Vec<RunRecord> = (1..=3).map(run).collect();
    let outcome = Outcome {
        run_id: runs[0].run_id.clone().unwrap(),
        outcome: Verdict::Rejected,
        at_s: 1_700_000_500.0,
    };
    let spans = runs
        .iter()
        .map(|r| otlp::span(r, "en", &[&outcome]).unwrap())
        .collect();
    let request = otlp::request(spans, "0.1.0");
    let answer = decoded(&request);
    let spans = answer["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 3);
    for (span, r) in spans.iter().zip(&runs) {
        assert_eq!(span["span_id"], r.run_id.clone().unwrap());
        let digest = r.record_digest.as_deref().unwrap();
        assert_eq!(span["trace_id"], &digest["sha256:".len()..][..32]);
        assert_eq!(span["kind"], 1);
        assert_eq!(span["schema_url"], otlp::SCHEMA_URL);
        assert_eq!(span["name"], format!("text_completion {}", r.model.name));
        for (key, kind) in span["attributes"].as_object().unwrap() {
            if key.starts_with(otlp::PRODUCT_PREFIX) {
                continue;
            }
            let declared = SEMCONV
                .iter()
                .find(|(name, _)| name == key)
                .unwrap_or_else(|| panic!("{key} is not an attribute of the conventions"));
            assert_eq!(kind, field(declared.1), "{key}");
        }
    }
    let events = spans[0]["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["name"], "gen_ai.evaluation.result");
    assert_eq!(events[0]["attributes"][SCORE_VALUE.0], "double_value");
    assert!(spans[1]["events"].as_array().unwrap().is_empty());
}

#[test]
fn a_hex_id_of_the_wrong_length_is_refused() {
    let mut request = otlp::request(vec![otlp::span(&run(1), "en", &[]).unwrap()], "0.1.0");
    request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "abcd".into();
    let out = peer_check::python("otlp_check.py", &request.to_string());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a nonzero hex id of 16 digits"));
}
