//! The tiny model's forward pass on the CPU, side by side: our reference pass (f32 and
//! int8 weights) and candle-transformers' Llama (the same architecture) on the same f32
//! weights, both with a KV cache. Prefill at prompt lengths 16, 64, 256; one decode step
//! at positions 1, 128, 255.
//!
//! Run with `cargo bench -p policy-bench --bench forward`; criterion prints the medians and
//! keeps them under `target/criterion/{prefill,decode}/`.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Llama, LlamaConfig};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use model::{Layer, Linear, ModelConfig, Transformer, Weights};

const MODEL_DIR: &str = "../../models/decode-lab-tiny-v1";
const PREFILL: [usize; 3] = [16, 64, 256];
const DECODE_AT: [usize; 3] = [1, 128, 255];

fn load() -> (ModelConfig, Weights) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(MODEL_DIR);
    let config = ModelConfig::from_json(
        &std::fs::read_to_string(dir.join("config.json")).expect("config.json"),
    )
    .expect("config");
    let file = config
        .file("weights-f32")
        .expect("f32 weights recorded")
        .path
        .clone();
    let bytes = std::fs::read(dir.join(file)).expect("weights");
    let weights = Weights::from_safetensors(&config, &bytes).expect("weights load");
    (config, weights)
}

fn tensor(m: &Linear, device: &Device) -> Tensor {
    match m {
        Linear::F32 { rows, cols, data } => {
            Tensor::from_slice(data, (*rows, *cols), device).expect("tensor")
        }
        Linear::Int8 { .. } => unreachable!("candle gets the f32 weights"),
    }
}

/// Our weights under the names candle-transformers' Llama reads.
fn candle_llama(
    config: &ModelConfig,
    weights: &Weights,
    device: &Device,
) -> (Llama, candle_transformers::models::llama::Config) {
    let mut tensors = HashMap::new();
    let vector = |v: &[f32]| Tensor::from_slice(v, v.len(), device).expect("tensor");
    tensors.insert(
        "model.embed_tokens.weight".to_string(),
        tensor(&weights.embed, device),
    );
    tensors.insert("model.norm.weight".to_string(), vector(&weights.norm));
    for (
        i,
        Layer {
            attn_norm,
            q,
            k,
            v,
            o,
            mlp_norm,
            gate,
            up,
            down,
        },
    ) in weights.layers.iter().enumerate()
    {
        let p = format!("model.layers.{i}");
        tensors.insert(format!("{p}.input_layernorm.weight"), vector(attn_norm));
        tensors.insert(
            format!("{p}.post_attention_layernorm.weight"),
            vector(mlp_norm),
        );
        for (name, m) in [
            ("self_attn.q_proj", q),
            ("self_attn.k_proj", k),
            ("self_attn.v_proj", v),
            ("self_attn.o_proj", o),
            ("mlp.gate_proj", gate),
            ("mlp.up_proj", up),
            ("mlp.down_proj", down),
        ] {
            tensors.insert(format!("{p}.{name}.weight"), tensor(m, device));
        }
    }
    let llama_config = LlamaConfig {
        hidden_size: config.d_model,
        intermediate_size: config.d_ff,
        vocab_size: config.vocab_size,
        num_hidden_layers: config.n_layers,
        num_attention_heads: config.n_heads,
        num_key_value_heads: Some(config.n_kv_heads),
        rms_norm_eps: f64::from(config.norm_eps),
        rope_theta: config.rope_theta,
        bos_token_id: None,
        eos_token_id: None,
        rope_scaling: None,
        max_position_embeddings: config.context_len,
        tie_word_embeddings: Some(true),
    }
    .into_config(false);
    let vb = VarBuilder::from_tensors(tensors, DType::F32, device);
    (Llama::load(vb, &llama_config).expect("llama"), llama_config)
}

fn tokens(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect()
}

fn bench_forward(c: &mut Criterion) {
    let (config, weights) = load();
    let device = Device::Cpu;
    let (llama, llama_config) = candle_llama(&config, &weights, &device);
    let all = tokens(config.context_len, config.vocab_size);
    let mut ours = [
        (
            "ours-f32",
            Transformer::new(config.clone(), weights.clone(), "f32".into()),
        ),
        (
            "ours-int8",
            Transformer::new(config.clone(), weights.quantized(), "int8".into()),
        ),
    ];
    let input = |t: &[u32]| {
        Tensor::new(t, &device)
            .and_then(|t| t.unsqueeze(0))
            .expect("input")
    };
    let new_cache = || Cache::new(true, DType::F32, &llama_config, &device).expect("cache");

    let mut group = c.benchmark_group("prefill");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for n in PREFILL {
        group.throughput(Throughput::Elements(n as u64));
        for (name, model) in ours.iter_mut() {
            group.bench_with_input(BenchmarkId::new(*name, n), &n, |b, &n| {
                b.iter(|| model.prefill(&all[..n]).expect("prefill")[0])
            });
        }
        group.bench_with_input(BenchmarkId::new("candle-llama", n), &n, |b, &n| {
            b.iter_batched(
                new_cache,
                |mut cache| {
                    llama
                        .forward(&input(&all[..n]), 0, &mut cache)
                        .expect("forward")
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("decode");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(1));
    for p in DECODE_AT {
        for (name, model) in ours.iter_mut() {
            // Each step needs a cache holding exactly p positions: refill it untimed.
            group.bench_with_input(BenchmarkId::new(*name, p), &p, |b, &p| {
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        model.prefill(&all[..p]).expect("prefill");
                        let start = Instant::now();
                        black_box(model.decode_step(all[p]).expect("decode")[0]);
                        timed += start.elapsed();
                    }
                    timed
                })
            });
        }
        group.bench_with_input(BenchmarkId::new("candle-llama", p), &p, |b, &p| {
            b.iter_batched(
                || {
                    let mut cache = new_cache();
                    llama
                        .forward(&input(&all[..p]), 0, &mut cache)
                        .expect("prefix");
                    cache
                },
                |mut cache| {
                    llama
                        .forward(&input(&all[p..p + 1]), p, &mut cache)
                        .expect("decode")
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_forward);
criterion_main!(benches);
