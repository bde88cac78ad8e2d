//! The plan end to end: byte-identical reports, the release decision and its degradations,
//! every kind of bad input as a typed error, and termination on random inputs.

use capacity::{
    simulate, Arrivals, Batching, CapacityError, DecisionKind, HardwareProfile, LengthDist,
    ModelProfile, NamedPolicy, Plan, PlanInputs, PlanReport, QualityFloor, ServingPolicy, SliceMix,
    Trace, TraceFormat, TraceSource, TraceSpec, WeightPath,
};
use proptest::prelude::*;

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
                .any(|g| g.starts_with("quality (eu)")),
            "{row:?}"
        );
        assert!(
            !row.failed_gates
                .iter()
                .any(|g| g.starts_with("quality (en)")),
            "{row:?}"
        );
    }
    // The highest-throughput point fails the p99 TTFT SLO; the release has the best goodput
    // of the points that pass.
    let max = d.max_throughput.as_ref().unwrap();
    assert!(!max.passes_gates);
    assert!(
        max.failed_gates.iter().any(|g| g.starts_with("p99 TTFT")),
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
        md.contains("| sweep | static, continuous, chunked-prefill/128 × batch limits [1, 4, 16, 64] × weights full, int8; KV blocks of 16 tokens |"),
        "{md}"
    );
}

#[test]
fn nothing_passing_degrades_to_the_baseline_or_the_last_known_good_and_says_by_how_much() {
    let mut inputs = small("poisson", 800);
    // A floor on the rare slice that neither weight path meets.
    inputs.quality_floors = vec![QualityFloor {
        slice: "eu".into(),
        max_bits_per_byte: 2.0,
    }];
    let report = Plan::run(&inputs).unwrap();
    assert_eq!(report.decision.kind, DecisionKind::DegradeToBaseline);
    assert_eq!(report.decision.policy, inputs.baseline.policy);
    let quality = report
        .decision
        .failed_gates
        .iter()
        .find(|g| g.gate == "quality" && g.slice == "eu")
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
    };
    inputs.last_known_good = Some(known.clone());
    let report = Plan::run(&inputs).unwrap();
    assert_eq!(report.decision.kind, DecisionKind::DegradeToLastKnownGood);
    assert_eq!(report.decision.policy, known.policy);
    assert_eq!(report.chosen.name, known.name);
}

fn policy(batching: Batching, max_sequences: u32) -> ServingPolicy {
    ServingPolicy {
        batching,
        max_sequences,
        block_size: 16,
        weights: WeightPath::Full,
    }
}

fn tiny_trace(requests: u64) -> Trace {
    TraceSpec {
        requests,
        ..TraceSpec::preset("poisson").unwrap()
    }
    .generate()
    .unwrap()
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
    let short = Trace {
        slices: vec!["en".into()],
        requests: vec![capacity::Request {
            arrival_s: 0.0,
            prompt_tokens: 100,
            output_tokens: 50,
            slice: 0,
        }],
    };
    let e = simulate(&short, &twelve, &model, &policy(Batching::Static, 4)).unwrap_err();
    assert!(matches!(e, CapacityError::NeverAdmits { .. }), "{e}");
    assert!(e.to_string().contains("reserves 16 KV blocks"), "{e}");
    // Longer than the context.
    let long = Trace {
        slices: vec!["en".into()],
        requests: vec![capacity::Request {
            arrival_s: 0.0,
            prompt_tokens: 250,
            output_tokens: 50,
            slice: 0,
        }],
    };
    assert_eq!(
        simulate(&long, &hw, &model, &p).unwrap_err(),
        CapacityError::RequestTooLong {
            request: 0,
            tokens: 300,
            context_len: 256
        }
    );
    // A hand-built trace whose slice index names no slice.
    let orphan = Trace {
        slices: vec!["en".into()],
        requests: vec![capacity::Request {
            arrival_s: 0.0,
            prompt_tokens: 10,
            output_tokens: 5,
            slice: 3,
        }],
    };
    assert!(matches!(
        simulate(&orphan, &hw, &model, &p),
        Err(CapacityError::TraceRow { line: 1, .. })
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
