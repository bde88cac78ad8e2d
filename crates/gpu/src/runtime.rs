//! What the CLI and the lab run: the GPU when it is there and agrees with the CPU
//! reference, the named baseline `cpu-reference` otherwise, switching mid-run without
//! losing a token.

use model::{ModelError, Transformer};
use policy::{
    ArtifactId, Backend, BackendKind, LanguageModel, Policy, Snapshots, StepContext, StepOutcome,
    Stepper,
};

use crate::device::{Faults, Gpu, GpuError};
use crate::transformer::GpuTransformer;

/// The largest absolute difference between GPU and CPU canary logits that still counts as
/// agreement.
pub const CANARY_TOLERANCE: f32 = 1e-3;

/// The canary: a fixed prompt prefilled, then a few fixed tokens decoded, on both paths.
/// Ids are taken modulo the vocabulary, so any model can run it.
const CANARY_PROMPT: [u32; 12] = [84, 104, 101, 32, 99, 97, 110, 97, 114, 121, 300, 511];
const CANARY_DECODE: [u32; 4] = [32, 115, 105, 110];

/// On the device-sampling path the host re-takes every this-many-th step (the first
/// included) on the GPU's logits with the CPU policy and the same draw.
pub const CHECK_EVERY: usize = 8;

/// How the device-sampling path went in this run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplingReport {
    /// Steps whose policy step ran on the GPU.
    pub device_steps: usize,
    /// Of those, the steps the CPU policy re-took from the same logits and draw.
    pub checked: usize,
    /// Checked steps where the CPU chose another token (the CPU's choice stands, and the
    /// rest of the run steps on the host).
    pub mismatches: usize,
}

pub use policy::BackendChoice;

enum Call {
    Prefill,
    Decode(u32),
}

/// The model behind one backend, with the fallback ready.
pub struct Runtime {
    gpu: Option<GpuTransformer>,
    /// The requested weights on the CPU: the canary's reference, and the CPU backend.
    reference: Transformer,
    /// The f32 `cpu-reference` baseline, when the requested weights are not f32.
    baseline: Option<Transformer>,
    backend: Backend,
    /// The prompt and every token decoded since: what the fallback re-runs.
    history: Vec<u32>,
    /// Model calls so far in this run (0 = the prefill).
    calls: usize,
    /// Whether the active CPU model's cache holds `history` minus the token being decoded.
    cpu_synced: bool,
    logits: Vec<f32>,
    device_sampling: bool,
    sampling: SamplingReport,
    /// This run's decode steps on the GPU, and the compute dispatches they took.
    decode_dispatches: (u64, u64),
    stepper: Stepper,
}

impl Runtime {
    /// Starts the chosen backend. For [`BackendChoice::Gpu`] this requests a device,
    /// uploads the weights and runs the canary; any failure degrades to the baseline
    /// (`baseline`, or `reference` when that is already f32) and says why in
    /// [`backend`](Self::backend). It never fails: the CPU is always there.
    pub async fn start(
        choice: BackendChoice,
        reference: Transformer,
        baseline: Option<Transformer>,
        faults: Faults,
    ) -> Runtime {
        let mut runtime = Runtime {
            gpu: None,
            logits: vec![0.0; reference.config().vocab_size],
            reference,
            baseline,
            backend: Backend::cpu_reference(),
            history: Vec::new(),
            calls: 0,
            cpu_synced: false,
            device_sampling: true,
            sampling: SamplingReport::default(),
            decode_dispatches: (0, 0),
            stepper: Stepper::default(),
        };
        if choice == BackendChoice::Gpu {
            match runtime.start_gpu(faults).await {
                Ok(gpu) => {
                    runtime.backend = Backend {
                        name: BackendKind::WebGpu,
                        adapter: Some(gpu.gpu().adapter_name()),
                        driver: Some(gpu.gpu().driver()),
                        degraded_reason: None,
                        degraded_at_step: None,
                    };
                    runtime.gpu = Some(gpu);
                }
                Err(error) => runtime.degrade(error),
            }
        }
        runtime
    }

    async fn start_gpu(&mut self, faults: Faults) -> Result<GpuTransformer, GpuError> {
        let device = Gpu::request(faults).await?;
        let config = self.reference.config().clone();
        let id = LanguageModel::id(&self.reference);
        let mut gpu = GpuTransformer::new(device, config, self.reference.weights(), id, faults)?;
        canary(&mut gpu, &mut self.reference).await?;
        gpu.restart_call_count();
        Ok(gpu)
    }

    /// What runs the model now, and why it fell back if it did.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The GPU model, while the run is on the GPU.
    pub fn gpu(&self) -> Option<&GpuTransformer> {
        self.gpu.as_ref()
    }

    /// GPU-to-CPU read-backs so far (0 on the CPU).
    pub fn readbacks(&self) -> u64 {
        self.gpu.as_ref().map_or(0, GpuTransformer::readbacks)
    }

    pub fn vocab_size(&self) -> usize {
        self.reference.config().vocab_size
    }

    pub fn context_len(&self) -> usize {
        self.reference.config().context_len
    }

    /// The weights that are running: the requested ones, or the f32 baseline once degraded.
    pub fn id(&self) -> ArtifactId {
        match (&self.backend.degraded_reason, &self.baseline) {
            (Some(_), Some(baseline)) => LanguageModel::id(baseline),
            _ => LanguageModel::id(&self.reference),
        }
    }

    /// Whether filter-only policy steps may run on the GPU (the default). Off, every call
    /// reads the logits back and the host steps.
    pub fn set_device_sampling(&mut self, on: bool) {
        self.device_sampling = on;
    }

    /// How device sampling went since the last prefill.
    pub fn sampling(&self) -> SamplingReport {
        self.sampling
    }

    /// Runs the whole prompt and returns the logits at its last position.
    pub async fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], ModelError> {
        self.start_run(prompt);
        self.call(Call::Prefill).await
    }

    fn start_run(&mut self, prompt: &[u32]) {
        self.history.clear();
        self.history.extend_from_slice(prompt);
        self.calls = 0;
        self.sampling = SamplingReport::default();
        self.decode_dispatches = (0, 0);
    }

    /// The compute dispatches of this run's decode steps on the GPU, on average (the
    /// policy step on the device counts as one); `None` before any.
    pub fn dispatches_per_decode_step(&self) -> Option<f64> {
        let (steps, dispatches) = self.decode_dispatches;
        (steps > 0).then(|| dispatches as f64 / steps as f64)
    }

    fn count_decode(&mut self, call: &Call, before: u64) {
        if let (Call::Decode(_), Some(gpu)) = (call, &self.gpu) {
            self.decode_dispatches.0 += 1;
            self.decode_dispatches.1 += gpu.dispatches() - before;
        }
    }

    /// Runs the model call (`prompt` given: a prefill; else a decode of `token`) and takes
    /// the policy step on the GPU, when the run is on the GPU, device sampling is on and
    /// the policy is filter-only; `None` otherwise, and then nothing has run. Every
    /// [`CHECK_EVERY`]-th step the same read-back also brings the logits, and the CPU
    /// policy re-takes the step with the same draw; a different token is counted, the
    /// CPU's choice stands, and the rest of the run steps on the host. A GPU failure falls
    /// back to the CPU reference as in [`prefill`](Self::prefill), and the step is taken
    /// on the CPU with the same draw. What fails after that is the CPU model's error
    /// ([`GpuError::Model`]) or the CPU policy's ([`GpuError::Policy`]).
    pub async fn choose(
        &mut self,
        prompt: Option<&[u32]>,
        token: u32,
        policy: &Policy,
        draw: Option<f64>,
    ) -> Option<Result<StepOutcome, GpuError>> {
        let eligible = self.device_sampling
            && policy.is_filter_only()
            && self.gpu.as_ref().is_some_and(|g| g.can_sample());
        if !eligible {
            return None;
        }
        let call = match prompt {
            Some(prompt) => {
                self.start_run(prompt);
                Call::Prefill
            }
            None => {
                self.history.push(token);
                Call::Decode(token)
            }
        };
        let step = self.calls;
        let check = step.is_multiple_of(CHECK_EVERY);
        let gpu = self.gpu.as_mut()?;
        let before = gpu.dispatches();
        let result = match call {
            Call::Prefill => gpu.choose(&self.history, true, policy, draw, check).await,
            Call::Decode(token) => gpu.choose(&[token], false, policy, draw, check).await,
        };
        self.calls += 1;
        match result {
            Ok(device) => {
                self.count_decode(&call, before);
                self.sampling.device_steps += 1;
                let Some(logits) = device.logits else {
                    return Some(Ok(device.outcome));
                };
                self.sampling.checked += 1;
                let host = self.host_step(policy, &logits, draw);
                if let Ok(host) = &host {
                    if host.token == device.outcome.token {
                        return Some(Ok(device.outcome));
                    }
                    self.sampling.mismatches += 1;
                    self.device_sampling = false;
                }
                Some(host)
            }
            Err(GpuError::Model(error)) => {
                self.calls -= 1;
                self.history.pop_if_decode(&call);
                Some(Err(GpuError::Model(error)))
            }
            Err(error) => {
                self.degrade(error);
                self.backend.degraded_at_step = Some(step);
                let logits = match self.cpu_call(&call) {
                    Ok(logits) => logits.to_vec(),
                    Err(error) => return Some(Err(error.into())),
                };
                Some(self.host_step(policy, &logits, draw))
            }
        }
    }

    /// The CPU policy's step on `logits` with `draw`.
    fn host_step(
        &mut self,
        policy: &Policy,
        logits: &[f32],
        draw: Option<f64>,
    ) -> Result<StepOutcome, GpuError> {
        Ok(self.stepper.step_with_draw(
            policy,
            logits,
            StepContext::default(),
            draw.unwrap_or(0.0),
            Snapshots::Skip,
        )?)
    }

    /// Appends one token and returns the logits that follow it.
    pub async fn decode_step(&mut self, token: u32) -> Result<&[f32], ModelError> {
        self.history.push(token);
        self.call(Call::Decode(token)).await
    }

    async fn call(&mut self, call: Call) -> Result<&[f32], ModelError> {
        let step = self.calls;
        self.calls += 1;
        if let Some(gpu) = &mut self.gpu {
            let before = gpu.dispatches();
            let result = match call {
                Call::Prefill => gpu.prefill(&self.history).await,
                Call::Decode(token) => gpu.decode_step(token).await,
            };
            let position = self.history.len().saturating_sub(1);
            let result = result.and_then(|logits| {
                model::check_logits(logits, logits.len(), position)
                    .map_err(GpuError::NonFiniteLogits)?;
                Ok(logits)
            });
            match result {
                Ok(logits) => {
                    self.logits.copy_from_slice(logits);
                    self.count_decode(&call, before);
                    return Ok(&self.logits);
                }
                Err(GpuError::Model(error)) => {
                    self.history.pop_if_decode(&call);
                    return Err(error);
                }
                Err(error) => {
                    self.degrade(error);
                    self.backend.degraded_at_step = Some(step);
                }
            }
        }
        match self.cpu_call(&call) {
            Ok(_) => Ok(&self.logits),
            Err(error) => {
                self.history.pop_if_decode(&call);
                Err(error)
            }
        }
    }

    /// Runs `call` on the active CPU model (re-running the whole history when its cache
    /// does not hold the tokens before this one) and keeps the logits.
    fn cpu_call(&mut self, call: &Call) -> Result<&[f32], ModelError> {
        let cpu = match (&self.backend.degraded_reason, &mut self.baseline) {
            (Some(_), Some(baseline)) => baseline,
            _ => &mut self.reference,
        };
        let logits = match *call {
            Call::Decode(token) if self.cpu_synced => cpu.decode_step(token)?,
            _ => cpu.prefill(&self.history)?,
        };
        self.logits.copy_from_slice(logits);
        self.cpu_synced = true;
        Ok(&self.logits)
    }

    /// Leaves the GPU for the baseline, recording why.
    fn degrade(&mut self, error: GpuError) {
        self.gpu = None;
        self.cpu_synced = false;
        self.backend = Backend {
            degraded_reason: Some(error.to_string()),
            ..Backend::cpu_reference()
        };
    }
}

trait PopIfDecode {
    fn pop_if_decode(&mut self, call: &Call);
}

impl PopIfDecode for Vec<u32> {
    /// A failed decode call did not append its token.
    fn pop_if_decode(&mut self, call: &Call) {
        if matches!(call, Call::Decode(_)) {
            self.pop();
        }
    }
}

/// Runs the canary on the GPU and on the CPU reference (same weights) and compares every
/// logit of every call.
async fn canary(gpu: &mut GpuTransformer, cpu: &mut Transformer) -> Result<(), GpuError> {
    let vocab = cpu.config().vocab_size as u32;
    let prompt: Vec<u32> = CANARY_PROMPT.iter().map(|id| id % vocab).collect();
    let mut calls = vec![None];
    calls.extend(CANARY_DECODE.iter().map(|id| Some(id % vocab)));
    // (difference, call, logit)
    let mut worst = (0.0f32, 0usize, 0usize);
    for (i, call) in calls.into_iter().enumerate() {
        let (expected, got) = match call {
            None => (cpu.prefill(&prompt)?.to_vec(), gpu.prefill(&prompt).await?),
            Some(token) => (
                cpu.decode_step(token)?.to_vec(),
                gpu.decode_step(token).await?,
            ),
        };
        for (j, (a, b)) in expected.iter().zip(got).enumerate() {
            let diff = (a - b).abs();
            // A NaN on either side is a mismatch too.
            if diff.is_nan() || diff > worst.0 {
                worst = (if diff.is_nan() { f32::INFINITY } else { diff }, i, j);
            }
        }
    }
    if worst.0 > CANARY_TOLERANCE {
        return Err(GpuError::CanaryMismatch {
            diff: worst.0,
            tolerance: CANARY_TOLERANCE,
            call: worst.1,
            logit: worst.2,
        });
    }
    Ok(())
}

#[cfg(not(target_arch = "wasm32"))]
impl LanguageModel for Runtime {
    type Error = GpuError;

    fn id(&self) -> ArtifactId {
        Runtime::id(self)
    }

    fn vocab_size(&self) -> usize {
        Runtime::vocab_size(self)
    }

    fn context_len(&self) -> usize {
        Runtime::context_len(self)
    }

    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], GpuError> {
        Ok(pollster::block_on(Runtime::prefill(self, prompt))?)
    }

    fn decode_step(&mut self, token: u32) -> Result<&[f32], GpuError> {
        Ok(pollster::block_on(Runtime::decode_step(self, token))?)
    }

    fn backend(&self) -> Backend {
        self.backend.clone()
    }

    fn choose_on_device(
        &mut self,
        call: policy::ModelCall<'_>,
        policy: &Policy,
        draw: Option<f64>,
    ) -> Option<Result<StepOutcome, GpuError>> {
        let (prompt, token) = match call {
            policy::ModelCall::Prefill(prompt) => (Some(prompt), 0),
            policy::ModelCall::Decode(token) => (None, token),
        };
        pollster::block_on(self.choose(prompt, token, policy, draw))
    }
}
