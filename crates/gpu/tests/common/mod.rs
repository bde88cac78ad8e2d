//! What the GPU tests share: the device (or a loud skip), the committed model, random data.

#![allow(dead_code)]

use std::path::PathBuf;

use gpu::{Faults, Gpu};
use model::{ModelConfig, Transformer};

/// A device on whatever adapter wgpu finds (lavapipe on a machine without a GPU). With
/// `CI=true` a missing adapter fails the test: CI installs lavapipe, so no adapter there
/// means the GPU path went untested. Elsewhere the test says loudly that it skipped.
pub fn gpu(test: &str) -> Option<Gpu> {
    match pollster::block_on(Gpu::request(Faults::default())) {
        Ok(gpu) => Some(gpu),
        Err(error) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "{test}: CI=true and no GPU adapter: {error} (is mesa-vulkan-drivers installed?)"
            )
        }
        Err(error) => {
            eprintln!("\n!!! SKIPPED {test}: no GPU adapter ({error}); install mesa-vulkan-drivers for lavapipe !!!\n");
            None
        }
    }
}

pub fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/decode-lab-tiny-v1")
}

pub fn config() -> ModelConfig {
    let text = std::fs::read_to_string(model_dir().join("config.json")).expect("config.json");
    ModelConfig::from_json(&text).expect("a valid config")
}

/// The committed model on the CPU: `"f32"` or `"int8"`.
pub fn cpu_model(precision: &str) -> Transformer {
    let role = format!("weights-{precision}");
    let config = config();
    let file = config.file(&role).expect("a weights file").path.clone();
    let bytes = std::fs::read(model_dir().join(file)).expect("the weights");
    Transformer::from_safetensors(config, &bytes).expect("weights that load")
}

/// A small deterministic generator (xorshift), so inputs need no extra crate.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u32(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }

    /// Uniform in [-scale, scale).
    pub fn f32s(&mut self, len: usize, scale: f32) -> Vec<f32> {
        (0..len)
            .map(|_| (self.next_u32() as f32 / u32::MAX as f32 * 2.0 - 1.0) * scale)
            .collect()
    }
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            if (x - y).is_nan() {
                f32::INFINITY
            } else {
                (x - y).abs()
            }
        })
        .fold(0.0, f32::max)
}

pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
