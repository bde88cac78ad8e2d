//! The two samplers set by the entropy of the distribution they are given, against line-by-
//! line transcriptions of the peers' code (in f64, where the peers compute in f32):
//!
//! - top-H, Hugging Face's `TopHLogitsWarper.__call__` (`generation/logits_process.py` at
//!   00857b6c), under the hf engine, where it runs after the temperature;
//! - dynamic temperature, llama.cpp's `llama_sampler_temp_ext_apply`
//!   (`src/llama-sampling.cpp` at e19fb5f1), under the llama.cpp engine, where it is the
//!   chain's temperature sampler.

use policy::{
    step, Engine, NumpyRng, Policy, PolicyError, Snapshots, Stage, StageOrder, StepContext,
};
use proptest::prelude::*;

/// `TopHLogitsWarper.__call__` on one row, statement by statement: which tokens it keeps
/// (`keep_mask`). torch's `topk` with `sorted=True` leaves the order of ties unspecified;
/// here a stable sort puts the lower index first.
fn top_h_reference(scores: &[f64], top_h: f64) -> Vec<bool> {
    let vocab_size = scores.len();
    let mut keep_mask = vec![false; vocab_size];
    let top_n = 100.min(vocab_size);
    // 1. top_logits, top_idx = torch.topk(scores, top_n, largest=True, sorted=True)
    let mut order: Vec<usize> = (0..vocab_size).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let top_idx = &order[..top_n];
    let top_logits: Vec<f64> = top_idx.iter().map(|&i| scores[i]).collect();
    // 2. dist = Categorical(logits=top_logits); probs; log_probs = torch.log(probs)
    let max = top_logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = top_logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    let probs: Vec<f64> = exps.iter().map(|e| e / sum).collect();
    let log_probs: Vec<f64> = probs.iter().map(|p| p.ln()).collect();
    // 3. tau = dist.entropy() * top_h; Categorical.entropy clamps its normalised logits
    //    to the type's finite minimum before multiplying by probs.
    let entropy = -probs
        .iter()
        .zip(&log_probs)
        .map(|(p, l)| l.max(f64::MIN) * p)
        .sum::<f64>();
    let tau = entropy * top_h;
    // 4. entropy_terms = -probs * log_probs; cumulative_entropy = torch.cumsum(...)
    let mut cumulative_entropy = Vec::with_capacity(top_n);
    let mut running = 0.0;
    for (p, l) in probs.iter().zip(&log_probs) {
        running += -p * l;
        cumulative_entropy.push(running);
    }
    // 5. selection_mask = cumulative_entropy <= tau; selection_mask[:, 0] = True
    let mut selection_mask: Vec<bool> = cumulative_entropy.iter().map(|&c| c <= tau).collect();
    selection_mask[0] = true;
    // 6. keep_mask.scatter_(dim=1, index=top_idx, src=selection_mask)
    for (&i, &selected) in top_idx.iter().zip(&selection_mask) {
        keep_mask[i] = selected;
    }
    keep_mask
}

/// `llama_sampler_temp_ext_apply` with `delta > 0`, statement by statement, then the
/// chain's `dist`: the final probability of each candidate (every id, none removed).
fn temp_ext_reference(logits: &[f64], temp: f64, delta: f64, exponent: f64) -> Vec<f64> {
    let min_temp = (temp - delta).max(0.0);
    let max_temp = temp + delta;
    if logits.len() <= 1 {
        return vec![1.0; logits.len()];
    }
    let max_entropy = -(1.0 / logits.len() as f64).ln();
    // llama_sampler_softmax_impl
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    let mut entropy = 0.0;
    for e in &exps {
        let prob = e / sum;
        if prob > 0.0 {
            entropy -= prob * prob.ln();
        }
    }
    let normalized_entropy = entropy / max_entropy;
    let dyn_temp = min_temp + (max_temp - min_temp) * normalized_entropy.powf(exponent);
    // llama_sampler_temp_impl: at most 0 keeps the highest logit alone.
    if dyn_temp <= 0.0 {
        let top = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
            .unwrap();
        return (0..logits.len())
            .map(|i| if i == top { 1.0 } else { 0.0 })
            .collect();
    }
    let scaled: Vec<f64> = logits.iter().map(|l| l / dyn_temp).collect();
    let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = scaled.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| e / sum).collect()
}

fn stages(policy: &Policy, logits: &[f32]) -> Result<Vec<policy::StageSnapshot>, PolicyError> {
    step(
        policy,
        logits,
        StepContext::default(),
        &mut NumpyRng::new(7),
        Snapshots::Record,
    )
    .map(|outcome| outcome.stages.unwrap())
}

fn logits_strategy(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(
        prop_oneof![
            // Few distinct values: ties at every cut.
            (-3i8..=3).prop_map(|x| f32::from(x) * 0.5),
            -20.0f32..20.0,
        ],
        1..max_len,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Top-H keeps exactly the tokens Hugging Face's warper keeps, after a temperature,
    /// over vocabularies below and above its hundred.
    #[test]
    fn top_h_keeps_what_hugging_face_keeps(
        logits in logits_strategy(260),
        h in prop_oneof![Just(1.0), Just(0.5), 0.01f64..1.0],
        t in prop_oneof![Just(1.0), 0.3f64..2.0],
    ) {
        let policy = Policy {
            engine: Engine::Hf,
            temperature: t,
            top_h: Some(h),
            ..Policy::default()
        };
        let stages = stages(&policy, &logits).unwrap();
        let top_h = stages.iter().find(|s| s.stage == Stage::TopH).unwrap();
        let kept: Vec<u32> = top_h.tokens.iter().map(|t| t.id).collect();
        let scaled: Vec<f64> = logits.iter().map(|&l| f64::from(l) / t).collect();
        let expected: Vec<u32> = top_h_reference(&scaled, h)
            .iter()
            .enumerate()
            .filter(|(_, &k)| k)
            .map(|(i, _)| i as u32)
            .collect();
        prop_assert_eq!(kept, expected);
    }

    /// The dynamic temperature's final distribution is llama.cpp's, temperatures at or
    /// below the range included (where the low end is 0), over every exponent sign.
    #[test]
    fn dynamic_temperature_matches_llama_cpp(
        logits in logits_strategy(64),
        temp in prop_oneof![Just(0.0), Just(1.0), 0.1f64..2.0],
        delta in prop_oneof![Just(0.5), 0.01f64..2.0],
        exponent in prop_oneof![Just(1.0), Just(0.0), 0.1f64..3.0],
    ) {
        let policy = Policy {
            engine: Engine::LlamaCpp,
            temperature: temp,
            dynatemp_range: delta,
            dynatemp_exponent: exponent,
            ..Policy::default()
        };
        prop_assert!(!policy.is_greedy());
        let stages = stages(&policy, &logits).unwrap();
        let last = stages.last().unwrap();
        prop_assert_eq!(last.stage, Stage::Temperature);
        let mut got = vec![0.0; logits.len()];
        for t in &last.tokens {
            got[t.id as usize] = t.prob;
        }
        let raw: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
        let expected = temp_ext_reference(&raw, temp, delta, exponent);
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            prop_assert!((g - e).abs() <= 1e-9, "token {}: {} against {}", i, g, e);
        }
    }
}

/// A hand-worked case: four tokens with probabilities ½, ¼, ⅛, ⅛ have entropy
/// 1.75 ln 2; their entropy terms in descending order are ½ ln 2, ½ ln 2, ⅜ ln 2, ⅜ ln 2,
/// so the cumulative sums are 0.5, 1, 1.375 and 1.75 (× ln 2). Top-H 0.6 allows 1.05 ln 2:
/// the first two. Top-H 0.8 allows 1.4 ln 2: three.
#[test]
fn top_h_by_hand() {
    let logits = [2.0f32.ln(), 1.0f32.ln(), 0.5f32.ln(), 0.5f32.ln()];
    let kept = |h: f64| {
        let policy = Policy {
            engine: Engine::Hf,
            top_h: Some(h),
            ..Policy::default()
        };
        let stages = stages(&policy, &logits).unwrap();
        let top_h = stages.iter().find(|s| s.stage == Stage::TopH).unwrap();
        top_h.tokens.iter().map(|t| t.id).collect::<Vec<_>>()
    };
    assert_eq!(kept(0.6), [0, 1]);
    assert_eq!(kept(0.8), [0, 1, 2]);
    assert_eq!(kept(0.01), [0], "the most probable always");
}

/// Only the first hundred are weighed: the 101st token is removed even at top-H 1.
#[test]
fn top_h_weighs_the_hundred_most_probable() {
    let logits: Vec<f32> = (0..150).map(|i| -(i as f32) * 0.01).collect();
    let policy = Policy {
        engine: Engine::Hf,
        top_h: Some(1.0),
        ..Policy::default()
    };
    let stages = stages(&policy, &logits).unwrap();
    let top_h = stages.iter().find(|s| s.stage == Stage::TopH).unwrap();
    assert!(top_h.survivors <= 100, "{}", top_h.survivors);
    assert!(top_h.tokens.iter().all(|t| t.id < 100));
}

/// Where each engine stands: top-H is Hugging Face's (and the lab's), dynamic temperature
/// llama.cpp's (and the lab's); the others refuse each by name, and mirostat, whose chain
/// starts with llama.cpp's plain temperature, refuses a dynamic one.
#[test]
fn engines_without_them_refuse_them_by_name() {
    let top_h = |engine| Policy {
        engine,
        top_h: Some(0.4),
        ..Policy::default()
    };
    let dynamic = |engine| Policy {
        engine,
        dynatemp_range: 0.5,
        ..Policy::default()
    };
    for engine in [Engine::Lab, Engine::Hf] {
        top_h(engine).validate(10).unwrap();
    }
    for engine in [Engine::LlamaCpp, Engine::Vllm] {
        assert_eq!(
            top_h(engine).validate(10).unwrap_err().to_string(),
            format!("{engine} does not take top-h 0.4: it takes no such sampler")
        );
    }
    for engine in [Engine::Lab, Engine::LlamaCpp] {
        dynamic(engine).validate(10).unwrap();
    }
    for engine in [Engine::Hf, Engine::Vllm] {
        assert_eq!(
            dynamic(engine).validate(10).unwrap_err().to_string(),
            format!("{engine} does not take dynatemp-range 0.5: it takes no dynamic temperature")
        );
    }
    let bad_h = Policy {
        top_h: Some(1.5),
        ..top_h(Engine::Hf)
    };
    assert_eq!(
        bad_h.validate(10).unwrap_err().to_string(),
        "hf does not take top-h 1.5: it takes a top-h greater than 0 and at most 1"
    );
    let mirostat = Policy {
        mirostat: 2,
        ..dynamic(Engine::LlamaCpp)
    };
    assert_eq!(
        mirostat.validate(10).unwrap_err().to_string(),
        PolicyError::MirostatReplaces {
            knob: "dynatemp-range 0.5".into()
        }
        .to_string()
    );
}

/// The lab's temperature-last order runs top-H before the temperature, and a dynamic
/// temperature there reads the survivors' entropy: a chain of the same stages gives bit for
/// bit the same step, and the fixed path is left for both.
#[test]
fn the_fixed_orders_run_them_on_the_chain() {
    let logits: Vec<f32> = (0..40).map(|i| ((i * 7919) % 23) as f32 * 0.3).collect();
    let policy = Policy {
        order: StageOrder::TemperatureLast,
        top_h: Some(0.7),
        dynatemp_range: 0.4,
        temperature: 0.9,
        ..Policy::default()
    };
    let fixed = stages(&policy, &logits).unwrap();
    let chain = Policy {
        order: StageOrder::default(),
        samplers: Some(policy::parse_samplers("top_h;temperature").unwrap()),
        ..policy.clone()
    };
    assert_eq!(stages(&chain, &logits).unwrap(), fixed);
    let names: Vec<Stage> = fixed.iter().map(|s| s.stage).collect();
    assert_eq!(names, [Stage::Constraints, Stage::TopH, Stage::Temperature]);
}

/// Hugging Face's own cases (`test_top_h_dist_warper` in
/// `tests/generation/test_logits_process.py`, read in a copy of transformers at b0bd82a2):
/// log-probabilities in, the kept probabilities out. A probability of 0 is `log(0)`, a
/// removed token, which the step takes as a forbidden id.
#[test]
fn hugging_face_top_h_cases() {
    let cases: [(&[f32], f64, &[u32]); 4] = [
        (&[0.97, 0.01, 0.01, 0.01], 0.3, &[0]),
        (&[0.4, 0.3, 0.2, 0.1], 0.7, &[0, 1]),
        (&[0.25, 0.25, 0.25, 0.25], 1.0, &[0, 1, 2, 3]),
        (&[0.75, 0.25, 0.0, 0.0], 0.4, &[0]),
    ];
    for (probs, h, expected) in cases {
        let logits: Vec<f32> = probs
            .iter()
            .map(|&p| if p > 0.0 { p.ln() } else { 0.0 })
            .collect();
        let policy = Policy {
            engine: Engine::Hf,
            top_h: Some(h),
            forbidden: (0..probs.len() as u32)
                .filter(|&i| probs[i as usize] == 0.0)
                .collect(),
            ..Policy::default()
        };
        let stages = stages(&policy, &logits).unwrap();
        let top_h = stages.iter().find(|s| s.stage == Stage::TopH).unwrap();
        let kept: Vec<u32> = top_h.tokens.iter().map(|t| t.id).collect();
        assert_eq!(kept, expected, "{probs:?} at top-h {h}");
    }
}

/// llama.cpp's own `test_temp_ext` cases (`tests/test-sampling.cpp` at f0817df5): both
/// have a range of 0, so `temp-ext` is the plain temperature (1 leaves the distribution,
/// 0 keeps the top token). No upstream case has a range above 0; the dynamic path is held
/// to the transcription above.
#[test]
fn llama_cpp_temp_ext_cases() {
    let probs = [0.1f32, 0.2, 0.3, 0.4];
    let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    for (temp, expected) in [(1.0, [0.1, 0.2, 0.3, 0.4]), (0.0, [0.0, 0.0, 0.0, 1.0])] {
        let policy = Policy {
            engine: Engine::LlamaCpp,
            temperature: temp,
            dynatemp_range: 0.0,
            dynatemp_exponent: 1.0,
            ..Policy::default()
        };
        let outcome = step(
            &policy,
            &logits,
            StepContext::default(),
            &mut NumpyRng::new(0),
            Snapshots::Record,
        )
        .unwrap();
        let last = outcome.stages.unwrap().pop().unwrap();
        let mut got = [0.0; 4];
        for t in &last.tokens {
            got[t.id as usize] = t.prob;
        }
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-5, "temp {temp}: {got:?}");
        }
    }
}
