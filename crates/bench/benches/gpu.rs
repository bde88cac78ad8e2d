//! The GPU forward pass against the CPU reference, side by side in one run, on whatever
//! adapter wgpu finds (lavapipe on a machine without a GPU): prefill at 16, 64 and 256
//! tokens, one decode step at positions 1, 128 and 255, f32 and int8 on the GPU; and a bare
//! read-back of the logits, the floor of a model call's overhead beyond its kernels; and a
//! decode step whose policy step also runs on the GPU (a 136-byte read-back), and one with a
//! penalised policy stepped on the GPU from its constraint table or on the host.
//! After the timed groups it prints read-backs per token and where a decode step's time
//! goes (dispatch, GPU work, read-back copy).
//!
//! Run with `cargo bench -p policy-bench --bench gpu`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gpu::{Faults, Gpu, GpuTransformer, StepTimings};
use model::{ModelConfig, Transformer};

const MODEL_DIR: &str = "../../models/decode-lab-tiny-v1";
const PREFILL: [usize; 3] = [16, 64, 256];
const DECODE_AT: [usize; 3] = [1, 128, 255];

fn cpu(precision: &str) -> Transformer {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(MODEL_DIR);
    let config = ModelConfig::from_json(
        &std::fs::read_to_string(dir.join("config.json")).expect("config.json"),
    )
    .expect("config");
    let file = config
        .file(&format!("weights-{precision}"))
        .expect("weights recorded")
        .path
        .clone();
    let bytes = std::fs::read(dir.join(file)).expect("weights");
    Transformer::from_safetensors(config, &bytes).expect("weights load")
}

fn on_gpu(precision: &str) -> GpuTransformer {
    let device = pollster::block_on(Gpu::request(Faults::default()))
        .expect("a GPU adapter (install mesa-vulkan-drivers for lavapipe)");
    let reference = cpu(precision);
    GpuTransformer::new(
        device,
        reference.config().clone(),
        reference.weights(),
        policy::LanguageModel::id(&reference),
        Faults::default(),
    )
    .expect("the model uploads")
}

fn prompt(n: usize) -> Vec<u32> {
    (0..n).map(|i| (i * 37 % 700) as u32).collect()
}

/// The models of one run, each behind the same two calls (boxed: the two differ in size).
enum Backend {
    Cpu(Box<Transformer>),
    Gpu(Box<GpuTransformer>),
}

impl Backend {
    fn prefill(&mut self, ids: &[u32]) {
        match self {
            Backend::Cpu(m) => {
                black_box(m.prefill(ids).expect("prefill"));
            }
            Backend::Gpu(m) => {
                black_box(pollster::block_on(m.prefill(ids)).expect("prefill"));
            }
        }
    }

    fn decode(&mut self, id: u32) {
        match self {
            Backend::Cpu(m) => {
                black_box(m.decode_step(id).expect("decode"));
            }
            Backend::Gpu(m) => {
                black_box(pollster::block_on(m.decode_step(id)).expect("decode"));
            }
        }
    }
}

fn backends() -> Vec<(&'static str, Backend)> {
    vec![
        ("cpu-reference f32", Backend::Cpu(Box::new(cpu("f32")))),
        ("gpu f32", Backend::Gpu(Box::new(on_gpu("f32")))),
        ("gpu int8", Backend::Gpu(Box::new(on_gpu("int8")))),
    ]
}

fn prefill(c: &mut Criterion) {
    let mut backends = backends();
    let mut group = c.benchmark_group("gpu_prefill");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    for n in PREFILL {
        let ids = prompt(n);
        group.throughput(Throughput::Elements(n as u64));
        for (name, backend) in &mut backends {
            group.bench_with_input(BenchmarkId::new(*name, n), &ids, |b, ids| {
                b.iter(|| backend.prefill(ids))
            });
        }
    }
    group.finish();
}

fn decode(c: &mut Criterion) {
    let mut backends = backends();
    let mut group = c.benchmark_group("gpu_decode");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(1));
    for position in DECODE_AT {
        let ids = prompt(position);
        for (name, backend) in &mut backends {
            group.bench_function(BenchmarkId::new(*name, position), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        backend.prefill(&ids);
                        let start = Instant::now();
                        backend.decode(7);
                        total += start.elapsed();
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

/// A bare read-back next to a whole decode step, and the split of a decode step's time.
fn overhead(c: &mut Criterion) {
    let mut model = on_gpu("f32");
    let mut group = c.benchmark_group("gpu_overhead");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    pollster::block_on(model.prefill(&prompt(1))).expect("prefill");
    group.bench_function("read-back only", |b| {
        b.iter(|| pollster::block_on(model.read_back_only()).expect("read back"))
    });
    group.bench_function("decode step at 1", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                pollster::block_on(model.prefill(&prompt(1))).expect("prefill");
                let start = Instant::now();
                black_box(pollster::block_on(model.decode_step(7)).expect("decode"));
                total += start.elapsed();
            }
            total
        })
    });
    let policy = policy::Policy {
        temperature: 0.8,
        top_k: 40,
        top_p: 0.95,
        ..policy::Policy::default()
    };
    group.bench_function("decode step at 1 + policy step on the GPU", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                pollster::block_on(model.prefill(&prompt(1))).expect("prefill");
                let start = Instant::now();
                black_box(
                    pollster::block_on(model.choose(&[7], false, &policy, Some(0.5), None, false))
                        .expect("decode and choose"),
                );
                total += start.elapsed();
            }
            total
        })
    });
    // Issue 16 §5: a policy with bias, a ban and the three penalties, over a context of 64
    // tokens, stepped on the GPU (the constraint table built and written each step) or
    // on the host (the logits read back, then the CPU policy).
    let penalised = policy::Policy {
        repetition_penalty: 1.3,
        frequency_penalty: 0.4,
        presence_penalty: 0.2,
        logit_bias: vec![(32, -2.0)],
        forbidden: vec![101],
        ..policy.clone()
    };
    let context: Vec<u32> = (0..64u32).map(|i| (i * 37) % 256).collect();
    let vocab = model.config().vocab_size;
    group.bench_function("decode step at 1 + penalised policy step on the GPU", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                pollster::block_on(model.prefill(&prompt(1))).expect("prefill");
                let start = Instant::now();
                let table =
                    penalised.constraint_table(policy::StepContext::new(&context, 8), vocab);
                black_box(
                    pollster::block_on(model.choose(
                        &[7],
                        false,
                        &penalised,
                        Some(0.5),
                        Some(&table),
                        false,
                    ))
                    .expect("decode and choose"),
                );
                total += start.elapsed();
            }
            total
        })
    });
    let mut stepper = policy::Stepper::default();
    group.bench_function(
        "decode step at 1 + penalised policy step on the host",
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    pollster::block_on(model.prefill(&prompt(1))).expect("prefill");
                    let start = Instant::now();
                    let logits = pollster::block_on(model.decode_step(7)).expect("decode");
                    black_box(
                        stepper
                            .step_with_draw(
                                &penalised,
                                logits,
                                policy::StepContext::new(&context, 8),
                                0.5,
                                policy::Snapshots::Skip,
                            )
                            .expect("host step"),
                    );
                    total += start.elapsed();
                }
                total
            })
        },
    );
    group.finish();

    let calls = 64;
    let before = model.readbacks();
    pollster::block_on(model.prefill(&prompt(1))).expect("prefill");
    let mut split = Vec::new();
    for _ in 0..calls {
        pollster::block_on(model.decode_step(7)).expect("decode");
        split.push(model.timings());
    }
    let median = |f: fn(&StepTimings) -> f64| {
        let mut v: Vec<f64> = split.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "gpu decode split on {} ({}): dispatch {:.3} ms, GPU work {:.3} ms, read-back copy {:.3} ms (medians of {calls}); read-backs per token {:.2}",
        model.gpu().adapter_name(),
        model.gpu().driver(),
        median(|t| t.dispatch_ms),
        median(|t| t.gpu_ms),
        median(|t| t.readback_ms),
        (model.readbacks() - before) as f64 / (calls + 1) as f64,
    );
}

criterion_group!(benches, prefill, decode, overhead);
criterion_main!(benches);
