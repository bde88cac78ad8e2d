//! The training graph is differentiable end to end: every tensor receives a gradient, and
//! a few optimiser steps on one batch lower its loss. Initialisation is seeded.

use candle_core::Tensor;
use model::ModelConfig;
use trainer::{net::tensor_shapes, Init, Net, Optim, OptimConfig, Rng, Schedule};

fn config() -> ModelConfig {
    ModelConfig {
        name: "train-test".into(),
        vocab_size: 40,
        d_model: 16,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        d_ff: 24,
        context_len: 16,
        rope_theta: 10_000.0,
        norm_eps: 1e-5,
        files: Vec::new(),
    }
}

fn batch(net: &Net, rng: &mut Rng) -> (Tensor, Tensor) {
    let (b, t) = (4, 12);
    let tokens: Vec<u32> = (0..b * (t + 1)).map(|_| rng.below(40) as u32).collect();
    let inputs: Vec<u32> = tokens.chunks(t + 1).flat_map(|w| w[..t].to_vec()).collect();
    let targets: Vec<u32> = tokens.chunks(t + 1).flat_map(|w| w[1..].to_vec()).collect();
    (
        Tensor::from_vec(inputs, (b, t), net.device()).unwrap(),
        Tensor::from_vec(targets, (b, t), net.device()).unwrap(),
    )
}

#[test]
fn every_tensor_gets_a_gradient() {
    let config = config();
    let mut rng = Rng::new(1);
    let net = Net::new(&config, &Init::testing(&config), &mut rng).unwrap();
    let (x, y) = batch(&net, &mut rng);
    let grads = net.loss(&x, &y).unwrap().backward().unwrap();
    let data = net.varmap().data().lock().unwrap();
    for (name, _) in tensor_shapes(&config) {
        let var = &data[&name];
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("{name} has no gradient"));
        let norm = g
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(
            norm > 0.0 && norm.is_finite(),
            "{name}: gradient norm² {norm}"
        );
    }
}

#[test]
fn steps_lower_the_loss_and_runs_are_reproducible() {
    let config = config();
    let run = || {
        let mut rng = Rng::new(2);
        let net = Net::new(&config, &Init::training(&config), &mut rng).unwrap();
        let (x, y) = batch(&net, &mut rng);
        let mut optim = Optim::new(
            &net,
            OptimConfig {
                schedule: Schedule {
                    peak: 1e-2,
                    floor: 1e-3,
                    warmup: 2,
                    total: 20,
                },
                weight_decay: 0.1,
                beta1: 0.9,
                beta2: 0.95,
                clip_norm: 1.0,
            },
        )
        .unwrap();
        let first = net.loss(&x, &y).unwrap().to_scalar::<f32>().unwrap();
        for _ in 0..20 {
            let loss = net.loss(&x, &y).unwrap();
            optim.step(&loss).unwrap();
        }
        let last = net.loss(&x, &y).unwrap().to_scalar::<f32>().unwrap();
        (first, last, net.to_weights().unwrap())
    };
    let (first, last, weights) = run();
    assert!(last < first - 0.5, "loss {first} → {last}");
    assert_eq!(run().2, weights, "same seed, same weights");
}
