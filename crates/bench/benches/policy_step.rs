//! One decoding step, side by side: our policy crate, candle's `LogitsProcessor`, the
//! model's own distribution that a generation step records beside the policy's
//! (`policy::model_view`), the chain path (the fixed order as an explicit chain, and each
//! engine preset), and the memory-read floor, on the same logits, in one criterion group per
//! vocabulary size.
//!
//! Run with `cargo bench -p policy-bench --bench policy_step`; `report.py` tabulates the
//! medians that criterion writes under `target/criterion/`.

use std::hint::black_box;
use std::time::Duration;

use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use policy::{Engine, NumpyRng, Policy, Snapshots, StepContext, Stepper};

const VOCABS: [usize; 4] = [512, 32_768, 131_072, 262_144];
const LOGIT_SEED: u64 = 0x5EED;
const SAMPLE_SEED: u64 = 299_792_458;
const TEMPERATURE: f64 = 0.8;
const TOP_K: usize = 50;
const TOP_P: f64 = 0.9;

/// The memory-read floor: one pass that reads every logit once. Sixteen independent
/// accumulators let the compiler vectorise it, so it runs at load bandwidth rather than
/// at the latency of one serial chain of float additions.
fn read_floor(logits: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = logits.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn bench_step(c: &mut Criterion) {
    for vocab in VOCABS {
        let logits = policy_bench::logits(vocab, LOGIT_SEED, 2.0);
        let tensor = Tensor::from_slice(&logits, vocab, &Device::Cpu).expect("tensor");

        let top_k_top_p = Policy {
            temperature: TEMPERATURE,
            top_k: TOP_K,
            top_p: TOP_P,
            ..Policy::default()
        };
        let top_p_only = Policy {
            temperature: TEMPERATURE,
            top_p: TOP_P,
            ..Policy::default()
        };
        let settings = [
            (
                "topk50_topp0.9",
                top_k_top_p.clone(),
                Sampling::TopKThenTopP {
                    k: TOP_K,
                    p: TOP_P,
                    temperature: TEMPERATURE,
                },
            ),
            (
                "topp0.9",
                top_p_only,
                Sampling::TopP {
                    p: TOP_P,
                    temperature: TEMPERATURE,
                },
            ),
        ];

        // One scratch-reusing stepper for the whole group, as a generation loop would.
        let mut stepper = Stepper::default();
        for (name, policy, _) in &settings {
            let outcome = stepper
                .step(
                    policy,
                    &logits,
                    StepContext::default(),
                    &mut NumpyRng::new(SAMPLE_SEED),
                    Snapshots::Skip,
                )
                .expect("policy step");
            eprintln!(
                "V={vocab} {name}: {} survivors, entropy {:.3} nats",
                outcome.survivors, outcome.entropy
            );
        }

        let mut group = c.benchmark_group(format!("policy_step_V{vocab}"));
        group
            .throughput(Throughput::Elements(vocab as u64))
            .sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));

        for (name, policy, sampling) in settings {
            // The generators advance every iteration, so every draw is fresh.
            let mut rng = NumpyRng::new(SAMPLE_SEED);
            group.bench_function(BenchmarkId::new("ours", name), |b| {
                b.iter(|| {
                    stepper
                        .step(
                            &policy,
                            black_box(logits.as_slice()),
                            StepContext::default(),
                            &mut rng,
                            Snapshots::Skip,
                        )
                        .expect("policy step")
                        .token
                })
            });

            let mut processor = LogitsProcessor::from_sampling(SAMPLE_SEED, sampling);
            group.bench_function(BenchmarkId::new("candle", name), |b| {
                b.iter(|| processor.sample(black_box(&tensor)).expect("candle sample"))
            });
        }

        // The same top-k 50 + top-p 0.9 through the chain path: the fixed order written as
        // an explicit chain, and each engine preset with its own stage rules.
        let chained = [
            (
                "hf_chain",
                Policy {
                    samplers: Some(policy::chain::HF_CHAIN.to_vec()),
                    ..top_k_top_p.clone()
                },
            ),
            (
                "engine_hf",
                Policy {
                    engine: Engine::Hf,
                    ..top_k_top_p.clone()
                },
            ),
            (
                "engine_llama.cpp",
                Policy {
                    engine: Engine::LlamaCpp,
                    ..top_k_top_p.clone()
                },
            ),
            (
                "engine_vllm",
                Policy {
                    engine: Engine::Vllm,
                    ..top_k_top_p.clone()
                },
            ),
        ];
        for (name, policy) in chained {
            let mut rng = NumpyRng::new(SAMPLE_SEED);
            group.bench_function(BenchmarkId::new("chain_topk50_topp0.9", name), |b| {
                b.iter(|| {
                    stepper
                        .step(
                            &policy,
                            black_box(logits.as_slice()),
                            StepContext::default(),
                            &mut rng,
                            Snapshots::Skip,
                        )
                        .expect("policy step")
                        .token
                })
            });
        }

        // Each modern sampler alone at temperature 0.8, on the chain path.
        let modern = [
            (
                "typical0.9",
                Policy {
                    typical_p: 0.9,
                    ..top_p_only_base()
                },
            ),
            (
                "epsilon1e-5",
                Policy {
                    epsilon_cutoff: 1e-5,
                    ..top_p_only_base()
                },
            ),
            (
                "eta1e-4",
                Policy {
                    eta_cutoff: 1e-4,
                    ..top_p_only_base()
                },
            ),
            (
                "top_n_sigma1",
                Policy {
                    top_n_sigma: Some(1.0),
                    ..top_p_only_base()
                },
            ),
            (
                "xtc1_0.001",
                Policy {
                    xtc_probability: 1.0,
                    xtc_threshold: 0.001,
                    ..top_p_only_base()
                },
            ),
            (
                "mirostat2_tau5",
                Policy {
                    mirostat: 2,
                    ..top_p_only_base()
                },
            ),
        ];
        for (name, policy) in modern {
            let mut rng = NumpyRng::new(SAMPLE_SEED);
            group.bench_function(BenchmarkId::new("modern", name), |b| {
                b.iter(|| {
                    stepper
                        .step(
                            &policy,
                            black_box(logits.as_slice()),
                            StepContext::default(),
                            &mut rng,
                            Snapshots::Skip,
                        )
                        .expect("policy step")
                        .token
                })
            });
        }

        // What a generation step adds for its record: the model's own distribution at the
        // chosen token (max, normaliser and top five over every logit).
        group.bench_function(BenchmarkId::new("model", "view"), |b| {
            b.iter(|| {
                policy::model_view(black_box(logits.as_slice()), 0)
                    .expect("model view")
                    .logprob
            })
        });

        group.bench_function(BenchmarkId::new("floor", "read"), |b| {
            b.iter(|| read_floor(black_box(logits.as_slice())))
        });
        group.finish();
    }
}

/// Temperature 0.8 and nothing else: the base the modern samplers are added to.
fn top_p_only_base() -> Policy {
    Policy {
        temperature: TEMPERATURE,
        ..Policy::default()
    }
}

/// DRY against the context's length at V = 32,768: its repeat lengths are computed by their
/// definition (a scan per earlier position), so the cost grows with the square of the window
/// where llama.cpp's Z-algorithm is linear; beside the same step without DRY.
fn bench_dry(c: &mut Criterion) {
    const V: usize = 32_768;
    let logits = policy_bench::logits(V, LOGIT_SEED, 2.0);
    let mut group = c.benchmark_group("dry_context");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    for n in [64usize, 256, 1024, 4096] {
        // A repetitive context: a 37-token phrase over and over, with a varying tail.
        let context: Vec<u32> = (0..n)
            .map(|i| ((i % 37) * 101 + (i / 370)) as u32 % V as u32)
            .collect();
        let dry = Policy {
            temperature: TEMPERATURE,
            dry_multiplier: 0.8,
            ..Policy::default()
        };
        let plain = Policy {
            temperature: TEMPERATURE,
            samplers: Some(policy::chain::HF_CHAIN.to_vec()),
            ..Policy::default()
        };
        let mut stepper = Stepper::default();
        for (name, policy) in [("dry0.8", dry), ("chain_without_dry", plain)] {
            let mut rng = NumpyRng::new(SAMPLE_SEED);
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    stepper
                        .step(
                            &policy,
                            black_box(logits.as_slice()),
                            StepContext::new(&context, context.len()),
                            &mut rng,
                            Snapshots::Skip,
                        )
                        .expect("policy step")
                        .token
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_step, bench_dry);
criterion_main!(benches);
