//! Seeded mutation campaigns over every file the planner reads (trace files in CSV and
//! JSONL, the eval profile, a known-good plan): no panic, and every value that parses
//! passes its format's own consistency rules; a parsed trace or plan then runs through a
//! short simulation, which must end (bounded) in figures or a typed error.
//!
//! `MUTATION_CASES=200000 MUTATION_SEED=9 cargo test -p capacity --test mutation` runs a
//! longer campaign (default 1,000 cases per parser, seed 1).

use capacity::{
    simulate, Batching, HardwareProfile, ModelProfile, NamedPolicy, Plan, PlanInputs,
    QualityProfile, ServingPolicy, Trace, TraceFormat, TraceSource, TraceSpec, WeightPath,
    MAX_ARRIVAL_S, MAX_BITS_PER_BYTE, MAX_REQUESTS, MIN_BITS_PER_BYTE, TINY_EVAL_JSON,
};
use mutation::{campaign, Kind};

/// A short valid trace: 40 requests of the bursty preset, both slices, half of them with
/// one of three shared prefixes.
fn valid_trace() -> Trace {
    TraceSpec {
        requests: 40,
        shared_prefixes: Some(capacity::PrefixMix {
            count: 3,
            tokens: capacity::LengthDist::Constant { tokens: 8 },
            share: 0.5,
        }),
        ..TraceSpec::preset("bursty").unwrap()
    }
    .generate()
    .unwrap()
}

/// What a parsed trace promises: requests in arrival order at finite times from 0 to
/// `MAX_ARRIVAL_S`, at least one token each way, slice indices that name a slice, slice
/// names non-empty and distinct.
fn trace_is_consistent(trace: &Trace) -> Result<(), String> {
    if trace.requests.is_empty() || trace.requests.len() > MAX_REQUESTS {
        return Err(format!("{} requests", trace.requests.len()));
    }
    let mut previous = 0.0;
    for (i, r) in trace.requests.iter().enumerate() {
        if !(r.arrival_s.is_finite() && r.arrival_s >= previous && r.arrival_s <= MAX_ARRIVAL_S) {
            return Err(format!(
                "request {i} arrives at {} after {previous}",
                r.arrival_s
            ));
        }
        previous = r.arrival_s;
        if r.prompt_tokens == 0 || r.output_tokens == 0 {
            return Err(format!("request {i} has no tokens: {r:?}"));
        }
        if r.slice as usize >= trace.slices.len() {
            return Err(format!("request {i} names slice {}", r.slice));
        }
        if let Some(p) = r.prefix {
            if p.id as usize >= trace.prefixes.len() || p.tokens == 0 || p.tokens > r.prompt_tokens
            {
                return Err(format!("request {i} has prefix {p:?}: {r:?}"));
            }
        }
    }
    for (i, p) in trace.prefixes.iter().enumerate() {
        if p.is_empty() || trace.prefixes[..i].contains(p) {
            return Err(format!("prefix name {p:?} empty or repeated"));
        }
    }
    for (i, s) in trace.slices.iter().enumerate() {
        if s.is_empty() || trace.slices[..i].contains(s) {
            return Err(format!("slice name {s:?} empty or repeated"));
        }
    }
    Ok(())
}

/// How many mutated inputs parsed (and, for traces, planned): a campaign whose every case
/// is rejected would test only the rejection, so each asserts a share of values too.
#[derive(Default, Debug)]
struct Tally {
    values: usize,
    planned: usize,
}

impl Tally {
    fn assert_some(&self, cases: usize, name: &str) {
        eprintln!(
            "{name}: {} of {cases} mutations parsed, {} planned",
            self.values, self.planned
        );
        // Most damage is rejected (seed 1: 1.4 % of JSONL traces to 20 % of eval files
        // parse); at least 1 in 200 must, so that the consistency checks run.
        assert!(
            self.values * 200 >= cases,
            "{name}: only {self:?} of {cases}"
        );
    }
}

fn one_config(trace: Trace) -> PlanInputs {
    let mut inputs = PlanInputs::tiny_lab("poisson").unwrap();
    inputs.trace = TraceSource::Recorded {
        name: "mutated".into(),
        trace,
    };
    inputs.sweep.load_scales = vec![1.0];
    inputs.sweep.batchings = vec![Batching::ChunkedPrefill { token_budget: 64 }];
    inputs.sweep.max_sequences = vec![8];
    inputs.sweep.weights = vec![WeightPath::Full];
    inputs
}

/// Parses a trace file's bytes (the CLI reads them as UTF-8 first) and, when they parse,
/// checks the trace, simulates it and plans it on one configuration.
fn check_trace(bytes: &[u8], format: TraceFormat, parsed: &mut Tally) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let Ok(trace) = Trace::parse(text, format) else {
        return Ok(());
    };
    parsed.values += 1;
    trace_is_consistent(&trace)?;
    let hardware = HardwareProfile::preset("lab-cpu").unwrap();
    // The lab's baseline: continuous batching of 8 sequences, KV blocks of 16 tokens.
    let policy = NamedPolicy::baseline().policy;
    if let Ok(out) = simulate(&trace, &hardware, &ModelProfile::tiny(), &policy) {
        if !out.ttft_s.iter().all(|t| t.is_finite() && *t >= 0.0) {
            return Err("a request without a finite time to first token".into());
        }
    }
    if let Ok(report) = Plan::run(&one_config(trace)) {
        parsed.planned += 1;
        // The plan's own guarantees: finite figures (checked inside run) and rates that
        // hold together.
        let d = &report.decision;
        if d.replicas == 0 || !d.sustained_rate_per_s.is_finite() {
            return Err(format!("decision {d:?}"));
        }
        for row in report.sweep.iter().filter(|r| r.error.is_none()) {
            if row.goodput_per_s > row.offered_rate_per_s * (1.0 + 1e-9) {
                return Err(format!("goodput above the offered rate: {row:?}"));
            }
        }
    }
    Ok(())
}

#[test]
fn csv_trace_files() {
    let trace = valid_trace();
    assert!(trace.requests.iter().any(|r| r.prefix.is_some()));
    assert_eq!(
        Trace::parse(&trace.to_csv(), TraceFormat::Csv).unwrap(),
        trace
    );
    let text = format!("# a recorded trace\n\n{}", trace.to_csv());
    let mut tally = Tally::default();
    let report = campaign(
        "capacity trace CSV",
        text.as_bytes(),
        Kind::Bytes,
        |bytes| check_trace(bytes, TraceFormat::Csv, &mut tally),
    );
    assert!(report.cases >= 1000 || std::env::var("MUTATION_CASES").is_ok());
    tally.assert_some(report.cases, "capacity trace CSV");
}

#[test]
fn jsonl_trace_files() {
    let trace = valid_trace();
    let mut text = String::from("# a recorded trace\n");
    for r in &trace.requests {
        let mut row = serde_json::json!({
            "arrival_s": r.arrival_s,
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "slice": trace.slices[r.slice as usize],
        });
        if let Some(p) = r.prefix {
            row["prefix_id"] = trace.prefixes[p.id as usize].clone().into();
            row["prefix_tokens"] = p.tokens.into();
        }
        text.push_str(&row.to_string());
        text.push('\n');
    }
    assert_eq!(Trace::parse(&text, TraceFormat::Jsonl).unwrap(), trace);
    let mut tally = Tally::default();
    let report = campaign(
        "capacity trace JSONL",
        text.as_bytes(),
        Kind::JsonLines,
        |bytes| check_trace(bytes, TraceFormat::Jsonl, &mut tally),
    );
    assert!(report.cases >= 1000 || std::env::var("MUTATION_CASES").is_ok());
    tally.assert_some(report.cases, "capacity trace JSONL");
}

/// What a parsed quality profile promises: slices, each a distinct non-empty code with
/// both weight paths measured within the stated range, and finite floors from them.
fn profile_is_consistent(q: &QualityProfile) -> Result<(), String> {
    if q.slices.is_empty() {
        return Err("no slices".into());
    }
    for (i, s) in q.slices.iter().enumerate() {
        if s.slice.is_empty() || q.slices[..i].iter().any(|o| o.slice == s.slice) {
            return Err(format!("slice code {:?} empty or repeated", s.slice));
        }
        for x in [s.full_bits_per_byte, s.int8_bits_per_byte] {
            if !(MIN_BITS_PER_BYTE..=MAX_BITS_PER_BYTE).contains(&x) {
                return Err(format!("slice {:?}: {x} bits per byte", s.slice));
            }
        }
    }
    for f in q.floors_within(1e-4) {
        if !f.max_bits_per_byte.is_finite() {
            return Err(format!("floor {f:?}"));
        }
    }
    Ok(())
}

#[test]
fn eval_profiles() {
    QualityProfile::from_eval_json(TINY_EVAL_JSON, "f32").unwrap();
    let mut tally = Tally::default();
    let report = campaign(
        "capacity eval profile",
        TINY_EVAL_JSON.as_bytes(),
        Kind::Json,
        |bytes| {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return Ok(());
            };
            match QualityProfile::from_eval_json(text, "f32") {
                Ok(q) => {
                    tally.values += 1;
                    profile_is_consistent(&q)
                }
                Err(_) => Ok(()),
            }
        },
    );
    assert!(report.cases >= 1000 || std::env::var("MUTATION_CASES").is_ok());
    tally.assert_some(report.cases, "capacity eval profile");
}

#[test]
fn known_good_plans() {
    let known = NamedPolicy {
        name: "known-good: chunked:128, 16 seqs, int8".into(),
        policy: ServingPolicy {
            batching: Batching::ChunkedPrefill { token_budget: 128 },
            max_sequences: 16,
            block_size: 16,
            weights: WeightPath::Int8,
        },
        fleet: capacity::Fleet {
            replicas: 4,
            router: capacity::Router::KvAware,
            router_staleness_s: 0.5,
            queue_cap: Some(64),
            prefix_cache: true,
            prefill_replicas: 1,
            kv_link_gbps: 100.0,
            speculative_k: 4,
            attention: capacity::Attention::Naive,
        },
    };
    // As --save-known-good writes it.
    let text = serde_json::to_string_pretty(&known).unwrap() + "\n";
    assert_eq!(NamedPolicy::from_known_good_json(&text).unwrap(), known);
    let trace = valid_trace();
    let hardware = HardwareProfile::preset("lab-cpu").unwrap();
    let mut tally = Tally::default();
    let report = campaign(
        "capacity known-good plan",
        text.as_bytes(),
        Kind::Json,
        |bytes| {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return Ok(());
            };
            let Ok(k) = NamedPolicy::from_known_good_json(text) else {
                return Ok(());
            };
            tally.values += 1;
            let p = &k.policy;
            if k.name.trim().is_empty()
                || p.max_sequences == 0
                || p.block_size == 0
                || p.batching == (Batching::ChunkedPrefill { token_budget: 0 })
                || k.fleet.replicas == 0
                || k.fleet.queue_cap == Some(0)
                || k.fleet.speculative_k > capacity::MAX_SPECULATIVE_K
                || k.fleet.prefill_replicas >= k.fleet.replicas.max(1)
                    && k.fleet.prefill_replicas > 0
                || k.fleet.disaggregated()
                    && k.fleet.kv_link_gbps.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
                || !(0.0..=capacity::MAX_ROUTER_STALENESS_S).contains(&k.fleet.router_staleness_s)
            {
                return Err(format!("accepted {k:?}"));
            }
            // The plan it would degrade to runs, or says why it cannot.
            let _ = simulate(&trace, &hardware, &ModelProfile::tiny(), p);
            Ok(())
        },
    );
    assert!(report.cases >= 1000 || std::env::var("MUTATION_CASES").is_ok());
    tally.assert_some(report.cases, "capacity known-good plan");
}
