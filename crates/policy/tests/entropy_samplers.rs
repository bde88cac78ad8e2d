//! The two samplers set by the entropy of the distribution they are given, against line-by-
//! line transcriptions of the peers' code (in f64, where the peers compute in f32):
//!
//! - top-H, Hugging Face's `TopHLogitsWarper.__call__` (`generation/logits_process.py` at
//!   00857b6c), under the hf engine, where it runs after the temperature;
//! - dynamic temperature, llama.cpp's `llama_sampler_temp_ext_apply`
//!   (`src/llama-sampling.cpp` at e19fb5f1), under the llama.cpp engine, where it is the
//!   chain's temperature sampler.

use policy::{step, Engine, NumpyRng, Policy, PolicyError, Snapshots, Stage, StepContext};
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
    // 3. tau = dist.entropy() * top_h. Categorical.entropy multiplies probs by its
    //    normalised logits (clamped to the type's finite minimum); here by log(probs), the
    //    same values but for rounding. The rounding decides h = 1's last token: the sums
    //    here (and the lab's) are the same sequence as the running sum below, so h = 1
    //    keeps every one of the hundred, where HF's f32 may drop the last.
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
/// chain's `dist`, over llama.cpp's array: `(id, logit)` in the array's order, a masked
/// token at −inf. The final probability of each id, and the dynamic temperature (none
/// where an array of one is left untouched); `None` where llama.cpp's own result is NaN (a
/// NaN temperature, or an infinite one beside a masked token).
fn temp_ext_reference(
    array: &[(u32, f64)],
    vocab: usize,
    temp: f64,
    delta: f64,
    exponent: f64,
) -> Option<(Vec<f64>, Option<f64>)> {
    let mut out = vec![0.0; vocab];
    let min_temp = (temp - delta).max(0.0);
    let max_temp = temp + delta;
    if array.len() <= 1 {
        out[array[0].0 as usize] = 1.0;
        return Some((out, None));
    }
    let max_entropy = -(1.0 / array.len() as f64).ln();
    // llama_sampler_softmax_impl
    let max = array.iter().map(|a| a.1).fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = array.iter().map(|a| (a.1 - max).exp()).collect();
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
    // An infinite temperature makes a masked token's logit −inf / inf, NaN, and every
    // probability of llama.cpp's softmax NaN with it (the lab keeps the masked token at 0).
    if dyn_temp.is_nan() || dyn_temp.is_infinite() && array.iter().any(|a| a.1.is_infinite()) {
        return None;
    }
    // llama_sampler_temp_impl: at most 0 keeps the first highest logit of the array alone.
    if dyn_temp <= 0.0 {
        let mut best = 0;
        for (i, a) in array.iter().enumerate() {
            if a.1 > array[best].1 {
                best = i;
            }
        }
        out[array[best].0 as usize] = 1.0;
        return Some((out, Some(dyn_temp)));
    }
    let scaled: Vec<f64> = array.iter().map(|a| a.1 / dyn_temp).collect();
    let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = scaled.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    for (a, e) in array.iter().zip(&exps) {
        out[a.0 as usize] = e / sum;
    }
    Some((out, Some(dyn_temp)))
}

/// llama.cpp's array after its logit-bias sampler (`forbidden` at −inf) and top-k
/// (`llama_sampler_top_k_impl`: sorted descending, the first k kept; ties by id here).
fn llama_array(logits: &[f64], forbidden: &[bool], top_k: usize) -> Vec<(u32, f64)> {
    let mut array: Vec<(u32, f64)> = logits
        .iter()
        .zip(forbidden)
        .enumerate()
        .map(|(i, (&l, &f))| (i as u32, if f { f64::NEG_INFINITY } else { l }))
        .collect();
    if top_k > 0 {
        array.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        array.truncate(top_k.min(array.len()));
    }
    array
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

/// The ids top-H's stage kept, ascending.
fn kept_by_top_h(policy: &Policy, logits: &[f32]) -> Vec<u32> {
    let stages = stages(policy, logits).unwrap();
    let top_h = stages.iter().find(|s| s.stage == Stage::TopH).unwrap();
    top_h.tokens.iter().map(|t| t.id).collect()
}

/// A stage's probability of every id of a `vocab`-token vocabulary (0 for one it removed).
fn probs_by_id(snapshot: &policy::StageSnapshot, vocab: usize) -> Vec<f64> {
    let mut probs = vec![0.0; vocab];
    for t in &snapshot.tokens {
        probs[t.id as usize] = t.prob;
    }
    probs
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
        let kept = kept_by_top_h(&policy, &logits);
        let scaled: Vec<f64> = logits.iter().map(|&l| f64::from(l) / t).collect();
        let expected: Vec<u32> = top_h_reference(&scaled, h)
            .iter()
            .enumerate()
            .filter(|(_, &k)| k)
            .map(|(i, _)| i as u32)
            .collect();
        prop_assert_eq!(kept, expected);
    }

    /// The dynamic temperature's final distribution is llama.cpp's: over the array its
    /// `temperature` sampler is given (top-k before it, masked tokens still in it at −inf,
    /// which its ln N counts), at temperatures below the range (where the low end is 0) and
    /// below 0, with exponents of either sign.
    #[test]
    fn dynamic_temperature_matches_llama_cpp(
        logits in logits_strategy(64),
        forbidden in prop::collection::vec(prop::bool::weighted(0.2), 64),
        top_k in prop_oneof![Just(0usize), 1usize..12],
        temp in prop_oneof![Just(0.0), Just(1.0), -1.0f64..2.0],
        delta in prop_oneof![Just(0.5), 0.01f64..2.0],
        exponent in prop_oneof![Just(1.0), Just(0.0), -3.0f64..3.0],
    ) {
        let forbidden = &forbidden[..logits.len()];
        prop_assume!(forbidden.contains(&false));
        let policy = Policy {
            engine: Engine::LlamaCpp,
            temperature: temp,
            top_k,
            dynatemp_range: delta,
            dynatemp_exponent: exponent,
            forbidden: (0..logits.len() as u32).filter(|&i| forbidden[i as usize]).collect(),
            ..Policy::default()
        };
        prop_assert!(!policy.is_greedy());
        let raw: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
        let array = llama_array(&raw, forbidden, top_k);
        let expected = temp_ext_reference(&array, logits.len(), temp, delta, exponent);
        prop_assume!(expected.is_some());
        let (expected, dynamic) = expected.unwrap();
        let stages = stages(&policy, &logits).unwrap();
        let last = stages.last().unwrap();
        prop_assert_eq!(last.stage, Stage::Temperature);
        // The snapshot says the temperature the entropy set. x^y at a tiny x (an entropy
        // near 0, from a cancellation) carries x's rounding times |y|, so the two agree to a
        // relative 1e-6 (and temperatures below 1e-12, greedy in effect, absolutely).
        match (last.temperature, dynamic) {
            (Some(got), Some(t)) => prop_assert!(
                got == t || (got - t).abs() <= 1e-6 * t.abs() + 1e-12,
                "dynamic temperature {} against {}", got, t
            ),
            (got, t) => prop_assert_eq!(got, t),
        }
        let got = probs_by_id(last, logits.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            prop_assert!((g - e).abs() <= 1e-9, "token {}: {} against {}", i, g, e);
        }
    }
}

/// llama.cpp's top-nσ masks the tokens it removes at −inf and keeps them in its array, so
/// a dynamic temperature after it divides the entropy by the log of every token's count;
/// a probability of 0 (logits 800 apart) makes the entropy 0, and the low end of the range
/// runs.
#[test]
fn dynamic_temperature_counts_what_top_n_sigma_masked() {
    let logits = [3.0f32, 2.5, 0.0, -1.0, -2.0];
    let raw: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
    let policy = Policy {
        engine: Engine::LlamaCpp,
        top_n_sigma: Some(1.0),
        dynatemp_range: 0.5,
        ..Policy::default()
    };
    // Population σ over the five; a logit below max − σ is masked.
    let mean = raw.iter().sum::<f64>() / 5.0;
    let sigma = (raw.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 5.0).sqrt();
    let array: Vec<(u32, f64)> = raw
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            (
                i as u32,
                if l < 3.0 - sigma {
                    f64::NEG_INFINITY
                } else {
                    l
                },
            )
        })
        .collect();
    assert_eq!(array.iter().filter(|a| a.1.is_finite()).count(), 2);
    let (expected, _) = temp_ext_reference(&array, 5, 1.0, 0.5, 1.0).unwrap();
    let last = stages(&policy, &logits).unwrap().pop().unwrap();
    let got = probs_by_id(&last, 5);
    for (g, e) in got.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-12, "{got:?} against {expected:?}");
    }

    let flat = [0.0f32, -800.0];
    let low_end = Policy {
        engine: Engine::LlamaCpp,
        temperature: 1.0,
        dynatemp_range: 0.5,
        ..Policy::default()
    };
    let last = stages(&low_end, &flat).unwrap().pop().unwrap();
    let raw: Vec<(u32, f64)> = vec![(0, 0.0), (1, -800.0)];
    let (expected, dynamic) = temp_ext_reference(&raw, 2, 1.0, 0.5, 1.0).unwrap();
    assert_eq!(last.tokens[0].prob, expected[0]);
    assert_eq!(
        dynamic,
        Some(0.5),
        "entropy 0: the low end, max(0, 1 − 0.5)"
    );
    assert_eq!(last.temperature, Some(0.5));
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
        kept_by_top_h(&policy, &logits)
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
    let kept = kept_by_top_h(&policy, &logits);
    assert_eq!(kept, (0..100).collect::<Vec<u32>>());
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
        let kept = kept_by_top_h(&policy, &logits);
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
        let last = stages(&policy, &logits).unwrap().pop().unwrap();
        let got = probs_by_id(&last, 4);
        for (g, e) in got.iter().zip(expected) {
            assert!((g - e).abs() < 1e-5, "temp {temp}: {got:?}");
        }
    }
}
