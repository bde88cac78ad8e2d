//! The whole model on the GPU against the CPU reference: logits within 1e-3 and the same
//! greedy tokens for 64 steps on 8 prompts, f32 and int8; the read-back budget; and the
//! command sequence reused across layers.

mod common;

use common::{argmax, cpu_model, gpu, max_abs_diff};
use gpu::{Faults, GpuTransformer};
use policy::LanguageModel;

const PROMPTS: [&str; 8] = [
    "The ",
    "Once upon a time",
    "To insert a table, choose ",
    "Click the button and",
    "Kaixo, zer moduz",
    "In the beginning the file was empty.",
    "x",
    "Press Enter to continue. The dialog shows",
];
const STEPS: usize = 64;

/// The CPU model's weights on the GPU.
fn upload(device: gpu::Gpu, cpu: &model::Transformer) -> GpuTransformer {
    GpuTransformer::new(
        device,
        cpu.config().clone(),
        cpu.weights(),
        cpu.id(),
        Faults::default(),
    )
    .expect("the model uploads")
}
const TOLERANCE: f32 = 1e-3;

fn greedy_parity(precision: &str) {
    let Some(device) = gpu(&format!("greedy_parity_{precision}")) else {
        return;
    };
    let mut cpu = cpu_model(precision);
    let mut on_gpu = upload(device, &cpu);
    let mut worst = 0.0f32;
    for prompt in PROMPTS {
        let ids: Vec<u32> = prompt.bytes().map(u32::from).collect();
        let mut expected = cpu.prefill(&ids).unwrap().to_vec();
        let mut got = pollster::block_on(on_gpu.prefill(&ids)).unwrap().to_vec();
        for step in 0..STEPS {
            let diff = max_abs_diff(&expected, &got);
            worst = worst.max(diff);
            assert!(
                diff <= TOLERANCE,
                "{precision} {prompt:?} step {step}: logits differ by {diff}"
            );
            let token = argmax(&expected);
            assert_eq!(
                argmax(&got),
                token,
                "{precision} {prompt:?} step {step}: greedy token"
            );
            expected = cpu.decode_step(token).unwrap().to_vec();
            got = pollster::block_on(on_gpu.decode_step(token))
                .unwrap()
                .to_vec();
        }
    }
    eprintln!("{precision}: worst logit difference over 8 prompts x 64 steps: {worst:e}");
    assert_eq!(
        on_gpu.readbacks(),
        (PROMPTS.len() * (STEPS + 1)) as u64,
        "one read-back per call"
    );
}

#[test]
fn f32_logits_and_greedy_tokens_match_the_cpu_reference() {
    greedy_parity("f32");
}

#[test]
fn int8_logits_and_greedy_tokens_match_the_cpu_reference() {
    greedy_parity("int8");
}

#[test]
fn one_command_sequence_is_reused_by_every_layer() {
    let Some(device) = gpu("command_sequence") else {
        return;
    };
    let cpu = cpu_model("f32");
    let mut model = upload(device, &cpu);
    let layers = cpu.config().n_layers;
    let sequence = |layer: &[&'static str]| {
        let mut expected = vec!["embed"];
        for _ in 0..layers {
            expected.extend(layer);
        }
        expected.push("logits");
        expected
    };
    let block = [
        "rmsnorm",
        "qkv",
        "rope store",
        "attention",
        "o",
        "rmsnorm",
        "gate up",
        "swiglu",
        "down",
    ];
    assert_eq!(model.pass_labels(false), sequence(&block));
    let one = ["qkv", "attention", "o", "gate up", "down"];
    assert_eq!(model.pass_labels(true), sequence(&one));

    // A decode step is at most 24 dispatches with the policy step on the device, and the
    // counter counts what was encoded.
    let before = model.dispatches();
    pollster::block_on(model.prefill(&[1, 2, 3])).unwrap();
    let prefill = model.dispatches() - before;
    pollster::block_on(model.decode_step(4)).unwrap();
    let decode = model.dispatches() - before - prefill;
    let policy = policy::Policy::default();
    pollster::block_on(model.choose(&[5], false, &policy, Some(0.5), None, false)).unwrap();
    let sampled = model.dispatches() - before - prefill - decode;
    assert_eq!(prefill, 2 + 9 * layers as u64);
    assert_eq!(decode, 2 + 5 * layers as u64);
    assert_eq!(sampled, decode + 1);
    assert!(sampled <= 24, "{sampled} dispatches for a decode step");
    // Weights (f32) and the KV cache are resident: 4 bytes a parameter plus the cache.
    let config = cpu.config();
    let cache =
        2 * config.n_layers * config.n_kv_heads * config.context_len * config.head_dim() * 4;
    assert!(model.resident_bytes() >= cache as u64);
}

#[test]
fn a_full_context_and_bad_ids_are_typed_errors() {
    let Some(device) = gpu("gpu_errors") else {
        return;
    };
    let cpu = cpu_model("f32");
    let context = cpu.config().context_len;
    let mut model = upload(device, &cpu);
    let too_long = vec![1u32; context + 1];
    let error = pollster::block_on(model.prefill(&too_long)).unwrap_err();
    assert!(
        error.to_string().contains(&format!("{}", context + 1)),
        "{error}"
    );
    let error = pollster::block_on(model.prefill(&[9999])).unwrap_err();
    assert!(error.to_string().contains("9999"), "{error}");
    let error = pollster::block_on(model.prefill(&[])).unwrap_err();
    assert!(error.to_string().contains("empty"), "{error}");
    // The context fills exactly.
    pollster::block_on(model.prefill(&vec![65u32; context - 1])).unwrap();
    pollster::block_on(model.decode_step(66)).unwrap();
    assert!(pollster::block_on(model.decode_step(67)).is_err());
}
