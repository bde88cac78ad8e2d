//! Speculative decoding in the simulator and the plan: the simulated speedup against
//! Leviathan et al.'s closed form at a fixed α, and a plan that takes α measured per slice
//! under its decoding policy.

use capacity::{
    expected_tokens_per_step, simulate_fleet, simulate_speculative, Batching, DraftModel, Fleet,
    HardwareProfile, ModelProfile, Plan, PlanInputs, Request, SpeculationInputs,
    SpeculationProfile, Trace, TraceSource, NGRAM_DRAFT_S_PER_TOKEN,
};

mod common;

use common::policy;

/// With a constant α, a step that drafts k tokens emits E = (1 − α^(k+1)) / (1 − α) on
/// average (Leviathan et al., ICML 2023, eq. 1). One request at a time of 2,000 output
/// tokens of Llama-3-8B on an A100, where a decode step and a verify step of k + 1 tokens
/// both read every weight once (memory-bound, so they cost the same to within their KV
/// writes): the decode phase's speedup is E, within 2 %.
#[test]
fn at_a_fixed_alpha_the_decode_speedup_is_the_closed_form() {
    let hw = HardwareProfile::preset("a100-80gb").unwrap();
    let model = ModelProfile::preset("llama-3-8b").unwrap();
    let p = policy(Batching::Continuous, 1);
    let trace = Trace {
        slices: vec!["en".into()],
        requests: (0..40)
            .map(|i| Request {
                arrival_s: i as f64 * 100.0,
                prompt_tokens: 16,
                output_tokens: 2000,
                slice: 0,
                prefix: None,
            })
            .collect(),
        prefixes: Vec::new(),
    };
    let decode_s = |out: &capacity::SimOutcome| -> f64 {
        (0..out.e2e_s.len())
            .map(|i| out.e2e_s[i] - out.ttft_s[i])
            .sum()
    };
    let plain = decode_s(&simulate_fleet(&trace, &hw, &model, &p, &Fleet::single()).unwrap());
    for (alpha, k) in [(0.5, 4), (0.8, 4), (0.6, 2)] {
        let fleet = Fleet {
            speculative_k: k,
            ..Fleet::single()
        };
        let draft = DraftModel {
            acceptance: vec![alpha],
            draft_s_per_token: 0.0,
        };
        let out = simulate_speculative(&trace, &hw, &model, &p, &fleet, &draft).unwrap();
        let speedup = plain / decode_s(&out);
        let closed = expected_tokens_per_step(alpha, k);
        eprintln!("α {alpha}, k {k}: simulated speedup {speedup:.4}, closed form {closed:.4}");
        assert!(
            (speedup / closed - 1.0).abs() < 0.02,
            "{speedup} against {closed}"
        );
    }
    // A speculating fleet without an α per slice is an error, not a guess.
    let fleet = Fleet {
        speculative_k: 4,
        ..Fleet::single()
    };
    let none = DraftModel {
        acceptance: Vec::new(),
        draft_s_per_token: 0.0,
    };
    assert!(simulate_speculative(&trace, &hw, &model, &p, &fleet, &none)
        .unwrap_err()
        .to_string()
        .contains("0 acceptance rates for the trace's 1 slices"));
}

/// The plan speculates with the α measured for its decoding policy, per slice: its report
/// lists every measured policy and slice (the plan's first), and each speculative row is
/// the same configuration as the row before it, but drafting.
#[test]
fn a_plan_speculates_with_the_alpha_measured_for_its_decoding_policy() {
    let mut inputs = PlanInputs::tiny_lab("poisson").unwrap();
    if let TraceSource::Generated { spec } = &mut inputs.trace {
        spec.requests = 1000;
    }
    inputs.sweep.load_scales = vec![1.0];
    inputs.sweep.batchings = vec![Batching::ChunkedPrefill { token_budget: 128 }];
    inputs.sweep.max_sequences = vec![16];
    inputs.sweep.fleet.speculative_k = Some(4);
    let profile = SpeculationProfile::tiny().unwrap();
    inputs.speculation = Some(SpeculationInputs {
        decoding: "greedy".into(),
        profile: profile.clone(),
        draft_s_per_token: NGRAM_DRAFT_S_PER_TOKEN,
    });
    let report = Plan::run(&inputs).unwrap();
    let s = report.contract.speculation.as_ref().unwrap();
    assert_eq!((s.k, s.decoding.as_str()), (4, "greedy"));
    assert_eq!(s.acceptance.len(), 6);
    assert_eq!(s.acceptance[0].policy, "greedy");
    let measured = &profile.policies[0].slices[0];
    assert_eq!(s.acceptance[0].acceptance_rate, measured.acceptance_rate);
    // The rare slice accepts less than English under every measured policy.
    for pair in s.acceptance.chunks(2) {
        assert!(
            pair[1].acceptance_rate < pair[0].acceptance_rate,
            "{pair:?}"
        );
    }
    let rows = &report.sweep;
    assert_eq!(
        rows.len(),
        4,
        "2 weight paths, each without and with speculation"
    );
    for pair in rows.chunks(2) {
        assert_eq!(pair[0].fleet.speculative_k, 0);
        assert_eq!(pair[1].fleet.speculative_k, 4);
        assert!(
            pair[1].label.contains("speculative k=4"),
            "{}",
            pair[1].label
        );
    }
    assert!(report.to_markdown().contains("| speculative decoding |"));
    // A policy the profile does not measure is named.
    inputs.speculation.as_mut().unwrap().decoding = "top-k 40".into();
    assert!(Plan::run(&inputs)
        .unwrap_err()
        .to_string()
        .contains("decoding policy \"top-k 40\" is not measured"));
}
