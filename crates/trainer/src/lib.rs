//! Trains the lab's tiny transformer (the `model` crate's architecture) with candle on the
//! CPU, and exports what the lab ships: f32 and int8 safetensors, config, tokenizer and a
//! training report.
//!
//! * [`args`]: the `train` command line and the settings it implies.
//! * [`net`]: the model as a differentiable candle graph over a `VarMap` that uses the
//!   model crate's tensor names; [`Net::to_weights`] exports it as `model::Weights`.
//! * [`optim`]: AdamW, warm-up plus cosine schedule, gradient clipping.
//! * [`data`]: corpus pages, token streams, seeded window sampling.
//! * [`training`]: the loop's pieces: a step, the learning rate over a run, held-out points.
//! * [`eval`]: held-out bits per byte with the reference forward pass, and text samples.
//! * [`release`]: the released weights, tokenizer and `config.json` with their hashes.
//! * [`report`]: `report.md` and the loss chart.
//! * [`svg`]: the loss curve as SVG text.
//! * [`rng`]: the seeded generator behind initialisation and sampling.
//!
//! Native only (candle); the workspace keeps it out of the default members, so neither the
//! wasm build nor the default test run compiles it. `tests/parity.rs` checks that the candle
//! graph and `model::Transformer` give the same logits for the same weights.

#![forbid(unsafe_code)]

pub mod args;
pub mod data;
mod error;
pub mod eval;
pub mod net;
pub mod optim;
pub mod release;
pub mod report;
pub mod rng;
pub mod svg;
pub mod training;

pub use error::TrainError;
pub use net::{Init, Net};
pub use optim::{Optim, OptimConfig, Schedule};
pub use rng::Rng;
