//! The candle graph used in training and the reference forward pass (`model::Transformer`)
//! give the same logits for the same weights: randomly initialised models (a small config in
//! three attention shapes, and the released config) exported with `Net::to_weights`, on
//! prompts of 1, 7, 31 and 100 tokens, at the last position and at every position.

use candle_core::Tensor;
use model::{ModelConfig, Transformer};
use trainer::{Init, Net, Rng};

const TOLERANCE: f32 = 1e-4;

fn config(
    vocab: usize,
    d: usize,
    layers: usize,
    heads: usize,
    kv: usize,
    ff: usize,
    ctx: usize,
) -> ModelConfig {
    ModelConfig {
        name: "parity".into(),
        vocab_size: vocab,
        d_model: d,
        n_layers: layers,
        n_heads: heads,
        n_kv_heads: kv,
        d_ff: ff,
        context_len: ctx,
        rope_theta: 10_000.0,
        norm_eps: 1e-5,
        files: Vec::new(),
    }
}

/// The released model's shapes.
fn real_config() -> ModelConfig {
    config(768, 128, 4, 4, 2, 352, 256)
}

fn prompt(rng: &mut Rng, len: usize, vocab: usize) -> Vec<u32> {
    (0..len).map(|_| rng.below(vocab) as u32).collect()
}

/// Candle logits `[len][vocab]` for one prompt.
fn candle_logits(net: &Net, tokens: &[u32]) -> Vec<Vec<f32>> {
    let ids = Tensor::from_vec(tokens.to_vec(), (1, tokens.len()), net.device()).unwrap();
    let logits = net.forward(&ids).unwrap();
    logits.squeeze(0).unwrap().to_vec2::<f32>().unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Checks the last position for every prompt length, and every position of the prompt of
/// length `all_positions`; returns the largest difference seen.
fn check(config: &ModelConfig, seed: u64, lengths: &[usize], all_positions: usize) -> f32 {
    let mut rng = Rng::new(seed);
    let net = Net::new(config, &Init::testing(config), &mut rng).unwrap();
    let weights = net.to_weights().unwrap();
    let mut reference = Transformer::new(config.clone(), weights, "parity".into());
    let mut worst = 0.0f32;
    for &len in lengths {
        let tokens = prompt(&mut rng, len, config.vocab_size);
        let ours = candle_logits(&net, &tokens);
        let theirs = reference.prefill(&tokens).unwrap().to_vec();
        let scale = theirs.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!(
            scale > 0.5,
            "logits of order one make the check meaningful, got max |logit| {scale}"
        );
        let diff = max_abs_diff(&ours[len - 1], &theirs);
        assert!(
            diff <= TOLERANCE,
            "prompt of {len} tokens: max |diff| {diff} at the last position"
        );
        worst = worst.max(diff);
        if len == all_positions {
            let every = reference.prefill_all(&tokens).unwrap().to_vec();
            for (t, row) in every.chunks_exact(config.vocab_size).enumerate() {
                let diff = max_abs_diff(&ours[t], row);
                assert!(
                    diff <= TOLERANCE,
                    "prompt of {len} tokens: max |diff| {diff} at position {t}"
                );
                worst = worst.max(diff);
            }
        }
    }
    worst
}

#[test]
fn small_config_grouped_query_attention() {
    let worst = check(&config(61, 32, 2, 4, 2, 40, 128), 11, &[1, 7, 31, 100], 31);
    eprintln!("small GQA: max |diff| {worst:e}");
}

#[test]
fn small_config_multi_head_and_multi_query_attention() {
    let mha = check(&config(61, 32, 2, 4, 4, 40, 64), 12, &[1, 7, 31], 7);
    let mqa = check(&config(61, 32, 2, 4, 1, 40, 64), 13, &[1, 7, 31], 7);
    eprintln!("small MHA: max |diff| {mha:e}; MQA: {mqa:e}");
}

#[test]
fn released_config() {
    let worst = check(&real_config(), 14, &[1, 7, 31, 100], 7);
    eprintln!("released config: max |diff| {worst:e}");
}

/// The f32 safetensors file carries every tensor under the reference's names: the
/// reference loaded from the file agrees with the candle graph.
#[test]
fn exported_file_loads_into_the_reference() {
    let config = config(61, 32, 2, 4, 2, 40, 64);
    let mut rng = Rng::new(15);
    let net = Net::new(&config, &Init::testing(&config), &mut rng).unwrap();
    let bytes = net.to_weights().unwrap().to_safetensors().unwrap();
    let mut reference = Transformer::from_safetensors(config.clone(), &bytes).unwrap();
    let tokens = prompt(&mut rng, 20, config.vocab_size);
    let ours = candle_logits(&net, &tokens);
    let theirs = reference.prefill(&tokens).unwrap();
    assert!(max_abs_diff(&ours[19], theirs) <= TOLERANCE);

    // And back: a Net built from the exported weights is the same model.
    let again = Net::from_weights(&config, &net.to_weights().unwrap()).unwrap();
    assert_eq!(again.to_weights().unwrap(), net.to_weights().unwrap());
}
