//! Engine presets against the engines' own test cases (llama.cpp's
//! `tests/test-sampling.cpp`, transcribed in `fixtures/llama_cpp_test_sampling.json`) and
//! the worked differences of `docs/engine-semantics.md`, each computed by hand from the
//! engines' formulas.

use policy::{
    parse_samplers, step, Engine, NumpyRng, Policy, PolicyError, Sampler, Snapshots, StageOrder,
    StepContext, StepOutcome,
};
use serde_json::Value;

fn run(policy: &Policy, logits: &[f32], tokens: &[u32], prompt_len: usize) -> StepOutcome {
    step(
        policy,
        logits,
        StepContext::new(tokens, prompt_len),
        &mut NumpyRng::new(0),
        Snapshots::Record,
    )
    .unwrap()
}

/// The final distribution as (id, probability), ids ascending.
fn kept(outcome: &StepOutcome) -> Vec<(u32, f64)> {
    let last = outcome.stages.as_ref().unwrap().last().unwrap();
    last.tokens.iter().map(|t| (t.id, t.prob)).collect()
}

fn kept_ids(outcome: &StepOutcome) -> Vec<u32> {
    kept(outcome).into_iter().map(|(id, _)| id).collect()
}

fn f32_param(case: &Value, name: &str) -> f64 {
    // llama.cpp takes its parameters as float.
    f64::from(case["params"][name].as_f64().unwrap() as f32)
}

/// The llama.cpp policy a fixture case describes: the one sampler under test, alone.
fn llama_cpp_case(case: &Value) -> Option<(Policy, Vec<u32>)> {
    let mut policy = Policy {
        engine: Engine::LlamaCpp,
        ..Policy::default()
    };
    let mut tokens = Vec::new();
    let sampler = match case["sampler"].as_str().unwrap() {
        "temp" => {
            policy.temperature = f32_param(case, "temp");
            Sampler::Temperature
        }
        "top_k" => {
            policy.top_k = case["params"]["k"].as_i64().unwrap().max(0) as usize;
            Sampler::TopK
        }
        "top_p" => {
            policy.top_p = f32_param(case, "p");
            Sampler::TopP
        }
        "min_p" => {
            policy.min_p = f32_param(case, "p");
            Sampler::MinP
        }
        "penalties" => {
            policy.repetition_penalty = f32_param(case, "penalty_repeat");
            policy.frequency_penalty = f32_param(case, "penalty_freq");
            policy.presence_penalty = f32_param(case, "penalty_present");
            policy.penalty_last_n = Some(case["params"]["penalty_last_n"].as_i64().unwrap());
            tokens = case["last_tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect();
            Sampler::Penalties
        }
        // temp_ext (dynamic temperature), typical, XTC, DRY and top-nσ are not stages yet.
        _ => return None,
    };
    policy.samplers = Some(vec![sampler]);
    Some((policy, tokens))
}

/// Every case of llama.cpp's own tests that the five stages can express, checked as its
/// harness checks it: input probabilities become `logf(p)` logits, the sampler runs, then
/// `dist` renormalises; the probabilities, sorted descending, must each be within 1e-5.
/// Where llama.cpp keeps a masked token at probability 0 (temperature 0), the lab removes
/// it: the list is padded with zeros, which must be what llama.cpp expects there.
#[test]
fn llama_cpp_matches_its_own_test_cases() {
    let fixture: Value =
        serde_json::from_str(include_str!("fixtures/llama_cpp_test_sampling.json")).unwrap();
    let mut checked = 0;
    for case in fixture["cases"].as_array().unwrap() {
        let Some((policy, tokens)) = llama_cpp_case(case) else {
            continue;
        };
        let id = case["id"].as_str().unwrap();
        let logits: Vec<f32> = case["input_probs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p.as_f64().unwrap() as f32).ln())
            .collect();
        let expected: Vec<f64> = case["expected_probs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .collect();
        let outcome = run(&policy, &logits, &tokens, tokens.len());
        let mut got: Vec<f64> = kept(&outcome).into_iter().map(|(_, p)| p).collect();
        got.sort_by(|a, b| b.total_cmp(a));
        assert!(
            got.len() <= expected.len(),
            "{id}: kept {got:?}, expected {expected:?}"
        );
        for (i, e) in expected.iter().enumerate() {
            let g = got.get(i).copied().unwrap_or(0.0);
            assert!((g - e).abs() < 1e-5, "{id}: position {i}: {g} against {e}");
            if i >= got.len() {
                assert_eq!(*e, 0.0, "{id}: a removed token must be expected at 0");
            }
        }
        checked += 1;
    }
    // temp 2, top-k 4, top-p 4, min-p 8, penalties 6.
    assert_eq!(checked, 24);
}

fn policy(engine: Engine, f: impl FnOnce(&mut Policy)) -> Policy {
    let mut policy = Policy {
        engine,
        ..Policy::default()
    };
    f(&mut policy);
    policy
}

const ENGINES: [Engine; 4] = [Engine::Lab, Engine::Hf, Engine::LlamaCpp, Engine::Vllm];

/// Logits [2, 1, 1], top-p 0.75: probabilities 0.576, 0.212, 0.212. Token 1 is reached
/// with 0.576 < 0.75 above it, and token 2, tied with it, too: the lab keeps both. Each
/// engine cuts inside the tie: llama.cpp stops at the cumulative 0.788 ≥ 0.75; Hugging
/// Face and vLLM remove token 2, the lowest ascending (0.212 ≤ 0.25).
#[test]
fn top_p_ties_at_the_cut() {
    let mut got = Vec::new();
    for engine in ENGINES {
        let p = policy(engine, |p| p.top_p = 0.75);
        got.push(kept_ids(&run(&p, &[2.0, 1.0, 1.0], &[], 0)));
    }
    assert_eq!(got, [vec![0, 1, 2], vec![0, 1], vec![0, 1], vec![0, 1]]);
}

#[test]
fn top_k_ties_at_the_kth() {
    let mut got = Vec::new();
    for engine in ENGINES {
        let p = policy(engine, |p| p.top_k = 2);
        got.push(kept_ids(&run(&p, &[3.0, 2.0, 2.0, 1.0], &[], 0)));
    }
    assert_eq!(
        got,
        [vec![0, 1, 2], vec![0, 1, 2], vec![0, 1], vec![0, 1, 2]]
    );
}

#[test]
fn top_p_zero_keeps_the_top_token_where_the_engine_allows_it() {
    for engine in [Engine::Hf, Engine::LlamaCpp] {
        let p = policy(engine, |p| p.top_p = 0.0);
        assert_eq!(
            kept_ids(&run(&p, &[1.0, 3.0, 2.0], &[], 0)),
            [1],
            "{engine}"
        );
    }
    let lab = policy(Engine::Lab, |p| p.top_p = 0.0);
    let vllm = policy(Engine::Vllm, |p| p.top_p = 0.0);
    let refused = |p: &Policy| {
        step(
            p,
            &[1.0f32, 2.0],
            StepContext::default(),
            &mut NumpyRng::new(0),
            Snapshots::Skip,
        )
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        refused(&lab),
        "top-p 0 is invalid: it must be greater than 0 and at most 1"
    );
    assert_eq!(
        refused(&vllm),
        "vllm does not take top-p 0: it takes a top-p greater than 0 and at most 1"
    );
}

#[test]
fn min_p_above_one_keeps_one_token_under_llama_cpp_only() {
    let p = policy(Engine::LlamaCpp, |p| p.min_p = 1.5);
    // Tied maxima: llama.cpp keeps the first after its sort; the lab orders ties by id.
    assert_eq!(kept_ids(&run(&p, &[1.0, 2.0, 2.0], &[], 0)), [1]);
    let hf = policy(Engine::Hf, |p| p.min_p = 1.5);
    let err = step(
        &hf,
        &[1.0f32, 2.0],
        StepContext::default(),
        &mut NumpyRng::new(0),
        Snapshots::Skip,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "hf does not take min-p 1.5: it takes a min-p from 0 to 1"
    );
}

/// vLLM runs min-p before top-p (`docs/engine-semantics.md`, row 4): with probabilities
/// 0.45, 0.35 and twenty of 0.01, min-p 0.1 first removes the tail, so top-p 0.5 then sees
/// 0.5625 above token 1 and cuts it. The other orders apply top-p to the whole
/// distribution, where 0.45 < 0.5 keeps token 1, and min-p keeps both.
#[test]
fn vllm_runs_min_p_before_top_p() {
    let mut logits = vec![0.45f32.ln(), 0.35f32.ln()];
    logits.extend([0.01f32.ln(); 20]);
    let mut got = Vec::new();
    for engine in ENGINES {
        let p = policy(engine, |p| {
            p.top_p = 0.5;
            p.min_p = 0.1;
        });
        got.push(kept_ids(&run(&p, &logits, &[], 0)));
    }
    assert_eq!(got, [vec![0, 1], vec![0, 1], vec![0, 1], vec![0]]);
}

/// Prompt [0, 1], output [0], frequency 0.5 and presence 0.2 from logits of 0: llama.cpp
/// counts over its window, prompt included (token 0 twice: −1.2, token 1: −0.7); vLLM
/// and the lab over the output only (token 0: −0.7); Hugging Face has no such penalty.
#[test]
fn frequency_and_presence_count_over_each_engines_window() {
    let logits = [0.0f32; 3];
    let tokens = [0, 1, 0];
    let logits_after = |engine| {
        let p = policy(engine, |p| {
            p.frequency_penalty = 0.5;
            p.presence_penalty = 0.2;
        });
        let outcome = run(&p, &logits, &tokens, 2);
        outcome.stages.unwrap()[0]
            .tokens
            .iter()
            .map(|t| t.logit)
            .collect::<Vec<_>>()
    };
    assert_eq!(logits_after(Engine::LlamaCpp), [-1.2, -0.7, 0.0]);
    assert_eq!(logits_after(Engine::Vllm), [-0.7, 0.0, 0.0]);
    assert_eq!(logits_after(Engine::Lab), [-0.7, 0.0, 0.0]);
    let hf = policy(Engine::Hf, |p| p.frequency_penalty = 0.5);
    let err = step(
        &hf,
        &logits,
        StepContext::new(&tokens, 2),
        &mut NumpyRng::new(0),
        Snapshots::Skip,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "hf does not take frequency penalty 0.5: it takes no frequency or presence penalty, only \
         repetition"
    );
}

/// A window of 2 leaves the prompt's first token unpenalised; 0 turns the penalties off.
#[test]
fn the_llama_cpp_penalty_window() {
    let logits = [1.0f32; 3];
    let tokens = [0, 1, 2];
    let after = |n| {
        let p = policy(Engine::LlamaCpp, |p| {
            p.repetition_penalty = 2.0;
            p.penalty_last_n = Some(n);
        });
        let outcome = run(&p, &logits, &tokens, 3);
        outcome.stages.unwrap()[0]
            .tokens
            .iter()
            .map(|t| t.logit)
            .collect::<Vec<_>>()
    };
    assert_eq!(after(2), [1.0, 0.5, 0.5]);
    assert_eq!(after(0), [1.0, 1.0, 1.0]);
    assert_eq!(after(-1), [0.5, 0.5, 0.5]);
    let lab = policy(Engine::Lab, |p| p.penalty_last_n = Some(2));
    let err = step(
        &lab,
        &logits,
        StepContext::default(),
        &mut NumpyRng::new(0),
        Snapshots::Skip,
    )
    .unwrap_err();
    assert!(matches!(
        err,
        PolicyError::PenaltyWindowWithout {
            engine: Engine::Lab
        }
    ));
}

#[test]
fn each_engine_has_its_temperature_rules() {
    let logits = [1.0f32, 3.0, 2.0];
    // llama.cpp: any temperature at most 0 is greedy.
    let negative = policy(Engine::LlamaCpp, |p| p.temperature = -1.0);
    let outcome = run(&negative, &logits, &[], 0);
    assert_eq!((outcome.token, outcome.draw), (1, None));
    // vLLM: a temperature below 0.01 runs at 0.01; above 2 is refused.
    let tiny = policy(Engine::Vllm, |p| p.temperature = 0.001);
    let floor = policy(Engine::Vllm, |p| p.temperature = 0.01);
    assert_eq!(
        kept(&run(&tiny, &logits, &[], 0)),
        kept(&run(&floor, &logits, &[], 0))
    );
    let hot = policy(Engine::Vllm, |p| p.temperature = 2.5);
    let err = step(
        &hot,
        &logits,
        StepContext::default(),
        &mut NumpyRng::new(0),
        Snapshots::Skip,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "vllm does not take temperature 2.5: it takes a temperature from 0 to 2"
    );
}

/// A preset sets the order: temperature last under llama.cpp, first under the others, so
/// the issue's example keeps {0, 1} under llama.cpp and {0} under the others.
#[test]
fn a_preset_sets_the_order_and_samplers_replace_it() {
    let mut got = Vec::new();
    for engine in ENGINES {
        let p = policy(engine, |p| {
            p.temperature = 0.5;
            p.top_p = 0.8;
        });
        got.push(kept_ids(&run(&p, &[3.0, 2.0, 1.0], &[], 0)));
    }
    assert_eq!(got, [vec![0], vec![0], vec![0, 1], vec![0]]);
    assert_eq!(
        policy(Engine::Vllm, |_| {}).chain(),
        parse_samplers("penalties;temperature;min_p;top_k;top_p").unwrap()
    );
    let replaced = policy(Engine::LlamaCpp, |p| {
        p.temperature = 0.5;
        p.top_p = 0.8;
        p.samplers = Some(parse_samplers("temperature;top_p").unwrap());
    });
    assert_eq!(kept_ids(&run(&replaced, &[3.0, 2.0, 1.0], &[], 0)), [0]);
    let both = policy(Engine::Hf, |p| p.order = StageOrder::TemperatureLast);
    let err = step(
        &both,
        &[1.0f32],
        StepContext::default(),
        &mut NumpyRng::new(0),
        Snapshots::Skip,
    )
    .unwrap_err();
    assert_eq!(err, PolicyError::OrderAndEngine);
}

/// A preset never switches a stage on: with no knob set every engine samples the full
/// softmax, whatever its own defaults (llama.cpp's top-k 40, top-p 0.95, min-p 0.05).
#[test]
fn a_preset_switches_nothing_on() {
    let logits: Vec<f32> = (0..100).map(|i| i as f32 / 10.0).collect();
    for engine in ENGINES {
        let outcome = run(&policy(engine, |_| {}), &logits, &[], 0);
        assert_eq!(outcome.survivors, 100, "{engine}");
    }
}

#[test]
fn the_engine_is_recorded_only_when_it_is_not_the_labs() {
    let p = policy(Engine::LlamaCpp, |p| p.penalty_last_n = Some(32));
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["engine"], "llama.cpp");
    assert_eq!(json["penalty_last_n"], 32);
    assert_eq!(serde_json::from_value::<Policy>(json).unwrap(), p);
    let lab = serde_json::to_value(Policy::default()).unwrap();
    assert!(lab.get("engine").is_none() && lab.get("penalty_last_n").is_none());
}

/// The conformance view's words: engines grouped by the set they keep, refusals named.
#[test]
fn conformance_says_which_engine_keeps_what() {
    let issue = Policy {
        temperature: 0.5,
        top_p: 0.8,
        ..Policy::default()
    };
    let c = policy::conformance(&issue, &[3.0f32, 2.0, 1.0], StepContext::default(), 7);
    assert_eq!(
        c.summary,
        "lab, hf and vllm keep {0}; llama.cpp keeps {0, 1}."
    );
    let zero = Policy {
        top_p: 0.0,
        ..Policy::default()
    };
    let c = policy::conformance(&zero, &[1.0f32, 3.0, 2.0], StepContext::default(), 7);
    assert_eq!(
        c.summary,
        "hf and llama.cpp keep {1}. lab refuses these settings: top-p 0 is invalid: it must be \
         greater than 0 and at most 1. vllm refuses these settings: vllm does not take top-p 0: \
         it takes a top-p greater than 0 and at most 1."
    );
    let same = policy::conformance(
        &Policy::default(),
        &[1.0f32, 2.0],
        StepContext::default(),
        7,
    );
    assert_eq!(same.summary, "Every engine keeps {0, 1}.");
}
