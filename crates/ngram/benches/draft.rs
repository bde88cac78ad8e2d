//! The draft's cost against the target's, one next token each, side by side: the shipped
//! order-3 n-gram's whole next-token distribution (alone, and through the policy at
//! temperature 0.7 as `decode-lab speculate` uses it) and the tiny transformer's decode step
//! at position 128 (its KV cache refilled untimed before each step), on held-out Basque text.
//!
//! Run with `cargo bench -p ngram --bench draft` (the model files must be there).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use model::{ModelConfig, Transformer};
use ngram::NgramModel;
use policy::{speculative::final_distribution, Policy, StepContext, Stepper};

const POSITION: usize = 128;

fn bench_draft(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("models/decode-lab-tiny-v1");
    let read = |file: &str| std::fs::read(dir.join(file)).expect("model file");
    let config = ModelConfig::from_json(&String::from_utf8(read("config.json")).expect("utf-8"))
        .expect("config");
    let hash = config.file("tokenizer").expect("tokenizer").sha256.clone();
    let draft = NgramModel::from_bytes(&read("draft.ngram"), &hash).expect("draft");
    let tokenizer =
        tokenizer::Tokenizer::from_json(&String::from_utf8(read("tokenizer.json")).expect("utf-8"))
            .expect("tokenizer");
    let mut target =
        Transformer::from_safetensors(config, &read("model.f32.safetensors")).expect("weights");
    let text = std::fs::read_to_string(root.join("corpus/valid.eu.txt")).expect("corpus");
    let tokens = tokenizer.encode(&text[..20_000]);
    assert!(tokens.len() > 2 * POSITION);

    let mut group = c.benchmark_group("next-token");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let mut out = Vec::new();
    let mut at = 2;
    group.bench_function("draft-ngram3", |b| {
        b.iter(|| {
            at = if at + 1 >= tokens.len() { 2 } else { at + 1 };
            draft
                .next_distribution(&tokens[..at], &mut out)
                .expect("ids");
            black_box(out[0])
        })
    });
    let policy = Policy {
        temperature: 0.7,
        ..Policy::default()
    };
    let (mut stepper, mut logits, mut q) = (Stepper::default(), Vec::new(), Vec::new());
    group.bench_function("draft-ngram3+policy", |b| {
        b.iter(|| {
            at = if at + 1 >= tokens.len() { 2 } else { at + 1 };
            draft
                .next_distribution(&tokens[..at], &mut out)
                .expect("ids");
            logits.clear();
            logits.extend(out.iter().map(|p| p.ln()));
            let context = StepContext::new(&tokens[..at], 1);
            final_distribution(&mut stepper, &policy, &logits, context, &mut q).expect("policy");
            black_box(q[0])
        })
    });
    group.bench_function("target-decode-at-128", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                target.prefill(&tokens[..POSITION]).expect("prefill");
                let start = Instant::now();
                black_box(target.decode_step(tokens[POSITION]).expect("decode")[0]);
                timed += start.elapsed();
            }
            timed
        })
    });
    group.finish();
}

criterion_group!(benches, bench_draft);
criterion_main!(benches);
