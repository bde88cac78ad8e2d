use super::*;

const RECORDS: &str =
    include_str!("../../../policy/tests/fixtures/records-before-backend-kind.jsonl");

fn record() -> RunRecord {
    let mut r = policy::parse_records(RECORDS.lines().next().unwrap())
        .unwrap()
        .remove(0);
    r.tags.insert("at_s".into(), "1700000000.5".into());
    r.tags.insert("slice".into(), "eu".into());
    r.config.stop.strings = vec!["\n\n".into()];
    r.config.policy.top_k = 40;
    r.seal();
    r
}

/// Each attribute's key and the type its value has.
fn attributes(list: &Value) -> Vec<(String, AttrType)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let value = &a["value"];
            let kind = if value["stringValue"].is_string() {
                AttrType::String
            } else if let Some(i) = value["intValue"].as_str() {
                assert!(
                    i.parse::<i64>().is_ok(),
                    "{a}: an int64 is a decimal string"
                );
                AttrType::Int
            } else if value["doubleValue"].is_f64() {
                AttrType::Double
            } else {
                let values = value["arrayValue"]["values"].as_array().unwrap();
                assert!(values.iter().all(|v| v["stringValue"].is_string()), "{a}");
                AttrType::StringArray
            };
            (a["key"].as_str().unwrap().to_string(), kind)
        })
        .collect()
}

#[test]
fn a_run_is_a_span_named_and_typed_by_the_pinned_conventions() {
    let r = record();
    let outcome = Outcome {
        run_id: r.run_id.clone().unwrap(),
        outcome: Verdict::Accepted,
        at_s: 1_700_000_100.0,
    };
    let other = Outcome {
        run_id: "0000000000000000".into(),
        ..outcome.clone()
    };
    let span = span(&r, "eu", &[&outcome, &other]).unwrap();
    let hex = |s: &Value, n: usize| {
        let s = s.as_str().unwrap();
        s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0')
    };
    assert!(
        hex(&span["traceId"], 32) && hex(&span["spanId"], 16),
        "{span}"
    );
    assert_eq!(span["spanId"], r.run_id.clone().unwrap());
    assert_eq!(span["kind"], 1);
    assert_eq!(span["name"], format!("text_completion {}", r.model.name));
    assert_eq!(span["startTimeUnixNano"], "1700000000500000000");
    let took = r.ttft_us + r.token_latencies_us.iter().sum::<f64>();
    let end: u64 = span["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
    assert!((end as f64 - (1_700_000_000.5 + took / 1e6) * 1e9).abs() < 1e3);

    let attrs = attributes(&span["attributes"]);
    for (key, kind) in &attrs {
        match key.strip_prefix(PRODUCT_PREFIX) {
            Some(_) => {}
            None => assert!(
                SEMCONV.contains(&(key.as_str(), *kind)),
                "{key} ({kind:?}) is not an attribute of the conventions {SEMCONV_VERSION} with that type"
            ),
        }
    }
    let has = |key: &str| attrs.iter().any(|(k, _)| k == key);
    for key in [
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.request.top_k",
        "gen_ai.request.stop_sequences",
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "decode_lab.version_id",
        "decode_lab.slice",
        "decode_lab.policy.top_k",
        "decode_lab.tag.slice",
    ] {
        assert!(has(key), "{key} missing from {span}");
    }
    // Only the run's own outcome is its event.
    let events = span["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["name"], "gen_ai.evaluation.result");
    assert_eq!(events[0]["timeUnixNano"], "1700000100000000000");
    let event_attrs = attributes(&events[0]["attributes"]);
    for (key, kind) in &event_attrs {
        assert!(
            SEMCONV.contains(&(key.as_str(), *kind)) || (key.as_str(), *kind) == SCORE_VALUE,
            "{key}"
        );
    }
}

#[test]
fn a_seed_past_int64_is_the_products_text() {
    let mut r = record();
    r.config.seed = u64::MAX;
    r.seal();
    let span = span(&r, "eu", &[]).unwrap();
    let attrs = attributes(&span["attributes"]);
    assert!(!attrs.iter().any(|(k, _)| k == "gen_ai.request.seed"));
    let seed = span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == "decode_lab.seed")
        .unwrap();
    assert_eq!(seed["value"]["stringValue"], u64::MAX.to_string());
}

#[test]
fn a_request_holds_the_spans_under_the_scope_and_its_schema() {
    let r = record();
    let request = request(vec![span(&r, "eu", &[]).unwrap()], "0.1.0");
    let scope = &request["resourceSpans"][0]["scopeSpans"][0];
    assert_eq!(scope["schemaUrl"], SCHEMA_URL);
    assert_eq!(scope["scope"]["name"], SCOPE);
    assert_eq!(scope["spans"].as_array().unwrap().len(), 1);
    assert!(scope["spans"][0].get("events").is_none());
    let (head, tail) = envelope("0.1.0");
    let whole: Value = serde_json::from_str(&format!("{head}{}{tail}", scope["spans"][0])).unwrap();
    assert_eq!(whole, request);
}
