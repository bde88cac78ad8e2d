//! The plan end to end: byte-identical reports, the release decision and its degradations,
//! every kind of bad input as a typed error, and termination on random inputs.

use capacity::{
    simulate, Arrivals, Batching, CapacityError, DecisionKind, Gate, HardwareProfile, LengthDist,
    ModelProfile, NamedPolicy, Plan, PlanInputs, PlanReport, QualityFloor, ServingPolicy, SliceMix,
    Trace, TraceFormat, TraceSource, TraceSpec, WeightPath,
};
use proptest::prelude::*;

mod common;

use common::policy;

fn small(preset: &str, requests: u64) -> PlanInputs {
    let mut inputs = PlanInputs::tiny_lab(preset).unwrap();
    if let TraceSource::Generated { spec } = &mut inputs.trace {
        spec.requests = requests;
    }
    inputs
}

#[test]
fn same_inputs_give_a_byte_identical_report_that_round_trips() {
    let inputs = small("bursty", 1500);
    let first = Plan::run(&inputs).unwrap();
    let second = Plan::run(&inputs.clone()).unwrap();
    assert_eq!(first.to_json(), second.to_json());
    assert_eq!(first.to_markdown(), second.to_markdown());
    let back: PlanReport = serde_json::from_str(&first.to_json()).unwrap();
    assert_eq!(back, first);
    // The inputs round-trip too (the lab keeps them as JSON).
    let inputs_back: PlanInputs =
        serde_json::from_str(&serde_json::to_string(&inputs).unwrap()).unwrap();
    assert_eq!(inputs_back, inputs);
}

#[test]
fn the_default_plan_releases_full_weights_and_shows_where_max_throughput_breaks_the_tail() {
    let report = Plan::run(&small("poisson", 2000)).unwrap();
    let d = &report.decision;
    assert_eq!(d.kind, DecisionKind::Release);
    // The rare slice's measured int8 loss (0.014 %) is over its 0.01 % floor, English's
    // (0.006 %) is not: every int8 row fails the quality gate of "eu" and only that slice.
    assert_eq!(d.policy.weights, WeightPath::Full);
    for row in report.sweep.iter().filter(|r| r.weights == "int8") {
        assert!(!row.passes_gates);
        assert!(
            row.failed_gates
                .iter()
                .any(|g| g.gate == Gate::Quality && g.slice == "eu"),
            "{row:?}"
        );
        assert!(
            !row.failed_gates
                .iter()
                .any(|g| g.gate == Gate::Quality && g.slice == "en"),
            "{row:?}"
        );
    }
    // The highest-throughput point fails the p99 TTFT SLO; the release has the best goodput
    // of the points that pass.
    let max = d.max_throughput.as_ref().unwrap();
    assert!(!max.passes_gates);
    assert!(
        max.failed_gates.iter().any(|g| g.gate == Gate::TtftP99),
        "{max:?}"
    );
    let best_passing = report
        .sweep
        .iter()
        .filter(|r| r.passes_gates)
        .map(|r| r.goodput_per_s)
        .fold(0.0, f64::max);
    assert_eq!(report.chosen.metrics.all.goodput_per_s, best_passing);
    assert!(report.chosen.gates.iter().all(|g| g.passed));
    let md = report.to_markdown();
    for part in [
        "## 1. Benchmark contract",
        "## 2. Profiler and bottleneck report",
        "## 3. Quality gates",
        "## 4. Capacity and cost recommendation",
    ] {
        assert!(md.contains(part), "{part}");
    }
    // The contract names the swept configurations (the lab's panel shows the same words).
    assert!(
        md.contains("| sweep | static, continuous, chunked:128 × batch limits [1, 4, 16, 64] × weights full, int8; KV blocks of 16 tokens |"),
        "{md}"
    );
}

#[test]
fn nothing_passing_degrades_to_the_baseline_or_the_last_known_good_and_says_by_how_much() {
    let mut inputs = small("poisson", 800);
    // A floor on the rare slice that neither weight path meets (English keeps its own: a
    // slice without a floor is an error, not a slice without a gate).
    for floor in &mut inputs.quality_floors {
        if floor.slice == "eu" {
            floor.max_bits_per_byte = 2.0;
        }
    }
    let report = Plan::run(&inputs).unwrap();
    assert_eq!(report.decision.kind, DecisionKind::DegradeToBaseline);
    assert_eq!(report.decision.policy, inputs.baseline.policy);
    let quality = report
        .decision
        .failed_gates
        .iter()
        .find(|g| g.gate == Gate::Quality && g.slice == "eu")
        .unwrap();
    // The best candidate's own path: full precision or int8, each measured.
    let eu = inputs.quality.slice("eu").unwrap();
    assert!([eu.full_bits_per_byte, eu.int8_bits_per_byte].contains(&quality.measured));
    assert!((quality.excess - (quality.measured - 2.0)).abs() < 1e-12);
    assert!(
        report.decision.reason.contains("quality (eu)"),
        "{}",
        report.decision.reason
    );

    let known = NamedPolicy {
        name: "known-good: continuous, 4 seqs, full".into(),
        policy: ServingPolicy {
            batching: Batching::Continuous,
            max_sequences: 4,
            block_size: 16,
            weights: WeightPath::Full,
        },
        fleet: capacity::Fleet::single(),
    };
    inputs.last_known_good = Some(known.clone());
    let report = Plan::run(&inputs).unwrap();
    assert_eq!(report.decision.kind, DecisionKind::DegradeToLastKnownGood);
    assert_eq!(report.decision.policy, known.policy);
    assert_eq!(report.chosen.name, known.name);
}

fn tiny_trace(requests: u64) -> Trace {
    TraceSpec {
        requests,
        ..TraceSpec::preset("poisson").unwrap()
    }
    .generate()
    .unwrap()
}

/// A trace of one request at time 0, in slice `slice` of the one slice "en".
fn one_request(prompt_tokens: u32, output_tokens: u32, slice: u16) -> Trace {
    Trace {
        slices: vec!["en".into()],
        requests: vec![capacity::Request {
            arrival_s: 0.0,
            prompt_tokens,
            output_tokens,
            slice,
            prefix: None,
        }],
        prefixes: Vec::new(),
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let hw = HardwareProfile::preset("lab-cpu").unwrap();
    let model = ModelProfile::tiny();
    let trace = tiny_trace(50);
    let run = |hw: &HardwareProfile, p: &ServingPolicy| simulate(&trace, hw, &model, p);
    let p = policy(Batching::Continuous, 8);

    let zero_bw = HardwareProfile {
        bandwidth_bytes_per_s: 0.0,
        ..hw.clone()
    };
    assert_eq!(
        run(&zero_bw, &p).unwrap_err().to_string(),
        "memory bandwidth (bytes/s) must be a finite number above zero, got 0"
    );
    let negative_flops = HardwareProfile {
        peak_flops: -1e9,
        ..hw.clone()
    };
    assert!(matches!(
        run(&negative_flops, &p),
        Err(CapacityError::NotPositive { value, .. }) if value == -1e9
    ));
    // Room for the weights and 3 blocks of 16 tokens: less than the longest request.
    let cramped = HardwareProfile {
        memory_reserve: 0.0,
        memory_bytes: model.parameters * 4.0 + 3.5 * model.kv_cache_bytes(1, 16),
        ..hw.clone()
    };
    let e = run(&cramped, &p).unwrap_err();
    assert!(
        matches!(
            e,
            CapacityError::KvTooSmall {
                available_blocks: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("but memory leaves 3"), "{e}");
    assert!(matches!(
        run(&hw, &policy(Batching::Continuous, 0)),
        Err(CapacityError::NeverAdmits { .. })
    ));
    assert!(matches!(
        run(
            &hw,
            &policy(Batching::ChunkedPrefill { token_budget: 0 }, 4)
        ),
        Err(CapacityError::NeverAdmits { .. })
    ));
    // Static batching reserves the whole context (16 blocks); 12 blocks hold every request
    // of this trace but never one static row.
    let twelve = HardwareProfile {
        memory_reserve: 0.0,
        memory_bytes: model.parameters * 4.0 + 12.5 * model.kv_cache_bytes(1, 16),
        ..hw.clone()
    };
    let short = one_request(100, 50, 0);
    let e = simulate(&short, &twelve, &model, &policy(Batching::Static, 4)).unwrap_err();
    assert!(matches!(e, CapacityError::NeverAdmits { .. }), "{e}");
    assert!(e.to_string().contains("reserves 16 KV blocks"), "{e}");
    // Longer than the context.
    let long = one_request(250, 50, 0);
    assert_eq!(
        simulate(&long, &hw, &model, &p).unwrap_err(),
        CapacityError::RequestTooLong {
            request: 0,
            tokens: 300,
            context_len: 256
        }
    );
    // A hand-built trace whose slice index names no slice.
    let orphan = one_request(10, 5, 3);
    // (It is the trace's first request, not the "line 1" of a file the trace never was.)
    assert!(matches!(
        simulate(&orphan, &hw, &model, &p),
        Err(CapacityError::BadRequest { request: 1, .. })
    ));
    // Weights larger than memory.
    let small_memory = HardwareProfile {
        memory_bytes: 1e6,
        ..hw.clone()
    };
    assert!(matches!(
        run(&small_memory, &p),
        Err(CapacityError::WeightsTooLarge { .. })
    ));
    // A plan with a zero SLO.
    let mut inputs = small("poisson", 100);
    inputs.slo.ttft_p99_s = 0.0;
    assert_eq!(
        Plan::run(&inputs).unwrap_err().to_string(),
        "p99 TTFT SLO (s) must be a finite number above zero, got 0"
    );
    // A malformed row of a trace file names its line.
    let e = Trace::parse(
        "arrival_s,prompt_tokens,output_tokens,slice\n0,5,5,en\n0.5,5,en\n",
        TraceFormat::Csv,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "trace line 3: expected 4 comma-separated fields (arrival_s,prompt_tokens,output_tokens,slice), found 3"
    );
}

fn batching() -> impl Strategy<Value = Batching> {
    prop_oneof![
        Just(Batching::Static),
        Just(Batching::Continuous),
        (1u32..600).prop_map(|token_budget| Batching::ChunkedPrefill { token_budget }),
    ]
}

fn arrivals() -> impl Strategy<Value = Arrivals> {
    prop_oneof![
        (0.1f64..5000.0).prop_map(|rate_per_s| Arrivals::Poisson { rate_per_s }),
        (0.1f64..5000.0, 1.0f64..50.0, 0.01f64..0.9, 0.001f64..10.0).prop_map(
            |(rate_per_s, burst_factor, burst_share, mean_burst_s)| Arrivals::Bursty {
                rate_per_s,
                burst_factor,
                burst_share,
                mean_burst_s
            }
        ),
        (0.1f64..5000.0, 0.0f64..0.95, 0.01f64..1000.0).prop_map(
            |(rate_per_s, amplitude, period_s)| Arrivals::Diurnal {
                rate_per_s,
                amplitude,
                period_s
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any valid configuration finishes: every request gets its tokens, or the run is a
    /// typed error (a cache too small for it, …); never a hang or a panic.
    #[test]
    fn random_valid_inputs_terminate(
        requests in 1u64..300,
        seed in any::<u64>(),
        arrivals in arrivals(),
        prompt_max in 1u32..200,
        output_max in 1u32..56,
        batching in batching(),
        max_sequences in 1u32..80,
        block_size in 1u32..64,
        kv_blocks in 1.0f64..400.0,
        weights in prop_oneof![Just(WeightPath::Full), Just(WeightPath::Int8)],
    ) {
        let model = ModelProfile::tiny();
        let spec = TraceSpec {
            name: "random".into(),
            requests,
            seed,
            arrivals,
            prompt_tokens: LengthDist::Uniform { min: 1, max: prompt_max },
            output_tokens: LengthDist::Uniform { min: 1, max: output_max },
            slices: vec![SliceMix { slice: "en".into(), share: 1.0, prompt_scale: 1.0 }],
            shared_prefixes: None,
        };
        let trace = spec.generate().unwrap();
        let hw = HardwareProfile {
            memory_reserve: 0.0,
            memory_bytes: model.weight_bytes(weights)
                + kv_blocks * model.kv_cache_bytes(1, block_size as u64),
            ..HardwareProfile::preset("lab-cpu").unwrap()
        };
        let policy = ServingPolicy { batching, max_sequences, block_size, weights };
        match simulate(&trace, &hw, &model, &policy) {
            Ok(out) => {
                prop_assert!(out.ttft_s.iter().all(|t| t.is_finite() && *t > 0.0));
                prop_assert!(out.e2e_s.iter().zip(&out.ttft_s).all(|(e, t)| e >= t));
            }
            Err(e) => prop_assert!(matches!(
                e,
                CapacityError::KvTooSmall { .. } | CapacityError::NeverAdmits { .. }
            ), "{}", e),
        }
    }

    /// Invalid numbers anywhere are errors, not panics.
    #[test]
    fn random_invalid_numbers_are_errors(
        bad in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(0.0), -1e12f64..0.0],
        which in 0usize..6,
    ) {
        let mut inputs = small("poisson", 50);
        match which {
            0 => inputs.hardware.bandwidth_bytes_per_s = bad,
            1 => inputs.hardware.peak_flops = bad,
            2 => inputs.hardware.memory_bytes = bad,
            3 => inputs.slo.tpot_p99_s = bad,
            4 => inputs.sweep.load_scales = vec![1.0, bad],
            _ => if let TraceSource::Generated { spec } = &mut inputs.trace {
                spec.arrivals = Arrivals::Poisson { rate_per_s: bad };
            },
        }
        prop_assert!(Plan::run(&inputs).is_err());
    }
}

fn recorded(trace: Trace) -> TraceSource {
    TraceSource::Recorded {
        name: "file".into(),
        trace,
    }
}

fn request(arrival_s: f64, slice: u16) -> capacity::Request {
    capacity::Request {
        arrival_s,
        prompt_tokens: 20,
        output_tokens: 8,
        slice,
        prefix: None,
    }
}

#[test]
fn a_trace_without_an_arrival_span_has_no_rate_to_plan_for() {
    // One request (or several at one instant): no rate, so "one replica sustains N
    // requests/s" and the replica count would be made up. It is an error that says so.
    for requests in [vec![request(0.5, 0)], vec![request(2.0, 0); 3]] {
        let mut inputs = small("poisson", 10);
        inputs.trace = recorded(Trace {
            slices: vec!["en".into()],
            requests,
            prefixes: Vec::new(),
        });
        inputs.quality_floors.retain(|f| f.slice == "en");
        let e = Plan::run(&inputs).unwrap_err();
        assert!(matches!(e, CapacityError::NoArrivalRate { .. }), "{e}");
        assert!(e.to_string().contains("no arrival rate"), "{e}");
    }
    let mut inputs = small("poisson", 1);
    let e = Plan::run(&inputs).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the trace's 1 request all arrive at "),
        "{e}"
    );
    // Two requests are enough, and every figure then agrees with every other.
    inputs = small("poisson", 2);
    let report = Plan::run(&inputs).unwrap();
    assert_rates_agree(&report);
}

/// What the report says about rates holds together: no point completes more requests per
/// second than it was offered, the released load is a swept one, and the replicas carry the
/// trace's rate.
fn assert_rates_agree(report: &PlanReport) {
    let offered = report.contract.offered_rate_per_s;
    assert!(offered.is_finite() && offered > 0.0);
    for row in report.sweep.iter().filter(|r| r.error.is_none()) {
        assert!(
            row.goodput_per_s <= row.offered_rate_per_s * (1.0 + 1e-9),
            "{row:?}"
        );
        assert_eq!(row.offered_rate_per_s, offered * row.load_scale);
    }
    let d = &report.decision;
    assert!(d.replicas >= 1);
    if d.kind == DecisionKind::Release {
        assert!(d.replicas as f64 * d.sustained_rate_per_s >= offered * (1.0 - 1e-9));
        assert!(report.chosen.metrics.all.goodput_per_s <= d.sustained_rate_per_s * (1.0 + 1e-9));
    }
}

#[test]
fn degenerate_settings_are_errors_that_name_the_value() {
    type Edit = fn(&mut PlanInputs);
    let cases: [(&str, Edit, &str); 8] = [
        (
            "load 1e-300",
            |i| i.sweep.load_scales = vec![1.0, 1e-300],
            "load scale must lie in [1e-6, 1e6], got 1e-300",
        ),
        (
            "load 1e300",
            |i| i.sweep.load_scales = vec![1e300],
            "load scale must lie in [1e-6, 1e6], got 1e300",
        ),
        (
            "huge SLO",
            |i| i.slo.tpot_p99_s = 1e300,
            "p99 time-per-token SLO (s) must lie in [1e-9, 1e9], got 1e300",
        ),
        (
            "tiny SLO",
            |i| i.slo.ttft_p99_s = 1e-310,
            "p99 TTFT SLO (s) must lie in [1e-9, 1e9], got 1e-310",
        ),
        (
            "absurd rate",
            |i| {
                if let TraceSource::Generated { spec } = &mut i.trace {
                    spec.arrivals = Arrivals::Poisson { rate_per_s: 1e308 };
                }
            },
            "arrival rate (requests/s) must lie in [1e-6, 1e9], got 1e308",
        ),
        (
            "chunked:0",
            |i| {
                i.sweep.batchings = vec![
                    Batching::Continuous,
                    Batching::ChunkedPrefill { token_budget: 0 },
                ]
            },
            "the policy can never admit a request: its chunked-prefill token budget is 0",
        ),
        (
            "batch limit 0",
            |i| i.sweep.max_sequences = vec![4, 0],
            "the policy can never admit a request: its batch limit (max_sequences) is 0",
        ),
        (
            "floor 1e300",
            |i| i.quality_floors[0].max_bits_per_byte = 1e300,
            "quality floor of slice \"en\" (bits/byte) must lie in [1e-6, 1000], got 1e300",
        ),
    ];
    for (name, edit, expected) in cases {
        let mut inputs = small("poisson", 50);
        edit(&mut inputs);
        let e = Plan::run(&inputs).unwrap_err().to_string();
        assert!(e.starts_with(expected), "{name}: {e}");
    }
    // A trace stretched past the clock's precision: an error naming the load scale, not a
    // report of zero latencies and infinite tokens/s.
    let mut inputs = small("poisson", 50);
    if let TraceSource::Generated { spec } = &mut inputs.trace {
        spec.arrivals = Arrivals::Poisson { rate_per_s: 1e-6 };
    }
    inputs.sweep.load_scales = vec![1e-6];
    let e = Plan::run(&inputs).unwrap_err();
    assert!(matches!(e, CapacityError::ClockResolution { .. }), "{e}");
    assert!(e.to_string().contains("load scale 1e-6"), "{e}");
    // The least load scale on a short trace: finite figures, a million replicas at most.
    let mut inputs = small("poisson", 50);
    inputs.sweep.load_scales = vec![1e-6];
    let report = Plan::run(&inputs).unwrap();
    assert_rates_agree(&report);
    assert!(report.decision.replicas <= 1_000_000);
    let md = report.to_markdown();
    assert!(!md.contains("inf") && !md.contains("NaN"), "{md}");
}

#[test]
fn every_slice_of_the_trace_needs_quality_data_and_a_floor() {
    // A quality profile without the rare slice: the plan does not release with its gate
    // gone; it names the slice.
    let mut inputs = small("poisson", 200);
    inputs.quality.slices.retain(|s| s.slice == "en");
    inputs.quality_floors.retain(|f| f.slice == "en");
    let e = Plan::run(&inputs).unwrap_err();
    assert!(
        matches!(&e, CapacityError::UngatedSlice { slice, .. } if slice == "eu"),
        "{e}"
    );
    assert!(e.to_string().contains("measures only \"en\""), "{e}");
    // Measured but without a floor: the same.
    let mut inputs = small("poisson", 200);
    inputs.quality_floors.retain(|f| f.slice == "en");
    let e = Plan::run(&inputs).unwrap_err();
    assert!(e.to_string().contains("no quality floor names it"), "{e}");
    // Two floors for one slice are ambiguous.
    let mut inputs = small("poisson", 200);
    inputs.quality_floors.push(QualityFloor {
        slice: "en".into(),
        max_bits_per_byte: 3.0,
    });
    assert!(Plan::run(&inputs)
        .unwrap_err()
        .to_string()
        .contains("two floors name slice \"en\""));
}

#[test]
fn unix_times_plan_as_times_from_the_first_arrival_and_progress_counts_every_point() {
    let inputs = small("bursty", 300);
    let mut shifted = inputs.clone();
    let mut trace = inputs.trace.trace().unwrap();
    let first = trace.requests[0].arrival_s;
    for r in &mut trace.requests {
        r.arrival_s = r.arrival_s - first + 1.7e9;
    }
    shifted.trace = recorded(trace);
    let mut calls = Vec::new();
    let a =
        Plan::run_with_progress(&shifted, &mut |done, total| calls.push((done, total))).unwrap();
    let b = Plan::run(&inputs).unwrap();
    assert_rates_agree(&a);
    // The same gaps: the same decision and figures within rounding.
    assert_eq!(a.decision.name, b.decision.name);
    let (x, y) = (
        a.decision.sustained_rate_per_s,
        b.decision.sustained_rate_per_s,
    );
    assert!((x / y - 1.0).abs() < 1e-6, "{x} {y}");
    assert_eq!(calls.len(), a.sweep.len());
    assert_eq!(calls.last(), Some(&(a.sweep.len(), a.sweep.len())));
    // Progress is only reported: the report is the one without it, byte for byte.
    assert_eq!(Plan::run(&shifted).unwrap().to_json(), a.to_json());
}

#[test]
fn a_sweep_larger_than_the_plan_limit_is_refused_before_any_work() {
    let mut inputs = small("poisson", capacity::MAX_REQUESTS as u64);
    let e = Plan::run(&inputs).unwrap_err();
    assert!(
        matches!(e, CapacityError::TooMuchWork { points: 120, .. }),
        "{e}"
    );
    // The same requests through one configuration fit.
    inputs.sweep.load_scales = vec![1.0];
    inputs.sweep.batchings = vec![Batching::Continuous];
    inputs.sweep.max_sequences = vec![4];
    inputs.sweep.weights = vec![WeightPath::Full];
    if let TraceSource::Generated { spec } = &mut inputs.trace {
        spec.requests = 20;
    }
    assert!(Plan::run(&inputs).is_ok());
}

#[test]
fn known_good_plans_are_checked_when_read() {
    let good = serde_json::to_string(&NamedPolicy::baseline()).unwrap();
    assert_eq!(
        NamedPolicy::from_known_good_json(&good).unwrap(),
        NamedPolicy::baseline()
    );
    let zero = good.replace("\"max_sequences\":8", "\"max_sequences\":0");
    let e = NamedPolicy::from_known_good_json(&zero).unwrap_err();
    assert!(
        e.to_string().contains("batch limit (max_sequences) is 0"),
        "{e}"
    );
    assert!(NamedPolicy::from_known_good_json("{}").is_err());
    assert!(NamedPolicy::from_known_good_json("").is_err());
}

#[test]
fn a_time_past_the_clocks_precision_is_an_error_not_zero_latency() {
    let hw = HardwareProfile::preset("lab-cpu").unwrap();
    let model = ModelProfile::tiny();
    let late = Trace {
        slices: vec!["en".into()],
        requests: vec![request(0.0, 0), request(1e12, 0)],
        prefixes: Vec::new(),
    };
    let e = simulate(&late, &hw, &model, &policy(Batching::Continuous, 4)).unwrap_err();
    assert!(matches!(e, CapacityError::ClockResolution { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("the simulated clock would reach 1e12 s"),
        "{e}"
    );
}

#[test]
fn numbers_in_messages_take_their_shortest_round_trip_form() {
    use capacity::shortest;
    assert_eq!(shortest(1e-310), "1e-310");
    assert_eq!(shortest(1e300), "1e300");
    assert_eq!(shortest(0.25), "0.25");
    assert_eq!(shortest(200.0), "200");
    assert_eq!(shortest(1e6), "1e6");
    assert_eq!(shortest(0.00001), "1e-5");
    assert_eq!(shortest(-3.0), "-3");
    assert_eq!(shortest(f64::INFINITY), "inf");
    for x in [1e-310, 123.456, 5e-324, f64::MAX, 0.1 + 0.2] {
        assert_eq!(shortest(x).parse::<f64>().unwrap(), x);
    }
    let e = CapacityError::NotPositive {
        what: "x".into(),
        value: 1e-310,
    };
    assert!(!e.to_string().contains("000000"), "{e}");
}
