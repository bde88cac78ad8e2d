//! Speculative decoding of the shipped tiny model with the shipped n-gram draft, on the CPU:
//! real runs checked against the measured acceptance and against plain decoding; and
//! `decode-lab ngram train` and `decode-lab speculate` end to end.

use std::path::PathBuf;

use model::{ModelConfig, Transformer};
use ngram::NgramModel;
use policy::rng::choice_index;
use policy::speculative::{
    acceptance_rate, expected_tokens_per_verify, final_distribution, verify, verify_block, Verdict,
};
use policy::{NumpyRng, Policy, Snapshots, StepContext, Stepper};
use tokenizer::Tokenizer;

mod common;

use common::{decode_lab, fails_with, model_dir, ok, recorded_hash};

struct Shipped {
    model: Transformer,
    tokenizer: Tokenizer,
    draft: NgramModel,
}

fn shipped() -> Shipped {
    let read = |file: &str| std::fs::read(model_dir().join(file)).unwrap();
    let config = ModelConfig::from_json(&String::from_utf8(read("config.json")).unwrap()).unwrap();
    Shipped {
        model: Transformer::from_safetensors(config, &read("model.f32.safetensors")).unwrap(),
        tokenizer: Tokenizer::from_json(&String::from_utf8(read("tokenizer.json")).unwrap())
            .unwrap(),
        draft: NgramModel::from_bytes(&read("draft.ngram"), &recorded_hash("tokenizer")).unwrap(),
    }
}

/// The draft's final distribution after `context` under `policy`.
fn draft_distribution(
    draft: &NgramModel,
    stepper: &mut Stepper,
    policy: &Policy,
    context: StepContext<'_>,
) -> Vec<f64> {
    let mut q = Vec::new();
    draft.next_distribution(context.tokens, &mut q).unwrap();
    let logits: Vec<f64> = q.iter().map(|x| x.ln()).collect();
    final_distribution(stepper, policy, &logits, context, &mut q).unwrap();
    q
}

/// What one speculative run did.
#[derive(Default)]
struct Run {
    tokens: Vec<u32>,
    /// Drafted tokens the rule examined (it stops at the first rejection).
    examined: usize,
    accepted: usize,
    /// Σ α over the examined positions, and Σ α (1 − α).
    alpha: f64,
    variance: f64,
}

/// Speculative decoding as Leviathan et al.'s Algorithm 1: the draft proposes `k` tokens
/// (drawn from its final distribution with the run's generator), the target scores the
/// whole sequence in one pass, and `verify_block` keeps or replaces them.
fn speculative_run(
    s: &mut Shipped,
    policy: &Policy,
    prompt: &[u32],
    k: usize,
    new_tokens: usize,
    seed: u64,
) -> Run {
    let mut rng = NumpyRng::new(seed);
    let mut stepper = Stepper::default();
    let vocab = s.model.config().vocab_size;
    let mut tokens = prompt.to_vec();
    let mut run = Run::default();
    while tokens.len() - prompt.len() < new_tokens {
        let mut sequence = tokens.clone();
        let (mut drafts, mut drafted) = (Vec::new(), Vec::new());
        for _ in 0..k {
            let context = StepContext::new(&sequence, prompt.len());
            let q = draft_distribution(&s.draft, &mut stepper, policy, context);
            let x = choice_index(q.iter().copied(), rng.random()) as u32;
            drafts.push(q);
            drafted.push(x);
            sequence.push(x);
        }
        let logits = s.model.prefill_all(&sequence).unwrap().to_vec();
        let targets: Vec<Vec<f64>> = (0..=k)
            .map(|j| {
                let at = tokens.len() + j - 1;
                let mut p = Vec::new();
                let context = StepContext::new(&sequence[..at + 1], prompt.len());
                let row = &logits[at * vocab..(at + 1) * vocab];
                final_distribution(&mut stepper, policy, row, context, &mut p).unwrap();
                p
            })
            .collect();
        let verified = verify_block(&targets, &drafts, &drafted, &mut rng).unwrap();
        let examined = (verified.accepted + 1).min(k);
        for j in 0..examined {
            let alpha = acceptance_rate(&targets[j], &drafts[j]).unwrap();
            run.alpha += alpha;
            run.variance += alpha * (1.0 - alpha);
        }
        run.examined += examined;
        run.accepted += verified.accepted;
        tokens.extend(verified.tokens(&drafted));
    }
    run.tokens = tokens[prompt.len()..prompt.len() + new_tokens].to_vec();
    run
}

/// Plain greedy decoding through the KV cache (prefill, then one decode step a token).
fn greedy_run(s: &mut Shipped, prompt: &[u32], new_tokens: usize) -> Vec<u32> {
    let greedy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    let mut rng = NumpyRng::new(0);
    let mut context = prompt.to_vec();
    let mut logits = s.model.prefill(prompt).unwrap().to_vec();
    for _ in 0..new_tokens {
        let step_context = StepContext::new(&context, prompt.len());
        let outcome =
            policy::step(&greedy, &logits, step_context, &mut rng, Snapshots::Skip).unwrap();
        context.push(outcome.token);
        logits = s.model.decode_step(outcome.token).unwrap().to_vec();
    }
    context[prompt.len()..].to_vec()
}

const PROMPTS: [&str; 3] = ["The ", "To insert a ", "Hautatu "];

/// (b) The rule keeps the target's distribution token for token: under greedy decoding the
/// speculative output is exactly plain greedy decoding's.
#[test]
fn greedy_speculation_emits_plain_greedy_output_exactly() {
    let mut s = shipped();
    let greedy = Policy {
        temperature: 0.0,
        ..Policy::default()
    };
    for prompt in PROMPTS {
        let ids = s.tokenizer.encode(prompt);
        let plain = greedy_run(&mut s, &ids, 96);
        let speculative = speculative_run(&mut s, &greedy, &ids, 4, 96, 1);
        assert_eq!(speculative.tokens, plain, "prompt {prompt:?}");
        assert!(speculative.examined > 0);
    }
}

/// (a) The fraction of drafted tokens accepted in real runs against the measured α of the
/// same positions. Given everything before it, an examined drafted token is accepted with
/// probability exactly α_j = Σ min(p_j, q_j), so accepted − Σ α_j is a sum of martingale
/// differences with variance Σ α_j (1 − α_j); the test allows 4 of its standard deviations
/// (a false alarm about once in 16,000 runs by the normal approximation, a few hundred
/// terms here).
#[test]
fn accepted_drafts_agree_with_the_measured_acceptance() {
    let mut s = shipped();
    for temperature in [0.7, 1.5] {
        let policy = Policy {
            temperature,
            ..Policy::default()
        };
        let mut total = Run::default();
        for (i, prompt) in PROMPTS.iter().enumerate() {
            let ids = s.tokenizer.encode(prompt);
            for seed in 0..2 {
                let run = speculative_run(&mut s, &policy, &ids, 4, 120, 10 * i as u64 + seed);
                total.examined += run.examined;
                total.accepted += run.accepted;
                total.alpha += run.alpha;
                total.variance += run.variance;
            }
        }
        let gap = total.accepted as f64 - total.alpha;
        let allowed = 4.0 * total.variance.sqrt();
        println!(
            "temperature {temperature}: {} of {} drafted tokens accepted, Σα = {:.1}, sd {:.1}",
            total.accepted,
            total.examined,
            total.alpha,
            total.variance.sqrt()
        );
        assert!(
            total.examined >= 200 && gap.abs() <= allowed,
            "temperature {temperature}: {} of {} drafted tokens accepted, Σα = {:.1}, \
             allowed gap {allowed:.1}",
            total.accepted,
            total.examined,
            total.alpha
        );
    }
}

/// One step of the rule on the real target and draft distributions at one context: drawn
/// 20,000 times, each of the target's five most probable tokens comes out within 5 standard
/// errors of its target probability.
#[test]
fn one_verification_on_real_distributions_emits_the_target_distribution() {
    let mut s = shipped();
    let policy = Policy {
        temperature: 1.0,
        ..Policy::default()
    };
    let ids = s.tokenizer.encode("To insert a new ");
    let context = StepContext::new(&ids, ids.len());
    let mut stepper = Stepper::default();
    let logits = s.model.prefill(&ids).unwrap().to_vec();
    let mut p = Vec::new();
    final_distribution(&mut stepper, &policy, &logits, context, &mut p).unwrap();
    let q = draft_distribution(&s.draft, &mut stepper, &policy, context);
    let mut rng = NumpyRng::new(99);
    let n = 20_000;
    let mut counts = vec![0usize; p.len()];
    for _ in 0..n {
        let x = choice_index(q.iter().copied(), rng.random()) as u32;
        let out = match verify(&p, &q, x, &mut rng).unwrap() {
            Verdict::Accepted => x,
            Verdict::Rejected { token } => token,
        };
        counts[out as usize] += 1;
    }
    let mut top: Vec<usize> = (0..p.len()).collect();
    top.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    for &y in &top[..5] {
        let f = counts[y] as f64 / n as f64;
        let se = (p[y] * (1.0 - p[y]) / n as f64).sqrt();
        assert!(
            (f - p[y]).abs() <= 5.0 * se,
            "token {y}: {f} against {}",
            p[y]
        );
    }
}

/// The shipped draft's distributions along held-out text sum to 1 and are never 0.
#[test]
fn the_shipped_draft_gives_proper_distributions_on_held_out_text() {
    let s = shipped();
    let text = std::fs::read_to_string(common::workspace().join("corpus/valid.eu.txt")).unwrap();
    let ids = s.tokenizer.encode(&text[..4_000]);
    let mut q = Vec::new();
    for end in 0..ids.len() {
        s.draft.next_distribution(&ids[..end], &mut q).unwrap();
        let sum: f64 = q.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "after {end} tokens: {sum}");
        assert!(q.iter().all(|&x| x > 0.0));
    }
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("decode-lab-{name}-{}", std::process::id()))
}

/// The committed draft is what `decode-lab ngram train` makes today, byte for byte.
#[test]
fn the_committed_draft_equals_a_retrain() {
    let out = scratch("draft.ngram");
    let report = ok(&[
        "ngram",
        "train",
        "--out",
        out.to_str().unwrap(),
        "--max-tokens",
        "2000",
        "--json",
    ]);
    let retrained = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert!(retrained == std::fs::read(model_dir().join("draft.ngram")).unwrap());
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["draft"], "ngram-3");
    assert_eq!(report["file_bytes"].as_u64(), Some(retrained.len() as u64));
    for slice in report["slices"].as_array().unwrap() {
        let bpb = slice["bits_per_byte"].as_f64().unwrap();
        assert!(bpb > 0.5 && bpb < 8.0, "{slice}");
    }
}

/// The eval's slice names, which the planner matches on.
fn eval_slices() -> Vec<String> {
    let eval: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model_dir().join("eval.json")).unwrap())
            .unwrap();
    eval["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["precision"] == "f32")
        .map(|s| s["slice"].as_str().unwrap().to_string())
        .collect()
}

fn check_slices(slices: &serde_json::Value, k: usize) {
    let slices = slices.as_array().unwrap();
    let names: Vec<&str> = slices
        .iter()
        .map(|s| s["slice"].as_str().unwrap())
        .collect();
    assert_eq!(names, eval_slices());
    for s in slices {
        let alpha = s["acceptance_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&alpha), "{s}");
        let e = s["expected_tokens_per_verify"].as_f64().unwrap();
        let closed = (1.0 - alpha.powi(k as i32 + 1)) / (1.0 - alpha);
        assert!((e - closed).abs() < 1e-12, "{s}");
    }
}

#[test]
fn speculate_prints_alpha_and_e_per_slice() {
    let line = ok(&[
        "speculate",
        "--draft",
        "ngram",
        "--k",
        "3",
        "--temperature",
        "0",
        "--max-tokens",
        "300",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(report["k"], 3);
    assert_eq!(report["policy"], "greedy");
    assert_eq!(report["draft"], "ngram-3");
    check_slices(&report["slices"], 3);
    // Greedy acceptance is a count of agreeing argmaxes over the scored positions.
    for s in report["slices"].as_array().unwrap() {
        let positions = s["tokens"].as_f64().unwrap();
        let agreed = s["acceptance_rate"].as_f64().unwrap() * positions;
        assert!((agreed - agreed.round()).abs() < 1e-6, "{s}");
    }
    let table = ok(&[
        "speculate",
        "--k",
        "2",
        "--top-k",
        "40",
        "--max-tokens",
        "100",
    ]);
    assert!(
        table.contains("policy temperature 0.7, top-k 40, k = 2"),
        "{table}"
    );
}

/// The committed planner file: three policies, the eval's slices, E consistent with α.
#[test]
fn the_committed_planner_file_is_consistent() {
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model_dir().join("speculate.json")).unwrap())
            .unwrap();
    assert_eq!(file["model"], "decode-lab-tiny-v1");
    assert_eq!(file["draft"], "ngram-3");
    let k = file["k"].as_u64().unwrap() as usize;
    assert_eq!(k, 4);
    let policies = file["policies"].as_array().unwrap();
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greedy", "temperature 0.7", "temperature 1.5"]);
    for p in policies {
        check_slices(&p["slices"], k);
    }
    assert_eq!(expected_tokens_per_verify(1.0, k).unwrap(), 5.0);
}

#[test]
fn bad_speculation_input_is_refused_with_the_value() {
    fails_with(&["speculate", "--k", "0"], "--k 0 drafts no token");
    fails_with(&["speculate", "--k", "4", "--draft", "medusa"], "medusa");
    fails_with(
        &[
            "speculate",
            "--k",
            "4",
            "--draft-file",
            "no/such/draft.ngram",
        ],
        "cannot read no/such/draft.ngram",
    );
    fails_with(
        &["speculate", "--k", "4", "--planner", "--temperature", "0"],
        "--planner measures its own three policies",
    );
    let out = decode_lab(&["speculate", "--k", "-1"]);
    assert_eq!(out.status.code(), Some(2));

    // A flipped bit, and a draft trained with another tokenizer, each named.
    let committed = std::fs::read(model_dir().join("draft.ngram")).unwrap();
    let flipped = scratch("flipped.ngram");
    let mut bytes = committed.clone();
    bytes[committed.len() / 2] ^= 0x04;
    std::fs::write(&flipped, &bytes).unwrap();
    fails_with(
        &[
            "speculate",
            "--k",
            "4",
            "--draft-file",
            flipped.to_str().unwrap(),
        ],
        "the file is damaged: its checksum is",
    );
    let foreign = scratch("foreign.ngram");
    let other = "0".repeat(64);
    let config = ngram::TrainConfig {
        order: 2,
        vocab: 768,
        tokenizer_sha256: other.clone(),
        discounts: ngram::Discounts::Fixed(0.75),
    };
    let model = ngram::train(&[&[1, 2, 3, 1, 2]], &config).unwrap();
    std::fs::write(&foreign, model.to_bytes()).unwrap();
    fails_with(
        &[
            "speculate",
            "--k",
            "4",
            "--draft-file",
            foreign.to_str().unwrap(),
        ],
        &format!(
            "the model was trained with the tokenizer whose SHA-256 is {other}, but the \
             tokenizer in use has {}",
            recorded_hash("tokenizer")
        ),
    );
    for file in [flipped, foreign] {
        let out = decode_lab(&[
            "speculate",
            "--k",
            "4",
            "--draft-file",
            file.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2));
        std::fs::remove_file(file).unwrap();
    }
}
