//! The WebGPU runtime: the tiny model's forward pass and a softmax as WGSL compute shaders,
//! run through `wgpu` natively (Vulkan: a real GPU, or Mesa's lavapipe on a CPU) and in the
//! browser (WebGPU).
//!
//! - [`Gpu`] is an adapter and device, with device loss and validation errors caught and
//!   turned into [`GpuError`]s instead of panics.
//! - [`GpuTransformer`] keeps the weights, the rotary tables and the KV cache resident on
//!   the device and runs prefill and decode as one command buffer each; per call only the
//!   token ids and two numbers are written, and one read-back comes home, counted by
//!   [`GpuTransformer::readbacks`]: the logits, or, when the policy step runs on the device
//!   too ([`GpuTransformer::choose`], `sample.wgsl`), just the chosen token and the numbers
//!   its step record needs (80 bytes).
//! - [`Runtime`] is what the CLI and the lab run: it checks the GPU against the CPU
//!   reference with a fixed canary before the first token, and falls back to the named
//!   baseline `cpu-reference` (f32) when there is no WebGPU, no adapter, no device, a canary
//!   mismatch or a device lost mid-run, continuing from the same step. Filter-only policy
//!   steps (temperature, top-k, top-p, min-p) run on the GPU with the run's own draws, and
//!   every [`CHECK_EVERY`]-th one is re-taken by the CPU policy on the same logits.
//! - [`ops`] runs one kernel at a time on host data: what the kernel tests and the
//!   benchmarks compare with the CPU.
//!
//! The shaders are `.wgsl` files beside this crate's sources, one job each, but for the
//! preludes put before others: `reduce.wgsl`, the workgroup reductions that several
//! kernels share, and `weights_f32.wgsl` / `weights_int8.wgsl`, the weight format, so a
//! kernel that reads a matrix is written once and compiled once per format. A decode step
//! is [`GpuTransformer::dispatches`]-counted: 22 dispatches for this model, 23 with the
//! policy step on the device.

#![forbid(unsafe_code)]

mod device;
mod kernels;
pub mod ops;
mod runtime;
mod transformer;

pub use device::{Faults, Gpu, GpuError, UnknownFault};
pub use runtime::{
    BackendChoice, Promotion, Race, Runtime, SamplingReport, StartPhases, CANARY_PASSED,
    CANARY_RUNNING, CANARY_TOLERANCE, CHECK_EVERY,
};
pub use transformer::{DeviceStep, GpuTransformer, StepTimings};
