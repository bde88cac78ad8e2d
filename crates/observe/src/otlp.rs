//! Run records as OpenTelemetry spans, in OTLP/JSON: one span per run named and dressed by
//! the GenAI semantic conventions, and one `gen_ai.evaluation.result` event per outcome
//! joined to it, so that the tools teams already trace with (a Collector, Jaeger, Langfuse,
//! Arize Phoenix, MLflow) read the lab's runs.
//!
//! Pinned versions, both read from their repositories:
//! - the GenAI semantic conventions of `open-telemetry/semantic-conventions` **v1.41.0**
//!   (`model/gen-ai/registry.yaml`, `spans.yaml`, `events.yaml`), the last release of that
//!   repository to define them before they moved, in v1.42.0 (June 2026), to
//!   `open-telemetry/semantic-conventions-genai`, whose `main` names and types every attribute
//!   used here alike. Every one of them has "development" stability. [`SEMCONV`] lists the
//!   names and types used; the scope's `schemaUrl` names the version.
//! - the OTLP/JSON encoding of `open-telemetry/opentelemetry-proto` **v1.11.0**
//!   (`docs/specification.md`, "JSON Protobuf Encoding"): trace and span ids as hex, enums
//!   as integers, 64-bit integers as decimal strings, lowerCamelCase keys.
//!
//! Choices the conventions leave open, stated:
//! - The span's kind is `INTERNAL` (1): the model runs in the same process as its caller.
//! - The trace id is the first 32 hex digits of the record's SHA-256 digest, the span id
//!   its `run_id` (the first 16): a span is found from its run, and one run is one span
//!   however often it is exported.
//! - A record keeps durations, not wall-clock time: the span starts at the run's `at_s` tag
//!   (seconds, as `traffic` writes it), or at 0 without one, and lasts its time to first
//!   token plus its steps' latencies.
//! - `gen_ai.request.seed` is an int64: a seed past it (`--seed fresh` draws all 64 bits)
//!   is written as `decode_lab.seed`, in text, instead.
//! - Outcomes are span events (the conventions' events are log records; the span-event
//!   form carries the same name and attributes in a trace file): the evaluation is named
//!   `outcome`, its label `accepted` or `rejected`, its value 1 or 0.
//! - Everything else a record holds that a reader joins on goes under `decode_lab.`:
//!   `version_id`, the slice, the backend, the precision, the engine, the stop reason, each
//!   policy knob away from its default, and each tag.

use policy::{RunRecord, StopReason, KNOBS};
use serde_json::{json, Value};

use crate::{Outcome, Verdict};

/// The semantic conventions' version the spans follow.
pub const SEMCONV_VERSION: &str = "1.41.0";
/// The schema URL of that version, written as the scope's `schemaUrl`.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";
/// The instrumentation scope's name.
pub const SCOPE: &str = "decode-lab";
/// `gen_ai.provider.name`: the conventions' list names hosted providers; a local engine
/// takes a value of its own, as they allow.
pub const PROVIDER: &str = "decode-lab";
/// The prefix of every attribute that is the product's and not the conventions'.
pub const PRODUCT_PREFIX: &str = "decode_lab.";

/// An attribute value's type, as the conventions declare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrType {
    String,
    Int,
    Double,
    StringArray,
}

/// Every attribute of the conventions (v1.41.0) a span or an event here may carry, with
/// its declared type (`gen_ai.request.top_k` is a double there).
pub const SEMCONV: [(&str, AttrType); 18] = [
    ("gen_ai.operation.name", AttrType::String),
    ("gen_ai.provider.name", AttrType::String),
    ("gen_ai.request.model", AttrType::String),
    ("gen_ai.request.temperature", AttrType::Double),
    ("gen_ai.request.top_p", AttrType::Double),
    ("gen_ai.request.top_k", AttrType::Double),
    ("gen_ai.request.seed", AttrType::Int),
    ("gen_ai.request.max_tokens", AttrType::Int),
    ("gen_ai.request.stop_sequences", AttrType::StringArray),
    ("gen_ai.request.frequency_penalty", AttrType::Double),
    ("gen_ai.request.presence_penalty", AttrType::Double),
    ("gen_ai.response.id", AttrType::String),
    ("gen_ai.response.model", AttrType::String),
    ("gen_ai.response.finish_reasons", AttrType::StringArray),
    ("gen_ai.usage.input_tokens", AttrType::Int),
    ("gen_ai.usage.output_tokens", AttrType::Int),
    ("gen_ai.evaluation.name", AttrType::String),
    ("gen_ai.evaluation.score.label", AttrType::String),
];

/// `gen_ai.evaluation.score.value`, the one double of an event.
pub const SCORE_VALUE: (&str, AttrType) = ("gen_ai.evaluation.score.value", AttrType::Double);

/// OpenTelemetry's `SpanKind.INTERNAL`.
const KIND_INTERNAL: u64 = 1;

fn string(key: &str, value: impl Into<String>) -> Value {
    json!({ "key": key, "value": { "stringValue": value.into() } })
}

/// An int64 attribute (a decimal string in OTLP/JSON), or `None` for a value int64 cannot
/// hold.
fn int(key: &str, value: u64) -> Option<Value> {
    i64::try_from(value)
        .ok()
        .map(|v| json!({ "key": key, "value": { "intValue": v.to_string() } }))
}

fn double(key: &str, value: f64) -> Value {
    json!({ "key": key, "value": { "doubleValue": value } })
}

fn strings(key: &str, values: &[String]) -> Value {
    let values: Vec<Value> = values.iter().map(|v| json!({ "stringValue": v })).collect();
    json!({ "key": key, "value": { "arrayValue": { "values": values } } })
}

/// Nanoseconds since the epoch as OTLP/JSON writes a fixed64: a decimal string.
fn nanos(seconds: f64) -> String {
    let ns = (seconds.max(0.0) * 1e9).round();
    // Beyond u64 only for a clock past the year 2554: clamped.
    (if ns >= u64::MAX as f64 {
        u64::MAX
    } else {
        ns as u64
    })
    .to_string()
}

/// The finish reason as the OpenAI API (and so the conventions' examples) words it.
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        StopReason::Eos | StopReason::StopToken | StopReason::StopSequence => "stop",
        StopReason::Cancelled => "cancelled",
    }
}

/// The span of one run in `slice`, with an event for each of `outcomes` (those whose
/// `run_id` is the run's). A record without a digest or a run id (made before they existed
/// and not loaded through [`policy::parse_records`], which computes them) has no ids to
/// give: `None`.
pub fn span(record: &RunRecord, slice: &str, outcomes: &[&Outcome]) -> Option<Value> {
    let run_id = record.run_id.as_deref()?;
    let digest = record.record_digest.as_deref()?;
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let trace_id = hex.get(..32)?;
    let config = &record.config;
    let p = &config.policy;
    let start_s: f64 = record
        .tags
        .get("at_s")
        .and_then(|t| t.parse().ok())
        .filter(|t: &f64| t.is_finite())
        .unwrap_or(0.0);
    let took_us = record.ttft_us + record.token_latencies_us.iter().sum::<f64>();
    let model = record.model.name.as_str();
    let mut attributes = vec![
        string("gen_ai.operation.name", "text_completion"),
        string("gen_ai.provider.name", PROVIDER),
        string("gen_ai.request.model", model),
        string("gen_ai.response.model", model),
        string("gen_ai.response.id", run_id),
        double("gen_ai.request.temperature", p.temperature),
        double("gen_ai.request.top_p", p.top_p),
        double("gen_ai.request.frequency_penalty", p.frequency_penalty),
        double("gen_ai.request.presence_penalty", p.presence_penalty),
        strings(
            "gen_ai.response.finish_reasons",
            &[finish_reason(record.stop_reason).to_string()],
        ),
    ];
    // A seed past int64 (`--seed fresh` draws all 64 bits) is the product's, as text.
    match int("gen_ai.request.seed", config.seed) {
        Some(seed) => attributes.push(seed),
        None => attributes.push(string(
            &format!("{PRODUCT_PREFIX}seed"),
            config.seed.to_string(),
        )),
    }
    attributes.extend(
        [
            ("gen_ai.request.max_tokens", config.max_tokens),
            ("gen_ai.usage.input_tokens", record.prompt_tokens.len()),
            ("gen_ai.usage.output_tokens", record.steps.len()),
        ]
        .into_iter()
        .filter_map(|(key, n)| int(key, n as u64)),
    );
    if p.top_k > 0 {
        attributes.push(double("gen_ai.request.top_k", p.top_k as f64));
    }
    if !config.stop.strings.is_empty() {
        attributes.push(strings(
            "gen_ai.request.stop_sequences",
            &config.stop.strings,
        ));
    }
    let product = |key: &str| format!("{PRODUCT_PREFIX}{key}");
    if let Some(version) = &record.version_id {
        attributes.push(string(&product("version_id"), version.as_str()));
    }
    attributes.push(string(&product("slice"), slice));
    attributes.push(string(&product("backend"), record.backend.name.name()));
    if let Some(precision) = record.precision {
        attributes.push(string(&product("precision"), precision.name()));
    }
    attributes.push(string(&product("engine"), p.engine.name()));
    attributes.push(string(&product("stop_reason"), record.stop_reason.name()));
    attributes.push(double(&product("ttft_ms"), record.ttft_us / 1e3));
    attributes.push(string(&product("record_digest"), digest));
    for knob in &KNOBS {
        if let Some(text) = knob.changed(p) {
            attributes.push(string(&product(&format!("policy.{}", knob.key)), text));
        }
    }
    for (key, value) in &record.tags {
        attributes.push(string(&product(&format!("tag.{key}")), value.as_str()));
    }
    let events: Vec<Value> = outcomes
        .iter()
        .filter(|o| o.run_id == run_id)
        .map(|o| {
            let accepted = o.outcome == Verdict::Accepted;
            json!({
                "timeUnixNano": nanos(o.at_s),
                "name": "gen_ai.evaluation.result",
                "attributes": [
                    string("gen_ai.evaluation.name", "outcome"),
                    string("gen_ai.evaluation.score.label", o.outcome.name()),
                    double(SCORE_VALUE.0, if accepted { 1.0 } else { 0.0 }),
                    string("gen_ai.response.id", run_id),
                ],
            })
        })
        .collect();
    let mut span = json!({
        "traceId": trace_id,
        "spanId": run_id,
        "name": format!("text_completion {model}"),
        "kind": KIND_INTERNAL,
        "startTimeUnixNano": nanos(start_s),
        "endTimeUnixNano": nanos(start_s + took_us / 1e6),
        "attributes": attributes,
    });
    if !events.is_empty() {
        span["events"] = Value::Array(events);
    }
    Some(span)
}

/// An `ExportTraceServiceRequest` holding `spans`, under the lab's resource and scope.
pub fn request(spans: Vec<Value>, app_version: &str) -> Value {
    json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [
                    string("service.name", "decode-lab"),
                    string("service.version", app_version),
                ],
            },
            "scopeSpans": [{
                "scope": { "name": SCOPE, "version": app_version },
                "schemaUrl": SCHEMA_URL,
                "spans": spans,
            }],
        }],
    })
}

/// [`request`]'s text around its spans, for a writer that streams them: the text before
/// the first span and after the last (spans go between, separated by commas).
pub fn envelope(app_version: &str) -> (String, String) {
    const MARK: &str = "\u{0}spans\u{0}";
    let text = request(vec![Value::String(MARK.into())], app_version).to_string();
    let mark = Value::String(MARK.into()).to_string();
    text.split_once(&mark)
        .map(|(head, tail)| (head.to_string(), tail.to_string()))
        .unwrap_or((text, String::new()))
}

#[cfg(test)]
mod tests;
