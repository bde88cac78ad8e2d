//! Sampler chains against a naive dense reference that runs the listed samplers in turn,
//! the fixed orders against themselves written as chains (bit for bit), and the issue's
//! example of what the order changes.

use policy::chain::{HF_CHAIN, TEMPERATURE_LAST_CHAIN};
use policy::{
    parse_samplers, step, NumpyRng, Policy, PolicyError, Sampler, Snapshots, Stage, StageOrder,
    StepContext, StepOutcome,
};
use proptest::prelude::*;

const TOLERANCE: f64 = 1e-9;

fn softmax(z: &[f64], t: f64) -> Vec<f64> {
    let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = z
        .iter()
        .map(|&x| {
            if x == f64::NEG_INFINITY {
                0.0
            } else {
                ((x - max) / t).exp()
            }
        })
        .collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|x| x / s).collect()
}

/// The final distribution over the whole vocabulary: dense vectors, full sorts, each
/// sampler's textbook rule, in the chain's order. Penalties after another sampler act on
/// the survivors, on the scale of the temperature in force.
fn reference(policy: &Policy, logits: &[f64], tokens: &[u32], prompt_len: usize) -> Vec<f64> {
    let v = logits.len();
    let chain = policy.samplers.as_ref().unwrap();
    let mut z = logits.to_vec();
    for &(id, bias) in &policy.logit_bias {
        z[id as usize] += bias;
    }
    for &id in &policy.forbidden {
        z[id as usize] = f64::NEG_INFINITY;
    }
    let generated = &tokens[prompt_len..];
    let mut t = 1.0;
    let greedy = policy.temperature == 0.0;
    for sampler in chain {
        match sampler {
            Sampler::Penalties => {
                for (id, x) in z.iter_mut().enumerate() {
                    if *x == f64::NEG_INFINITY {
                        continue;
                    }
                    if tokens.contains(&(id as u32)) {
                        let r = policy.repetition_penalty;
                        *x = if *x > 0.0 { *x / r } else { *x * r };
                    }
                    let n = generated.iter().filter(|&&g| g as usize == id).count() as f64;
                    if n > 0.0 {
                        *x -= (n * policy.frequency_penalty + policy.presence_penalty) * t;
                    }
                }
            }
            Sampler::Temperature if greedy => {
                let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let first = z.iter().position(|&x| x == max).unwrap();
                return (0..v).map(|i| f64::from(u8::from(i == first))).collect();
            }
            Sampler::Temperature => t = policy.temperature,
            Sampler::TopK if policy.top_k > 0 => {
                let mut sorted: Vec<f64> = z.iter().copied().filter(|x| x.is_finite()).collect();
                sorted.sort_by(|a, b| b.total_cmp(a));
                if policy.top_k < sorted.len() {
                    let kth = sorted[policy.top_k - 1];
                    z.iter_mut()
                        .filter(|x| **x < kth)
                        .for_each(|x| *x = f64::NEG_INFINITY);
                }
            }
            Sampler::TopP if policy.top_p < 1.0 => {
                let p = softmax(&z, t);
                let keep: Vec<bool> = (0..v)
                    .map(|i| p.iter().filter(|&&q| q > p[i]).sum::<f64>() < policy.top_p)
                    .collect();
                (0..v)
                    .filter(|&i| !keep[i])
                    .for_each(|i| z[i] = f64::NEG_INFINITY);
            }
            Sampler::MinP if policy.min_p > 0.0 => {
                let p = softmax(&z, t);
                let max = p.iter().copied().fold(0.0, f64::max);
                (0..v)
                    .filter(|&i| p[i] < policy.min_p * max)
                    .for_each(|i| z[i] = f64::NEG_INFINITY);
            }
            _ => {}
        }
    }
    softmax(&z, t)
}

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
    step(
        policy,
        logits,
        StepContext::new(tokens, prompt_len),
        &mut NumpyRng::new(seed),
        Snapshots::Record,
    )
    .unwrap()
}

/// A random policy with every knob of the chain, without a chain.
fn arb_policy(v: usize) -> impl Strategy<Value = Policy> {
    (
        prop_oneof![Just(0.0), Just(1.0), 0.05f64..3.0],
        prop_oneof![Just(0usize), 1..v + 2],
        prop_oneof![Just(1.0), 0.01f64..1.0],
        prop_oneof![Just(0.0), 0.0f64..1.0],
        prop_oneof![Just(1.0), 0.5f64..2.0],
        prop_oneof![Just((0.0, 0.0)), (-1.0f64..1.0, -1.0f64..1.0)],
        prop::collection::vec(1..v as u32, 0..3),
        prop::collection::vec((0..v as u32, -3.0f64..3.0), 0..3),
    )
        .prop_map(
            |(temperature, top_k, top_p, min_p, rep, (freq, pres), forbidden, bias)| Policy {
                forbidden,
                logit_bias: bias,
                repetition_penalty: rep,
                frequency_penalty: freq,
                presence_penalty: pres,
                temperature,
                top_k,
                top_p,
                min_p,
                ..Policy::default()
            },
        )
}

fn arb_case() -> impl Strategy<Value = (Policy, Vec<f64>, Vec<u32>, usize, u64)> {
    (2usize..120)
        .prop_flat_map(|v| {
            let logits = prop::collection::vec(
                prop_oneof![
                    (-40i32..40).prop_map(|x| f64::from(x) / 4.0),
                    -20.0f64..20.0
                ],
                v,
            );
            let tokens = prop::collection::vec(0..v as u32, 0..12);
            let shuffled = Just(Sampler::ALL.to_vec()).prop_shuffle();
            (
                arb_policy(v),
                logits,
                tokens,
                0usize..12,
                shuffled,
                any::<u64>(),
            )
        })
        .prop_map(|(policy, logits, tokens, prompt_len, order, seed)| {
            let prompt_len = prompt_len.min(tokens.len());
            (
                Policy {
                    samplers: Some(order),
                    ..policy
                },
                logits,
                tokens,
                prompt_len,
                seed,
            )
        })
}

fn same_outcome(a: &StepOutcome, b: &StepOutcome, stages: bool) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.token, b.token);
    prop_assert_eq!(a.prob.to_bits(), b.prob.to_bits());
    prop_assert_eq!(a.draw, b.draw);
    prop_assert_eq!(a.survivors, b.survivors);
    prop_assert_eq!(a.entropy.to_bits(), b.entropy.to_bits());
    prop_assert_eq!(&a.top, &b.top);
    if stages {
        prop_assert_eq!(&a.stages, &b.stages);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any order of the five samplers matches the naive chain.
    #[test]
    fn any_chain_matches_the_naive_reference((policy, logits, tokens, prompt_len, seed) in arb_case()) {
        let got = match step(&policy, &logits, StepContext::new(&tokens, prompt_len), &mut NumpyRng::new(seed), Snapshots::Record) {
            Err(PolicyError::AllTokensMasked { .. }) => return Ok(()),
            other => other.unwrap(),
        };
        let expected = reference(&policy, &logits, &tokens, prompt_len);
        let dense = final_distribution(&got, logits.len());
        for (id, (g, e)) in dense.iter().zip(&expected).enumerate() {
            prop_assert!((g - e).abs() <= TOLERANCE, "token {id}: chain {g}, reference {e}");
            if *e == 0.0 {
                prop_assert_eq!(*g, 0.0, "removed token {} has probability exactly 0", id);
            }
        }
        prop_assert!((got.prob - dense[got.token as usize]).abs() <= TOLERANCE);
    }

    /// The fixed orders written as chains choose bit for bit the same, with the same
    /// snapshots (greedy steps aside: a chain runs its filters over the one argmax).
    #[test]
    fn fixed_orders_are_their_chains(
        (policy, logits, tokens, prompt_len, seed) in arb_case(),
        order in prop::sample::select(StageOrder::ALL.to_vec()),
    ) {
        let fixed = Policy { samplers: None, order, ..policy.clone() };
        let chained = Policy { samplers: Some(order.chain().to_vec()), ..policy };
        let a = step(&fixed, &logits, StepContext::new(&tokens, prompt_len), &mut NumpyRng::new(seed), Snapshots::Record);
        let b = step(&chained, &logits, StepContext::new(&tokens, prompt_len), &mut NumpyRng::new(seed), Snapshots::Record);
        match (a, b) {
            (Ok(a), Ok(b)) => same_outcome(&a, &b, !fixed.is_greedy())?,
            (a, b) => prop_assert_eq!(a.unwrap_err(), b.unwrap_err()),
        }
    }
}

#[test]
fn the_fixed_chains_are_the_documented_orders() {
    assert_eq!(
        HF_CHAIN.map(Sampler::name).join(";"),
        "penalties;dry;temperature;top_n_sigma;top_h;top_k;top_p;min_p;typ_p;epsilon;eta;xtc"
    );
    assert_eq!(
        TEMPERATURE_LAST_CHAIN.map(Sampler::name).join(";"),
        "penalties;dry;top_n_sigma;top_h;top_k;typ_p;top_p;min_p;epsilon;eta;xtc;temperature"
    );
}

/// The example: logits [3, 2, 1] with top-p 0.8 and temperature 0.5 keep {0, 1}
/// with temperature last and {0} with temperature first.
#[test]
fn temperature_before_or_after_top_p_changes_the_kept_set() {
    let kept = |samplers: &str| {
        let policy = Policy {
            temperature: 0.5,
            top_p: 0.8,
            samplers: Some(parse_samplers(samplers).unwrap()),
            ..Policy::default()
        };
        let outcome = run(&policy, &[3.0, 2.0, 1.0], &[], 0, 7);
        let last = outcome.stages.unwrap().pop().unwrap();
        last.tokens.iter().map(|t| t.id).collect::<Vec<_>>()
    };
    // At temperature 1 the top two hold 0.665 + 0.245 = 0.91 ≥ 0.8 after 0.665 < 0.8.
    assert_eq!(kept("top_p;temperature"), [0, 1]);
    // At temperature 0.5 the top token alone holds 0.867 ≥ 0.8.
    assert_eq!(kept("temperature;top_p"), [0]);
}

/// Penalties after temperature subtract on the scaled logits, as llama.cpp's chain does:
/// a frequency penalty of 1 at temperature 0.5 lowers the unscaled logit by 0.5.
#[test]
fn late_penalties_act_on_the_scaled_logits() {
    let policy = Policy {
        temperature: 0.5,
        frequency_penalty: 1.0,
        samplers: Some(parse_samplers("temperature;penalties").unwrap()),
        ..Policy::default()
    };
    let outcome = run(&policy, &[1.0, 1.0], &[1], 0, 3);
    let stages = outcome.stages.unwrap();
    assert_eq!(
        stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
        [Stage::Constraints, Stage::Temperature, Stage::Penalties]
    );
    let last = &stages[2].tokens;
    // Scaled logits 2 and 2 - 1 = 1.
    assert_eq!(last[1].logit, 1.0);
    let e = (-1.0f64).exp();
    assert!((last[1].prob - e / (1.0 + e)).abs() < 1e-15);
}

#[test]
fn a_filter_before_the_penalties_limits_them_to_its_survivors() {
    // top-k 1 keeps token 0 alone; the repetition penalty then halves its logit.
    let policy = Policy {
        top_k: 1,
        repetition_penalty: 2.0,
        samplers: Some(parse_samplers("top_k;penalties").unwrap()),
        ..Policy::default()
    };
    let outcome = run(&policy, &[4.0, 3.0], &[0, 1], 2, 3);
    assert_eq!(outcome.token, 0);
    assert_eq!(outcome.top[0].logit, 2.0);
    // First, the penalty drops token 0 below token 1 before top-k.
    let first = Policy {
        samplers: Some(parse_samplers("penalties;top_k").unwrap()),
        ..policy
    };
    let outcome = run(&first, &[4.0, 3.0], &[0], 1, 3);
    assert_eq!(outcome.token, 1);
}

#[test]
fn greedy_in_a_chain_is_the_argmax_of_what_reaches_the_temperature() {
    let policy = Policy {
        temperature: 0.0,
        presence_penalty: 5.0,
        samplers: Some(parse_samplers("penalties;temperature").unwrap()),
        ..Policy::default()
    };
    // Token 0 was generated; the presence penalty hands the argmax to token 1.
    let outcome = run(&policy, &[2.0, 1.0, 1.0], &[0], 0, 3);
    assert_eq!((outcome.token, outcome.prob, outcome.draw), (1, 1.0, None));
}

#[test]
fn a_chain_that_leaves_a_set_knob_out_is_refused_by_name() {
    let policy = Policy {
        min_p: 0.1,
        samplers: Some(vec![Sampler::TopK]),
        ..Policy::default()
    };
    let err = step(
        &policy,
        &[1.0, 2.0],
        StepContext::default(),
        &mut NumpyRng::new(1),
        Snapshots::Skip,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "min-p 0.1 is set but min_p is not in the sampler list: add it, or leave the knob off"
    );
}

#[test]
fn a_policy_with_a_chain_reads_back_from_json_and_without_one_writes_none() {
    let policy = Policy {
        samplers: Some(parse_samplers("top_k;temperature").unwrap()),
        ..Policy::default()
    };
    let json = serde_json::to_value(&policy).unwrap();
    assert_eq!(
        json["samplers"],
        serde_json::json!(["top_k", "temperature"])
    );
    assert_eq!(serde_json::from_value::<Policy>(json).unwrap(), policy);
    let plain = serde_json::to_value(Policy::default()).unwrap();
    assert!(
        plain.get("samplers").is_none(),
        "old records keep their digests"
    );
    let bad = serde_json::json!({"samplers": ["top_k", "topk"]});
    let err = serde_json::from_value::<Policy>(bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("sampler \"topk\" is not known"), "{err}");
}

/// A policy with every knob, the modern samplers' and min_keep too, some of each on, in a
/// shuffled chain under any engine.
fn arb_modern_case() -> impl Strategy<Value = (Policy, Vec<f64>, Vec<u32>, usize, u64)> {
    (
        arb_case(),
        prop_oneof![Just(1.0), 0.05f64..1.0],
        prop_oneof![Just(0.0), 1e-4f64..0.2],
        prop_oneof![Just(0.0), 1e-4f64..0.2],
        prop_oneof![Just(None), (0.1f64..3.0).prop_map(Some)],
        prop_oneof![Just((0.0, 0.1)), (0.0f64..1.0, 0.0f64..0.5)],
        prop_oneof![Just(0.0), 0.1f64..2.0],
        (
            prop::sample::select(policy::Engine::ALL.to_vec()),
            0usize..4,
        ),
    )
        .prop_map(
            |(
                (policy, logits, tokens, prompt_len, seed),
                typical_p,
                epsilon_cutoff,
                eta_cutoff,
                top_n_sigma,
                (xtc_probability, xtc_threshold),
                dry_multiplier,
                (engine, min_keep),
            )| {
                (
                    Policy {
                        typical_p,
                        epsilon_cutoff,
                        eta_cutoff,
                        top_n_sigma,
                        xtc_probability,
                        xtc_threshold,
                        dry_multiplier,
                        engine,
                        min_keep,
                        ..policy
                    },
                    logits,
                    tokens,
                    prompt_len,
                    seed,
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Every stage of any chain, the modern samplers included, under every engine that
    /// accepts the settings: each snapshot is a distribution (its probabilities sum to 1,
    /// every survivor above 0), a filter never brings back a token an earlier stage removed,
    /// and the chosen token is a survivor of the last stage with the probability it gives.
    #[test]
    fn every_stage_in_any_order_is_a_distribution((policy, logits, tokens, prompt_len, seed) in arb_modern_case()) {
        let outcome = match step(&policy, &logits, StepContext::new(&tokens, prompt_len), &mut NumpyRng::new(seed), Snapshots::Record) {
            // Settings an engine refuses, or a vocabulary all masked, are errors by name.
            Err(e) => { prop_assert!(!e.to_string().is_empty()); return Ok(()); }
            Ok(outcome) => outcome,
        };
        let stages = outcome.stages.as_ref().unwrap();
        let mut alive: Option<Vec<u32>> = None;
        for stage in stages {
            let sum: f64 = stage.tokens.iter().map(|t| t.prob).sum();
            prop_assert!((sum - 1.0).abs() <= 1e-9, "{:?} sums to {}", stage.stage, sum);
            prop_assert!(stage.tokens.iter().all(|t| t.prob > 0.0), "{:?} keeps a token at 0", stage.stage);
            let ids: Vec<u32> = stage.tokens.iter().map(|t| t.id).collect();
            if let Some(before) = &alive {
                prop_assert!(ids.iter().all(|id| before.binary_search(id).is_ok()), "{:?} brought a token back", stage.stage);
            }
            alive = Some(ids);
        }
        let last = &stages.last().unwrap().tokens;
        let chosen = last.iter().find(|t| t.id == outcome.token);
        prop_assert!(chosen.is_some(), "token {} is not a survivor", outcome.token);
        prop_assert_eq!(chosen.unwrap().prob.to_bits(), outcome.prob.to_bits());
    }
}
