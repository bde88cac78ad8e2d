//! The CPU reference forward pass under WebAssembly without any JavaScript glue, the way the
//! lab's model worker runs it: a cdylib with the released f32 weights built in and three
//! plain exports, `load()`, `prefill(n)` (one prefill of n tokens; returns the first logit)
//! and `decode(steps)` (a prefill of 1 token, then `steps` greedy decode steps; returns the
//! last token), which `crates/model/wasm_speed.mjs` times in Node.
//!
//! ```sh
//! cargo build --release -p model --target wasm32-unknown-unknown --example wasm_speed
//! node crates/model/wasm_speed.mjs                 # in Node; add --chromium for a browser page
//! ```
//!
//! `.cargo/config.toml` turns WebAssembly SIMD on for wasm32, as the lab's build has it;
//! `RUSTFLAGS=""` before the same `cargo build` gives the scalar build to compare with
//! (the script takes several .wasm files and times them side by side).

use std::sync::Mutex;

use model::{ModelConfig, Transformer};

static MODEL: Mutex<Option<Transformer>> = Mutex::new(None);

const CONFIG: &str = include_str!("../../../models/decode-lab-tiny-v1/config.json");
const WEIGHTS: &[u8] = include_bytes!("../../../models/decode-lab-tiny-v1/model.f32.safetensors");

/// Parses the built-in model; returns 1 on success, 0 on failure.
#[no_mangle]
pub extern "C" fn load() -> u32 {
    let model = ModelConfig::from_json(CONFIG)
        .ok()
        .and_then(|config| Transformer::from_safetensors(config, WEIGHTS).ok());
    match (model, MODEL.lock()) {
        (Some(model), Ok(mut slot)) => {
            *slot = Some(model);
            1
        }
        _ => 0,
    }
}

/// One prefill of `n` tokens (a fixed pattern of ids); returns the first logit, or NaN.
#[no_mangle]
pub extern "C" fn prefill(n: u32) -> f32 {
    let Ok(mut slot) = MODEL.lock() else {
        return f32::NAN;
    };
    let Some(model) = slot.as_mut() else {
        return f32::NAN;
    };
    let tokens: Vec<u32> = (0..n).map(|i| 32 + (i * 7) % 200).collect();
    model.prefill(&tokens).map_or(f32::NAN, |logits| logits[0])
}

/// A prefill of one token, then `steps` greedy decode steps; returns the last token chosen
/// (or u32::MAX on an error).
#[no_mangle]
pub extern "C" fn decode(steps: u32) -> u32 {
    let Ok(mut slot) = MODEL.lock() else {
        return u32::MAX;
    };
    let Some(model) = slot.as_mut() else {
        return u32::MAX;
    };
    let argmax = |logits: &[f32]| {
        (0..logits.len()).fold(0, |best, i| if logits[i] > logits[best] { i } else { best }) as u32
    };
    let Ok(logits) = model.prefill(&[84]) else {
        return u32::MAX;
    };
    let mut token = argmax(logits);
    for _ in 0..steps {
        match model.decode_step(token) {
            Ok(logits) => token = argmax(logits),
            Err(_) => return u32::MAX,
        }
    }
    token
}
