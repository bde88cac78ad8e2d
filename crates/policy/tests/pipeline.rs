//! The pipeline against a deliberately naive reference: dense vectors, full sorts, the
//! textbook definition of every stage. Property tests cover random vocabularies, ties,
//! every stage and both orders; unit tests pin each stage's semantics on small numbers.

use policy::{
    step, Logit, NumpyRng, Policy, PolicyError, Snapshots, Stage, StageOrder, StepContext,
    StepOutcome, TokenProb,
};
use proptest::prelude::*;

/// Probabilities of the pipeline and the naive reference agree to this absolute tolerance.
const TOLERANCE: f64 = 1e-9;

/// The final distribution over the whole vocabulary, computed the obvious way.
fn reference(policy: &Policy, logits: &[f64], tokens: &[u32], prompt_len: usize) -> Vec<f64> {
    let v = logits.len();
    let mut l = logits.to_vec();
    for &(id, bias) in &policy.logit_bias {
        l[id as usize] += bias;
    }
    for (id, x) in l.iter_mut().enumerate() {
        if tokens.contains(&(id as u32)) {
            let r = policy.repetition_penalty;
            *x = if *x > 0.0 { *x / r } else { *x * r };
        }
    }
    let generated = &tokens[prompt_len..];
    for (id, x) in l.iter_mut().enumerate() {
        let count = generated.iter().filter(|&&t| t as usize == id).count() as f64;
        if count > 0.0 {
            *x -= count * policy.frequency_penalty + policy.presence_penalty;
        }
    }
    let n = policy.no_repeat_ngram;
    if n > 0 && tokens.len() + 1 >= n {
        let prefix = &tokens[tokens.len() + 1 - n..];
        for w in tokens.windows(n) {
            if &w[..n - 1] == prefix {
                l[w[n - 1] as usize] = f64::NEG_INFINITY;
            }
        }
    }
    if let Some(eos) = policy.eos_token {
        if generated.len() < policy.min_new_tokens {
            l[eos as usize] = f64::NEG_INFINITY;
        }
    }
    for &id in &policy.forbidden {
        l[id as usize] = f64::NEG_INFINITY;
    }
    let softmax = |z: &[f64]| {
        let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = z.iter().map(|x| (x - max).exp()).collect();
        let s: f64 = e.iter().sum();
        e.into_iter().map(|x| x / s).collect::<Vec<f64>>()
    };
    if l.iter().all(|&x| x == f64::NEG_INFINITY) {
        return vec![f64::NAN; v];
    }
    if policy.temperature == 0.0 {
        let max = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let first = l.iter().position(|&x| x == max).unwrap();
        return (0..v).map(|i| if i == first { 1.0 } else { 0.0 }).collect();
    }
    let ft = match policy.order {
        StageOrder::TemperatureFirst => policy.temperature,
        StageOrder::TemperatureLast => 1.0,
    };
    let mut z: Vec<f64> = l.iter().map(|x| x / ft).collect();
    if policy.top_k > 0 {
        let mut sorted = z.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[(policy.top_k - 1).min(v - 1)];
        z.iter_mut()
            .filter(|x| **x < kth)
            .for_each(|x| *x = f64::NEG_INFINITY);
    }
    if policy.top_p < 1.0 {
        let p = softmax(&z);
        let keep: Vec<bool> = (0..v)
            .map(|i| p.iter().filter(|&&q| q > p[i]).sum::<f64>() < policy.top_p)
            .collect();
        (0..v)
            .filter(|&i| !keep[i])
            .for_each(|i| z[i] = f64::NEG_INFINITY);
    }
    if policy.min_p > 0.0 {
        let p = softmax(&z);
        let max = p.iter().copied().fold(0.0, f64::max);
        (0..v)
            .filter(|&i| p[i] < policy.min_p * max)
            .for_each(|i| z[i] = f64::NEG_INFINITY);
    }
    let final_logits: Vec<f64> = (0..v)
        .map(|i| {
            if z[i] == f64::NEG_INFINITY {
                f64::NEG_INFINITY
            } else {
                l[i] / policy.temperature
            }
        })
        .collect();
    softmax(&final_logits)
}

/// The final distribution the pipeline reports, spread over the whole vocabulary.
fn final_distribution(outcome: &StepOutcome, v: usize) -> Vec<f64> {
    let last = outcome.stages.as_ref().unwrap().last().unwrap();
    let mut p = vec![0.0; v];
    for t in &last.tokens {
        p[t.id as usize] = t.prob;
    }
    p
}

fn run(
    policy: &Policy,
    logits: &[f64],
    tokens: &[u32],
    prompt_len: usize,
    seed: u64,
) -> StepOutcome {
    let mut rng = NumpyRng::new(seed);
    step(
        policy,
        logits,
        StepContext::new(tokens, prompt_len),
        &mut rng,
        Snapshots::Record,
    )
    .unwrap()
}

fn arb_case() -> impl Strategy<Value = (Policy, Vec<f64>, Vec<u32>, usize, u64)> {
    (2usize..300).prop_flat_map(|v| {
        let logits = prop::collection::vec(
            prop_oneof![
                (-80i32..80).prop_map(|x| f64::from(x) / 8.0),
                -20.0f64..20.0
            ],
            v,
        );
        let ids = prop::collection::vec(0..v as u32, 0..12);
        let policy = (
            prop_oneof![Just(0.0), 0.05f64..3.0],
            prop_oneof![Just(0usize), 1..v + 2],
            prop_oneof![Just(1.0), 0.01f64..1.0],
            prop_oneof![Just(0.0), 0.0f64..1.0],
            prop_oneof![Just(1.0), 0.5f64..2.0],
            (-1.0f64..1.0, -1.0f64..1.0),
            0usize..4,
            prop::sample::select(StageOrder::ALL.to_vec()),
            prop::collection::vec((0..v as u32, -3.0f64..3.0), 0..3),
        );
        (logits, ids.clone(), ids, policy, 0usize..12, any::<u64>()).prop_map(
            move |(logits, forbidden, tokens, p, prompt_len, seed)| {
                let (temperature, top_k, top_p, min_p, rep, (freq, pres), ngram, order, bias) = p;
                let mut forbidden = forbidden;
                forbidden.truncate(v - 1); // leave at least one token alive
                forbidden.retain(|&id| id != 0);
                let policy = Policy {
                    forbidden,
                    logit_bias: bias,
                    repetition_penalty: rep,
                    frequency_penalty: freq,
                    presence_penalty: pres,
                    no_repeat_ngram: ngram,
                    min_new_tokens: 2,
                    eos_token: Some(1),
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                    order,
                    ..Policy::default()
                };
                let prompt_len = prompt_len.min(tokens.len());
                (policy, logits, tokens, prompt_len, seed)
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn matches_the_naive_reference((policy, logits, tokens, prompt_len, seed) in arb_case()) {
        let mut rng = NumpyRng::new(seed);
        let result = step(&policy, &logits, StepContext::new(&tokens, prompt_len), &mut rng, Snapshots::Record);
        let expected = reference(&policy, &logits, &tokens, prompt_len);
        let outcome = match result {
            // The n-gram ban and forbidden ids together may mask the whole vocabulary.
            Err(PolicyError::AllTokensMasked { .. }) => {
                prop_assert!(expected.iter().all(|p| p.is_nan()));
                return Ok(());
            }
            other => other.unwrap(),
        };
        let got = final_distribution(&outcome, logits.len());
        for (id, (g, e)) in got.iter().zip(&expected).enumerate() {
            prop_assert!((g - e).abs() <= TOLERANCE, "token {id}: pipeline {g}, reference {e}");
            if *e == 0.0 {
                prop_assert_eq!(*g, 0.0, "filtered token {} must have probability exactly 0", id);
            }
        }
        prop_assert!((got.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        prop_assert!(got[outcome.token as usize] > 0.0);
        prop_assert!((outcome.prob - got[outcome.token as usize]).abs() <= TOLERANCE);

        // The draw picks the token NumPy's choice() would pick from the id-ordered survivors.
        if let Some(u) = outcome.draw {
            let ids: Vec<usize> = (0..got.len()).filter(|&i| got[i] > 0.0).collect();
            let total: f64 = ids.iter().map(|&i| got[i]).sum();
            let mut cum = 0.0;
            let pick = ids.iter().copied().find(|&i| { cum += got[i]; cum / total > u }).unwrap();
            prop_assert_eq!(pick, outcome.token as usize);
        }

        // The same seed gives the same token; snapshots change nothing.
        let mut rng = NumpyRng::new(seed);
        let again = step(&policy, &logits, StepContext::new(&tokens, prompt_len), &mut rng, Snapshots::Skip).unwrap();
        prop_assert_eq!(again.token, outcome.token);
        prop_assert!(again.stages.is_none());

        // Lowering the temperature never changes the argmax: the most probable token is the
        // greedy choice at every temperature.
        let greedy = Policy { temperature: 0.0, ..policy.clone() };
        let mut rng = NumpyRng::new(seed);
        let g = step(&greedy, &logits, StepContext::new(&tokens, prompt_len), &mut rng, Snapshots::Skip).unwrap();
        prop_assert_eq!(outcome.top[0].id, g.token);
    }

    #[test]
    fn f32_logits_give_the_f64_result(logits in prop::collection::vec(-10.0f32..10.0, 2..200), seed: u64) {
        let policy = Policy { temperature: 0.8, top_k: 20, top_p: 0.9, ..Policy::default() };
        let wide: Vec<f64> = logits.iter().map(|&x| f64::from(x)).collect();
        let a = step(&policy, &logits, StepContext::default(), &mut NumpyRng::new(seed), Snapshots::Skip).unwrap();
        let b = step(&policy, &wide, StepContext::default(), &mut NumpyRng::new(seed), Snapshots::Skip).unwrap();
        prop_assert_eq!(a, b);
    }
}

/// The tokens the first stage (the constraints) reported in a step.
fn constrained(outcome: StepOutcome) -> Vec<TokenProb> {
    outcome.stages.unwrap().swap_remove(0).tokens
}

fn survivors(policy: &Policy, logits: &[f64]) -> Vec<u32> {
    let outcome = run(policy, logits, &[], 0, 0);
    outcome
        .stages
        .unwrap()
        .last()
        .unwrap()
        .tokens
        .iter()
        .map(|t| t.id)
        .collect()
}

#[test]
fn top_k_keeps_ties_at_the_kth_value() {
    let policy = Policy {
        top_k: 2,
        ..Policy::default()
    };
    assert_eq!(survivors(&policy, &[3.0, 1.0, 2.0, 2.0, 0.0]), [0, 2, 3]);
}

#[test]
fn top_p_always_keeps_the_most_probable_token() {
    let policy = Policy {
        top_p: 1e-9,
        ..Policy::default()
    };
    assert_eq!(survivors(&policy, &[0.0, 5.0, 1.0]), [1]);
}

#[test]
fn min_p_is_relative_to_the_top_probability() {
    // exp(-1) = 0.368 of the top passes min-p 0.3; exp(-2) = 0.135 does not.
    let policy = Policy {
        min_p: 0.3,
        ..Policy::default()
    };
    assert_eq!(survivors(&policy, &[2.0, 1.0, 0.0]), [0, 1]);
}

#[test]
fn temperature_last_changes_what_min_p_keeps() {
    // At temperature 3 first, exp(-2/3) = 0.51 of the top survives min-p 0.3; with
    // temperature last, min-p sees exp(-2) = 0.135 and removes the token.
    let logits = [2.0, 0.0];
    let first = Policy {
        temperature: 3.0,
        min_p: 0.3,
        ..Policy::default()
    };
    let last = Policy {
        order: StageOrder::TemperatureLast,
        ..first.clone()
    };
    assert_eq!(survivors(&first, &logits), [0, 1]);
    assert_eq!(survivors(&last, &logits), [0]);
}

#[test]
fn repetition_penalty_follows_hugging_face() {
    let policy = Policy {
        repetition_penalty: 2.0,
        ..Policy::default()
    };
    let constrained = constrained(run(&policy, &[4.0, -1.0, 1.0], &[0, 1], 2, 0));
    let logits: Vec<f64> = constrained.iter().map(|t| t.logit).collect();
    assert_eq!(logits, [2.0, -2.0, 1.0]);
}

#[test]
fn frequency_and_presence_count_generated_tokens_only() {
    let policy = Policy {
        frequency_penalty: 0.5,
        presence_penalty: 1.0,
        ..Policy::default()
    };
    // Token 0 is in the prompt only; token 1 was generated twice.
    let constrained = constrained(run(&policy, &[0.0, 0.0, 0.0], &[0, 1, 1], 1, 0));
    let logits: Vec<f64> = constrained.iter().map(|t| t.logit).collect();
    assert_eq!(logits, [0.0, -2.0, 0.0]);
}

#[test]
fn no_repeat_ngram_bans_the_completing_token() {
    let policy = Policy {
        no_repeat_ngram: 2,
        ..Policy::default()
    };
    let constrained = constrained(run(&policy, &[0.0, 0.0, 0.0], &[1, 2, 1], 3, 0));
    let ids: Vec<u32> = constrained.iter().map(|t| t.id).collect();
    assert_eq!(ids, [0, 1]);
}

#[test]
fn min_new_tokens_masks_end_of_sequence() {
    let policy = Policy {
        eos_token: Some(0),
        min_new_tokens: 1,
        temperature: 0.0,
        ..Policy::default()
    };
    assert_eq!(run(&policy, &[9.0, 1.0], &[1], 1, 0).token, 1);
    assert_eq!(run(&policy, &[9.0, 1.0], &[1, 1], 1, 0).token, 0);
}

#[test]
fn greedy_ties_go_to_the_lowest_id() {
    let policy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    let outcome = run(&policy, &[1.0, 3.0, 3.0], &[], 0, 0);
    assert_eq!((outcome.token, outcome.prob, outcome.draw), (1, 1.0, None));
}

#[test]
fn stages_are_reported_in_pipeline_order() {
    let policy = Policy {
        top_k: 3,
        top_p: 0.9,
        min_p: 0.05,
        ..Policy::default()
    };
    let outcome = run(&policy, &[1.0, 2.0, 3.0, 4.0], &[], 0, 0);
    let stages: Vec<Stage> = outcome.stages.unwrap().iter().map(|s| s.stage).collect();
    assert_eq!(
        stages,
        [
            Stage::Constraints,
            Stage::Temperature,
            Stage::TopK,
            Stage::TopP,
            Stage::MinP
        ]
    );
}

#[test]
fn bad_input_names_the_value() {
    let ok = Policy::default();
    let err = |policy: &Policy, logits: &[f64]| bare_step(policy, logits, 0).unwrap_err();
    assert_eq!(err(&ok, &[]), PolicyError::EmptyVocabulary);
    assert_eq!(
        err(&ok, &[0.0, f64::INFINITY]),
        PolicyError::NonFiniteLogit {
            index: 1,
            value: f64::INFINITY
        }
    );
    assert!(matches!(
        err(&ok, &[f64::NAN, 0.0]),
        PolicyError::NonFiniteLogit { index: 0, .. }
    ));
    let t = |temperature| Policy {
        temperature,
        ..Policy::default()
    };
    assert_eq!(
        err(&t(-0.5), &[0.0, 1.0]),
        PolicyError::InvalidTemperature(-0.5)
    );
    assert!(
        matches!(err(&t(f64::NAN), &[0.0, 1.0]), PolicyError::InvalidTemperature(v) if v.is_nan())
    );
    for top_p in [0.0, -0.1, 1.5] {
        let policy = Policy {
            top_p,
            ..Policy::default()
        };
        assert_eq!(err(&policy, &[0.0, 1.0]), PolicyError::InvalidTopP(top_p));
    }
    for min_p in [-0.1, 1.5] {
        let policy = Policy {
            min_p,
            ..Policy::default()
        };
        assert_eq!(err(&policy, &[0.0, 1.0]), PolicyError::InvalidMinP(min_p));
    }
    for repetition_penalty in [0.0, -1.0] {
        let policy = Policy {
            repetition_penalty,
            ..Policy::default()
        };
        assert_eq!(
            err(&policy, &[0.0, 1.0]),
            PolicyError::InvalidRepetitionPenalty(repetition_penalty)
        );
    }
    let policy = Policy {
        forbidden: vec![7],
        ..Policy::default()
    };
    assert_eq!(
        err(&policy, &[0.0, 1.0]).to_string(),
        "forbidden token id 7 is out of range for a vocabulary of 2 tokens"
    );
    let policy = Policy {
        forbidden: vec![0, 1],
        ..Policy::default()
    };
    assert_eq!(
        err(&policy, &[0.0, 1.0]),
        PolicyError::AllTokensMasked { vocab: 2 }
    );
}

#[test]
fn largest_vocabulary_works() {
    let logits: Vec<f32> = (0..262_144)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0)
        .collect();
    let policy = Policy {
        top_p: 0.9,
        temperature: 0.7,
        ..Policy::default()
    };
    let outcome = bare_step(&policy, &logits, 1).unwrap();
    assert!(outcome.prob > 0.0 && outcome.survivors > 1);
}

#[test]
fn large_vocabularies_match_the_reference() {
    // Big enough for top-k's chunked scan to skip chunks and for top-p's histogram to
    // resolve a crowded crossing bucket; f32 logits as a model gives them.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let logits: Vec<f32> = (0..3000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 12.0
        })
        .collect();
    let wide: Vec<f64> = logits.iter().map(|&x| f64::from(x)).collect();
    for policy in [
        Policy {
            temperature: 0.8,
            top_k: 50,
            top_p: 0.9,
            ..Policy::default()
        },
        Policy {
            temperature: 0.8,
            top_p: 0.9,
            ..Policy::default()
        },
        Policy {
            temperature: 2.0,
            top_p: 0.5,
            min_p: 0.01,
            ..Policy::default()
        },
        // A bias lifts a low logit far above its chunk's raw maximum; penalties lower others.
        Policy {
            temperature: 0.8,
            top_k: 5,
            logit_bias: vec![(17, 30.0), (2999, -50.0)],
            repetition_penalty: 1.5,
            ..Policy::default()
        },
        Policy {
            temperature: 1.3,
            top_k: 700,
            top_p: 0.97,
            order: StageOrder::TemperatureLast,
            ..Policy::default()
        },
    ] {
        let mut rng = NumpyRng::new(3);
        let outcome = step(
            &policy,
            &logits,
            StepContext::default(),
            &mut rng,
            Snapshots::Record,
        )
        .unwrap();
        let got = final_distribution(&outcome, logits.len());
        let expected = reference(&policy, &wide, &[], 0);
        for (id, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert!(
                (g - e).abs() <= TOLERANCE,
                "{policy:?} token {id}: {g} vs {e}"
            );
            assert_eq!(
                *g == 0.0,
                *e == 0.0,
                "{policy:?} token {id} survives on one side only"
            );
        }
    }
}

#[test]
fn every_non_finite_logit_is_found_on_both_paths() {
    for vocab in [5usize, 64, 70, 130, 600] {
        for at in [0, 3, vocab / 2, vocab - 1] {
            for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut logits = vec![0.5f32; vocab];
                logits[at] = bad;
                for top_k in [0, 2] {
                    let policy = Policy {
                        top_k,
                        ..Policy::default()
                    };
                    let err = bare_step(&policy, &logits, 0).unwrap_err();
                    assert!(
                        matches!(err, PolicyError::NonFiniteLogit { index, .. } if index == at),
                        "vocab {vocab}, {bad} at {at}, top-k {top_k}: {err:?}"
                    );
                }
            }
        }
    }
}

/// A step from `logits` (f32 or f64) under `policy` from seed `seed`, with no context and no
/// snapshots.
fn bare_step<L: Logit>(
    policy: &Policy,
    logits: &[L],
    seed: u64,
) -> Result<StepOutcome, PolicyError> {
    step(
        policy,
        logits,
        StepContext::default(),
        &mut NumpyRng::new(seed),
        Snapshots::Skip,
    )
}

/// A step from `logits` under `policy` with context `tokens` (all generated), snapshots on.
fn try_step(policy: &Policy, logits: &[f64], tokens: &[u32]) -> Result<StepOutcome, PolicyError> {
    step(
        policy,
        logits,
        StepContext::new(tokens, 0),
        &mut NumpyRng::new(7),
        Snapshots::Record,
    )
}

#[test]
fn finite_extremes_that_overflow_name_the_stage_and_the_value() {
    let cases: [(Policy, &[f64], &[u32], &str); 7] = [
        (
            Policy {
                logit_bias: vec![(0, 1e308)],
                ..Policy::default()
            },
            &[1e308, 1.0],
            &[],
            "logit bias 1e308 takes logit 0 from 1e308 to inf, beyond the range of a float",
        ),
        (
            Policy {
                presence_penalty: -1e308,
                ..Policy::default()
            },
            &[1e308, 1.0],
            &[0],
            "frequency penalty 0 (for 1 occurrence) with presence penalty -1e308 takes \
             logit 0 from 1e308 to inf",
        ),
        (
            Policy {
                frequency_penalty: 1e308,
                ..Policy::default()
            },
            &[1.0, 2.0],
            &[1, 1],
            "frequency penalty 1e308 (for 2 occurrences) with presence penalty 0 takes \
             logit 1 from 2 to -inf",
        ),
        (
            Policy {
                repetition_penalty: 1e-320,
                ..Policy::default()
            },
            &[1.2, 0.5],
            &[0],
            "repetition penalty 1e-320 takes logit 0 from 1.2 to inf",
        ),
        (
            Policy {
                temperature: 1e-310,
                ..Policy::default()
            },
            &[1.2, 0.5],
            &[],
            "temperature 1e-310 scales logit 0 (1.2) to inf, beyond the range of a float",
        ),
        (
            Policy {
                temperature: 0.5,
                ..Policy::default()
            },
            &[1e308, 1.0],
            &[],
            "temperature 0.5 scales logit 0 (1e308) to inf",
        ),
        (
            Policy {
                temperature: 0.5,
                top_k: 1,
                order: StageOrder::TemperatureLast,
                ..Policy::default()
            },
            &[-1e308, -1.7e308],
            &[],
            "temperature 0.5 scales logit 0 (-1e308) to -inf",
        ),
    ];
    for (policy, logits, tokens, phrase) in cases {
        for snapshots in [Snapshots::Record, Snapshots::Skip] {
            let err = step(
                &policy,
                logits,
                StepContext::new(tokens, 0),
                &mut NumpyRng::new(7),
                snapshots,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(phrase), "{err:?} lacks {phrase:?}");
        }
    }
}

#[test]
fn extremes_that_stay_finite_are_chosen_from() {
    // A logit filtered out before the temperature is applied last is never scaled.
    let policy = Policy {
        temperature: 0.5,
        top_k: 1,
        order: StageOrder::TemperatureLast,
        ..Policy::default()
    };
    let outcome = try_step(&policy, &[1.0, -1e308], &[]).unwrap();
    assert_eq!((outcome.token, outcome.prob), (0, 1.0));
    // A forbidden token's logit takes no part; huge gaps give exact zeros, not NaN.
    let policy = Policy {
        forbidden: vec![1],
        temperature: 1e-300,
        ..Policy::default()
    };
    let outcome = try_step(&policy, &[1e-10, 1e10, -1e-10], &[]).unwrap();
    assert_eq!(
        (outcome.token, outcome.prob, outcome.entropy),
        (0, 1.0, 0.0)
    );
    // f32 logits at a tiny temperature: the largest f32 over it still overflows.
    let policy = Policy {
        temperature: 1e-300,
        ..Policy::default()
    };
    let logits = [1.0f32, f32::MAX];
    let err = bare_step(&policy, &logits, 0).unwrap_err();
    assert!(
        matches!(err, PolicyError::TemperatureOverflow { index: 1, .. }),
        "{err}"
    );
}

#[test]
fn a_draw_from_outside_must_be_a_uniform() {
    for draw in [1.0, -0.1, f64::NAN, f64::INFINITY] {
        let err = policy::Stepper::default()
            .step_with_draw(
                &Policy::default(),
                &[0.0f32, 1.0],
                StepContext::default(),
                draw,
                Snapshots::Skip,
            )
            .unwrap_err();
        assert!(matches!(err, PolicyError::InvalidDraw(_)), "{err}");
    }
}

#[test]
fn messages_print_numbers_in_their_shortest_form() {
    let t = |temperature| Policy {
        temperature,
        ..Policy::default()
    };
    assert_eq!(
        try_step(&t(-1e-310), &[0.0, 1.0], &[])
            .unwrap_err()
            .to_string(),
        "temperature -1e-310 is invalid: it must be a finite number, at least 0 (0 means greedy)"
    );
    let policy = Policy {
        logit_bias: vec![(0, f64::NAN)],
        min_p: 1e300,
        ..Policy::default()
    };
    assert_eq!(
        try_step(&policy, &[0.0, 1.0], &[]).unwrap_err().to_string(),
        "min-p 1e300 is invalid: it must be between 0 and 1"
    );
    assert_eq!(
        try_step(&Policy::default(), &[0.0, f64::NEG_INFINITY], &[])
            .unwrap_err()
            .to_string(),
        "logit 1 is -inf, but every logit must be a finite number"
    );
}

/// Finite floats of every kind: zero, subnormal, normal, and the extremes.
fn any_finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => -20.0f64..20.0,
        1 => prop::num::f64::POSITIVE
            | prop::num::f64::NEGATIVE
            | prop::num::f64::NORMAL
            | prop::num::f64::SUBNORMAL
            | prop::num::f64::ZERO,
        1 => prop::sample::select(vec![
            f64::MAX,
            -f64::MAX,
            1e308,
            -1e308,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            1e-310,
            0.0,
        ]),
    ]
}

/// Positive finite floats, the extremes included.
fn any_positive() -> impl Strategy<Value = f64> {
    prop_oneof![
        2 => 0.05f64..3.0,
        1 => prop::num::f64::POSITIVE | prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL,
        1 => prop::sample::select(vec![f64::MAX, 1e308, f64::MIN_POSITIVE, 5e-324, 1e-310, 1.0]),
    ]
    .prop_filter("positive", |x| *x > 0.0)
}

fn extreme_case() -> impl Strategy<Value = (Policy, Vec<f64>, Vec<u32>, usize)> {
    prop_oneof![2 => 1usize..12, 1 => 250usize..300].prop_flat_map(|v| {
        let knobs = (
            prop_oneof![Just(0.0), any_positive()],
            prop_oneof![Just(0usize), 1..v + 1],
            prop_oneof![Just(1.0), 0.001f64..1.0],
            prop_oneof![Just(0.0), 0.0f64..=1.0],
            prop_oneof![Just(1.0), any_positive()],
            (any_finite(), any_finite()),
            prop::sample::select(StageOrder::ALL.to_vec()),
            prop::collection::vec((0..v as u32, any_finite()), 0..3),
        );
        (
            prop::collection::vec(any_finite(), v),
            prop::collection::vec(0..v as u32, 0..6),
            0usize..6,
            knobs,
        )
            .prop_map(|(logits, tokens, prompt_len, knobs)| {
                let (temperature, top_k, top_p, min_p, rep, (freq, pres), order, bias) = knobs;
                let policy = Policy {
                    logit_bias: bias,
                    repetition_penalty: rep,
                    frequency_penalty: freq,
                    presence_penalty: pres,
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                    order,
                    ..Policy::default()
                };
                let prompt_len = prompt_len.min(tokens.len());
                (policy, logits, tokens, prompt_len)
            })
    })
}

/// Every number a step reports, with where it sits.
fn reported_numbers(outcome: &StepOutcome) -> Vec<(String, f64)> {
    let mut numbers = vec![
        ("prob".to_string(), outcome.prob),
        ("entropy".to_string(), outcome.entropy),
        ("logprob".to_string(), outcome.logprob()),
    ];
    numbers.extend(outcome.draw.map(|d| ("draw".to_string(), d)));
    for (i, t) in outcome.top.iter().enumerate() {
        numbers.push((format!("top[{i}].logit"), t.logit));
        numbers.push((format!("top[{i}].prob"), t.prob));
    }
    for s in outcome.stages.iter().flatten() {
        for t in &s.tokens {
            numbers.push((format!("{:?} {} logit", s.stage, t.id), t.logit));
            numbers.push((format!("{:?} {} prob", s.stage, t.id), t.prob));
        }
    }
    numbers
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// For any finite logits and knobs a step either refuses with a typed error or reports
    /// only finite numbers (a chosen token's log-probability included), with and without
    /// snapshots alike, so that no JSON it becomes holds a null.
    #[test]
    fn every_reported_number_is_finite((policy, logits, tokens, prompt_len) in extreme_case()) {
        let context = StepContext::new(&tokens, prompt_len);
        let recorded = step(&policy, &logits, context, &mut NumpyRng::new(3), Snapshots::Record);
        let skipped = step(&policy, &logits, context, &mut NumpyRng::new(3), Snapshots::Skip);
        match (&recorded, &skipped) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!((a.token, a.prob, a.draw, a.entropy), (b.token, b.prob, b.draw, b.entropy));
                prop_assert_eq!(&a.top, &b.top);
                for (name, value) in reported_numbers(a) {
                    prop_assert!(value.is_finite(), "{} is {}", name, value);
                }
                prop_assert!(a.prob > 0.0 && a.prob <= 1.0);
                let json = serde_json::to_string(a).unwrap();
                prop_assert!(!json.contains("null"), "{}", json);
            }
            (Err(a), Err(b)) => {
                prop_assert_eq!(a, b);
                prop_assert!(!matches!(a, PolicyError::InvalidDraw(_)));
            }
            _ => prop_assert!(false, "snapshots changed the verdict: {:?} / {:?}", recorded, skipped),
        }
    }
}

#[test]
fn a_chosen_token_never_has_probability_zero() {
    // Tokens 0 and 1 have the subnormal weight exp(-744.4) = 5e-324 each, so over a total of
    // 3 their probabilities round to 0 while their weights' sum over 3 does not. The lookup
    // runs on the rounded probabilities, so even a draw of exactly 0 (which NumPy's stream
    // can give) passes them by, and a chosen token's log-probability stays finite.
    let logits = [-744.4, -744.4, 0.0, 0.0, 0.0];
    let outcome = policy::Stepper::default()
        .step_with_draw(
            &Policy::default(),
            &logits,
            StepContext::default(),
            0.0,
            Snapshots::Skip,
        )
        .unwrap();
    assert_eq!(outcome.token, 2);
    assert!(
        outcome.prob > 0.0 && outcome.logprob().is_finite(),
        "{outcome:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Speculative decoding compares final distributions; the dense one it reads is the
    /// naive reference's, and taking it draws nothing.
    #[test]
    fn the_dense_final_distribution_is_the_reference((policy, logits, tokens, prompt_len, _seed) in arb_case()) {
        let mut dense = Vec::new();
        let result = policy::speculative::final_distribution(
            &mut policy::Stepper::default(),
            &policy,
            &logits,
            StepContext::new(&tokens, prompt_len),
            &mut dense,
        );
        let expected = reference(&policy, &logits, &tokens, prompt_len);
        if let Err(PolicyError::AllTokensMasked { .. }) = result {
            prop_assert!(expected.iter().all(|p| p.is_nan()));
            return Ok(());
        }
        result.unwrap();
        prop_assert_eq!(dense.len(), logits.len());
        for (id, (g, e)) in dense.iter().zip(&expected).enumerate() {
            prop_assert!((g - e).abs() <= TOLERANCE, "token {id}: dense {g}, reference {e}");
        }
    }
}
