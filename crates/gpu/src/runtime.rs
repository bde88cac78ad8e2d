//! What the CLI and the lab run: the GPU when it is there and agrees with the CPU
//! reference, the named baseline `cpu-reference` otherwise, switching mid-run without
//! losing a token.
//!
//! A GPU start (device, upload, canary) runs beside the run rather than before it
//! ([`Runtime::start_beside`]): on its own thread natively, as a task of the page's event
//! loop in WebAssembly, with its own CPU copy of the weights for the canary. Until it
//! passes, the run decodes on the CPU; at the first step boundary after it passes the run
//! moves to the GPU with one prefill of everything so far, and the record's
//! [`Segment`]s say which steps ran where. A run whose CPU weights are not the GPU's (int8
//! asked for, the f32 baseline on the CPU) moves only at a run's first step, so that no
//! run mixes two sets of weights that way.

use futures_channel::oneshot;
use model::{ModelError, Transformer};
use policy::{
    ArtifactId, Backend, BackendKind, LanguageModel, Policy, Segment, Snapshots, StepContext,
    StepOutcome, Stepper,
};

use crate::device::{Faults, Gpu, GpuError};
use crate::transformer::{now_ms, GpuTransformer};

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

/// When a run that asked for the GPU moves there from `cpu-reference`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Promotion {
    /// At the first step boundary after the canary passed.
    WhenPassed,
    /// At this step of each run and not before, waiting there for the canary if it has
    /// not finished: a replay of a record that moved at that step.
    AtStep(usize),
    /// Never: a replay of a record whose run never reached the GPU.
    Never,
}

impl Promotion {
    /// What reproduces a recorded run's segments: the step of its first GPU segment, or
    /// never when it had none; the first step for a record without segments (made before
    /// they existed, when a GPU run started on the GPU).
    pub fn replaying(recorded: &Backend) -> Promotion {
        if recorded.segments.is_empty() {
            return Promotion::AtStep(0);
        }
        recorded
            .segments
            .iter()
            .find(|s| s.backend == BackendKind::WebGpu)
            .map_or(Promotion::Never, |s| Promotion::AtStep(s.first_step))
    }

    fn due(self, step: usize) -> bool {
        match self {
            Promotion::WhenPassed => true,
            Promotion::AtStep(at) => step >= at,
            Promotion::Never => false,
        }
    }
}

enum Call {
    Prefill,
    Decode(u32),
}

/// Why a run is on the CPU while its GPU start is under way, in a segment of its record.
pub const CANARY_RUNNING: &str = "the GPU's canary was still running";
/// Why a run is on the GPU, in a segment of its record.
pub const CANARY_PASSED: &str = "the GPU passed its canary";

/// How `auto`'s verdict begins when it keeps the CPU.
const AUTO_CPU: &str = "auto chose the CPU reference";

/// A GPU that passed its canary, the canary's race, and how long the start took.
type Started = (GpuTransformer, Race, StartPhases);

/// Where a GPU start's time went, in milliseconds: the adapter and device request, the
/// weights' upload with the pipelines' creation, and the canary (its calls on both paths).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StartPhases {
    pub device_ms: f64,
    pub upload_ms: f64,
    pub canary_ms: f64,
}

/// A GPU start under way beside the run: its device, upload and canary.
type PendingStart = oneshot::Receiver<Result<Started, GpuError>>;

/// The canary's decode steps timed on both paths, the same model and tokens (the median of
/// its decode calls, each with its logits on the host): what `auto` decides by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Race {
    pub cpu_ms: f64,
    pub gpu_ms: f64,
}

impl Race {
    /// Whether the GPU was the faster, and `auto`'s decision in words.
    pub fn verdict(self, adapter: &str) -> (bool, String) {
        let adapter = if adapter.is_empty() {
            "this adapter"
        } else {
            adapter
        };
        let (cpu, gpu) = (self.cpu_ms, self.gpu_ms);
        if gpu < cpu {
            let words = format!(
                "auto chose WebGPU: a decode step took {gpu:.2} ms on {adapter} against {cpu:.2} ms on the CPU reference, {:.1}x faster",
                cpu / gpu
            );
            (true, words)
        } else {
            let words = format!(
                "{AUTO_CPU}: a decode step took {cpu:.2} ms there against {gpu:.2} ms on {adapter}, {:.1}x faster; for a model this small, dispatch and read-back dominate the GPU's step",
                gpu / cpu.max(1e-9)
            );
            (false, words)
        }
    }
}

/// The model behind one backend, with the fallback ready.
pub struct Runtime {
    /// The GPU the run is on.
    gpu: Option<GpuTransformer>,
    /// A GPU start still running beside the run.
    pending: Option<PendingStart>,
    /// A GPU that passed its canary and waits for a step it may take (see the module docs).
    waiting: Option<GpuTransformer>,
    /// When a run takes the GPU.
    promotion: Promotion,
    /// What the run asked for: `gpu` and `auto` start the GPU beside the runs.
    choice: BackendChoice,
    /// `auto`'s decision in words, once the GPU's start has finished.
    verdict: Option<String>,
    /// Where the GPU start's time went, once it passed.
    start_phases: Option<StartPhases>,
    /// Whether the GPU's cache holds `history` minus the token being decoded.
    gpu_synced: bool,
    /// The requested weights on the CPU: the canary's reference, and the CPU backend.
    reference: Transformer,
    /// The f32 `cpu-reference` baseline, when the requested weights are not f32.
    baseline: Option<Transformer>,
    backend: Backend,
    /// The prompt and every token decoded since: what the fallback re-runs, and the
    /// policy's context.
    history: Vec<u32>,
    /// How many of `history` are the prompt.
    prompt_len: usize,
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
    /// Starts the chosen backend and, for [`BackendChoice::Gpu`], waits for the GPU start:
    /// a device, the weights uploaded and the canary; any failure degrades to the baseline
    /// (`baseline`, or `reference` when that is already f32) and says why in
    /// [`backend`](Self::backend). It never fails: the CPU is always there.
    pub async fn start(
        choice: BackendChoice,
        reference: Transformer,
        baseline: Option<Transformer>,
        faults: Faults,
    ) -> Runtime {
        let mut runtime = Runtime::start_beside(choice, reference, baseline, faults);
        runtime.settle().await;
        runtime
    }

    /// Starts the chosen backend without waiting: for [`BackendChoice::Gpu`] and
    /// [`BackendChoice::Auto`] the GPU start runs beside the runs, which decode on the CPU
    /// until it passes (see the module docs); `auto` then keeps the faster of the two.
    pub fn start_beside(
        choice: BackendChoice,
        reference: Transformer,
        baseline: Option<Transformer>,
        faults: Faults,
    ) -> Runtime {
        let pending = choice.tries_gpu().then(|| {
            // The canary's own CPU model: the run may be using `reference` meanwhile.
            let canary_model = Transformer::new(
                reference.config().clone(),
                reference.weights().clone(),
                reference.weights_hash().to_string(),
            );
            spawn_start(faults, canary_model)
        });
        Runtime {
            gpu: None,
            pending,
            waiting: None,
            promotion: Promotion::WhenPassed,
            choice,
            verdict: None,
            start_phases: None,
            gpu_synced: false,
            logits: vec![0.0; reference.config().vocab_size],
            reference,
            baseline,
            backend: Backend::cpu_reference(),
            history: Vec::new(),
            prompt_len: 0,
            calls: 0,
            cpu_synced: false,
            device_sampling: true,
            sampling: SamplingReport::default(),
            decode_dispatches: (0, 0),
            stepper: Stepper::default(),
        }
    }

    /// Waits for the GPU start, if one is under way, and takes the GPU for the next run
    /// when it passed and the [`Promotion`] allows (degrading, and saying why, when it
    /// failed).
    pub async fn settle(&mut self) {
        if let Some(result) = self.awaited_start().await {
            self.finish_start(result, None);
        }
        self.poll_start();
    }

    /// Between runs: takes in a GPU start that has finished, without waiting for one that
    /// has not, and takes the GPU for the next run when the [`Promotion`] allows.
    pub fn poll_start(&mut self) {
        if let Some(result) = self.finished_start() {
            self.finish_start(result, None);
        }
        if self.promotion.due(0) {
            self.promote(0);
        }
    }

    /// The GPU start's result if it has finished, taken; `None` while it runs (or when
    /// there is none).
    fn finished_start(&mut self) -> Option<Result<Started, GpuError>> {
        let result = match self.pending.as_mut()?.try_recv() {
            Ok(Some(result)) => result,
            Ok(None) => return None,
            Err(oneshot::Canceled) => Err(stopped()),
        };
        self.pending = None;
        Some(result)
    }

    /// The GPU start's result, waited for; `None` when there is no start under way.
    async fn awaited_start(&mut self) -> Option<Result<Started, GpuError>> {
        let pending = self.pending.take()?;
        Some(pending.await.unwrap_or_else(|_| Err(stopped())))
    }

    /// Where the GPU start's time went, once it passed its canary.
    pub fn start_phases(&self) -> Option<StartPhases> {
        self.start_phases
    }

    /// Whether a GPU start is still running beside the runs.
    pub fn starting(&self) -> bool {
        self.pending.is_some()
    }

    /// When the runs from now on take the GPU.
    pub fn set_promotion(&mut self, promotion: Promotion) {
        self.promotion = promotion;
    }

    /// At the boundary before `step`: takes in a finished GPU start, and moves the run to
    /// the GPU when it may (see the module docs).
    async fn step_boundary(&mut self, step: usize) {
        let due = self.promotion.due(step);
        let finished = if due && self.promotion != Promotion::WhenPassed {
            self.awaited_start().await
        } else {
            self.finished_start()
        };
        if let Some(result) = finished {
            self.finish_start(result, Some(step));
        }
        if due {
            self.promote(step);
        }
        if let Some(segment) = self.backend.segments.last_mut() {
            segment.last_step = step;
        }
    }

    /// Keeps a GPU that passed for [`promote`](Self::promote) (for `auto`, only when its
    /// decode step was the faster), or degrades (`auto` stays on the CPU instead, and says
    /// why).
    fn finish_start(&mut self, result: Result<Started, GpuError>, step: Option<usize>) {
        if self.choice == BackendChoice::Auto {
            let verdict = match result {
                Ok((gpu, race, phases)) => {
                    self.start_phases = Some(phases);
                    let (faster, verdict) = race.verdict(&gpu.gpu().adapter_name());
                    if faster {
                        self.waiting = Some(gpu);
                    }
                    verdict
                }
                Err(error) => format!("{AUTO_CPU}: the GPU could not be used: {error}"),
            };
            self.verdict = Some(verdict.clone());
            self.backend.auto = Some(verdict.clone());
            if let (Some(step), None) = (step, &self.waiting) {
                self.switch_segment(step, BackendKind::CpuReference, verdict);
            }
            return;
        }
        match result {
            Ok((gpu, _, phases)) => {
                self.start_phases = Some(phases);
                self.waiting = Some(gpu);
            }
            // The run was on the CPU already, and on the baseline's weights when there is
            // one: its model and cache go on as they were.
            Err(error) => self.degrade(error, step),
        }
    }

    /// Moves the run to a waiting GPU at `step`, when the weights allow it there.
    fn promote(&mut self, step: usize) {
        if self.gpu.is_some() || (step > 0 && self.baseline.is_some()) {
            return;
        }
        let Some(gpu) = self.waiting.take() else {
            return;
        };
        self.replace_backend(Backend {
            name: BackendKind::WebGpu,
            adapter: Some(gpu.gpu().adapter_name()),
            driver: Some(gpu.gpu().driver()),
            ..Backend::cpu_reference()
        });
        let reason = self.verdict.clone();
        self.switch_segment(
            step,
            BackendKind::WebGpu,
            reason.unwrap_or_else(|| CANARY_PASSED.to_string()),
        );
        self.gpu = Some(gpu);
        self.gpu_synced = false;
        // The CPU's cache stops following the run here.
        self.cpu_synced = false;
    }

    /// Makes `backend` the one running, keeping this run's segments and `auto`'s verdict.
    fn replace_backend(&mut self, backend: Backend) {
        let segments = std::mem::take(&mut self.backend.segments);
        self.backend = Backend {
            segments,
            auto: self.verdict.clone(),
            ..backend
        };
    }

    /// Starts a segment of `kind` at `step`, closing the one before (or replacing it, when
    /// it had not run a step yet). Runs that did not ask for the GPU keep none.
    fn switch_segment(&mut self, step: usize, backend: BackendKind, reason: String) {
        let segments = &mut self.backend.segments;
        if segments.last().is_some_and(|s| s.first_step == step) {
            segments.pop();
        }
        if let Some(last) = segments.last_mut() {
            last.last_step = step.saturating_sub(1);
        }
        segments.push(Segment {
            backend,
            first_step: step,
            last_step: step,
            reason,
        });
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

    /// The weights that are running: the requested ones on the GPU, else the f32
    /// baseline when there is one.
    pub fn id(&self) -> ArtifactId {
        match (&self.gpu, &self.baseline) {
            (None, Some(baseline)) => LanguageModel::id(baseline),
            _ => LanguageModel::id(&self.reference),
        }
    }

    /// Whether policy steps ([`Policy::is_device_step`]) may run on the GPU (the default).
    /// Off, every call reads the logits back and the host steps.
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
        self.prompt_len = prompt.len();
        self.calls = 0;
        self.sampling = SamplingReport::default();
        self.decode_dispatches = (0, 0);
        self.backend.segments.clear();
        if !self.promotion.due(0) {
            // A replay of a run that began on the CPU begins there too.
            if let Some(gpu) = self.gpu.take() {
                self.waiting = Some(gpu);
                self.replace_backend(Backend::cpu_reference());
            }
        }
        if self.choice.tries_gpu() {
            let reason = match (&self.gpu, &self.backend.degraded_reason, &self.verdict) {
                (_, _, Some(verdict)) => verdict.clone(),
                (Some(_), _, None) => CANARY_PASSED.to_string(),
                (None, Some(reason), None) => reason.clone(),
                (None, None, None) => CANARY_RUNNING.to_string(),
            };
            self.switch_segment(0, self.backend.name, reason);
        }
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
    /// the device can take the policy ([`Policy::is_device_step`]); `None` otherwise, and
    /// then nothing has run. Every
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
        let gpu_possible = self.gpu.is_some() || self.waiting.is_some() || self.pending.is_some();
        if !(self.device_sampling && gpu_possible && policy.is_device_step()) {
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
        self.step_boundary(step).await;
        if !self.gpu.as_ref().is_some_and(|g| g.can_sample()) {
            // The caller makes this call itself through `prefill` or `decode_step`.
            self.history.pop_if_decode(&call);
            return None;
        }
        let check = step.is_multiple_of(CHECK_EVERY);
        let table = (!policy.is_filter_only())
            .then(|| policy.constraint_table(self.context(), self.reference.config().vocab_size));
        let table = table.as_ref();
        let gpu = self.gpu.as_mut()?;
        let before = gpu.dispatches();
        let result = match call {
            Call::Decode(token) if self.gpu_synced => {
                gpu.choose(&[token], false, policy, draw, table, check)
                    .await
            }
            _ => {
                gpu.choose(&self.history, true, policy, draw, table, check)
                    .await
            }
        };
        self.calls += 1;
        match result {
            Ok(device) => {
                self.gpu_synced = true;
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
                self.degrade(error, Some(step));
                let logits = match self.cpu_call(&call) {
                    Ok(logits) => logits.to_vec(),
                    Err(error) => return Some(Err(error.into())),
                };
                Some(self.host_step(policy, &logits, draw))
            }
        }
    }

    /// The CPU policy's step on `logits` with `draw`, in this run's context.
    fn host_step(
        &mut self,
        policy: &Policy,
        logits: &[f32],
        draw: Option<f64>,
    ) -> Result<StepOutcome, GpuError> {
        let context = StepContext::new(&self.history, self.prompt_len);
        Ok(self.stepper.step_with_draw(
            policy,
            logits,
            context,
            draw.unwrap_or(0.0),
            Snapshots::Skip,
        )?)
    }

    /// The context of the step being taken: the prompt and every token chosen since.
    fn context(&self) -> StepContext<'_> {
        StepContext::new(&self.history, self.prompt_len)
    }

    /// Appends one token and returns the logits that follow it.
    pub async fn decode_step(&mut self, token: u32) -> Result<&[f32], ModelError> {
        self.history.push(token);
        self.call(Call::Decode(token)).await
    }

    async fn call(&mut self, call: Call) -> Result<&[f32], ModelError> {
        let step = self.calls;
        self.step_boundary(step).await;
        self.calls += 1;
        if let Some(gpu) = &mut self.gpu {
            let before = gpu.dispatches();
            let result = match call {
                Call::Decode(token) if self.gpu_synced => gpu.decode_step(token).await,
                _ => gpu.prefill(&self.history).await,
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
                    self.gpu_synced = true;
                    self.count_decode(&call, before);
                    return Ok(&self.logits);
                }
                Err(GpuError::Model(error)) => {
                    self.history.pop_if_decode(&call);
                    return Err(error);
                }
                Err(error) => self.degrade(error, Some(step)),
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
        let cpu = self.baseline.as_mut().unwrap_or(&mut self.reference);
        let logits = match *call {
            Call::Decode(token) if self.cpu_synced => cpu.decode_step(token)?,
            _ => cpu.prefill(&self.history)?,
        };
        self.logits.copy_from_slice(logits);
        self.cpu_synced = true;
        Ok(&self.logits)
    }

    /// Leaves the GPU (or its start) for the baseline, recording why and, when a run is
    /// under way, from which step. The CPU model is the one a run on the CPU already
    /// used; its cache is stale only when the run was on the GPU (see
    /// [`promote`](Self::promote)), and only then did the run fall back at `step`.
    fn degrade(&mut self, error: GpuError, step: Option<usize>) {
        let degraded_at_step = step.filter(|_| self.gpu.is_some());
        self.gpu = None;
        self.waiting = None;
        self.pending = None;
        let reason = error.to_string();
        self.replace_backend(Backend {
            degraded_reason: Some(reason.clone()),
            degraded_at_step,
            ..Backend::cpu_reference()
        });
        if let Some(step) = step {
            self.switch_segment(step, BackendKind::CpuReference, reason);
        }
    }
}

/// Starts the GPU beside the run: on a thread of its own natively (where wgpu's waits
/// block), as a task of the event loop in WebAssembly.
fn spawn_start(faults: Faults, canary_model: Transformer) -> PendingStart {
    let (sender, receiver) = oneshot::channel();
    let start = async move {
        let _ = sender.send(start_gpu(faults, canary_model).await);
    };
    #[cfg(not(target_arch = "wasm32"))]
    std::thread::spawn(move || pollster::block_on(start));
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_futures::spawn_local(start);
    receiver
}

/// A device, the weights uploaded, and the canary against `cpu` (the same weights).
async fn start_gpu(faults: Faults, mut cpu: Transformer) -> Result<Started, GpuError> {
    let began = now_ms();
    let device = Gpu::request(faults).await?;
    let requested = now_ms();
    let config = cpu.config().clone();
    let id = LanguageModel::id(&cpu);
    let mut gpu = GpuTransformer::new(device, config, cpu.weights(), id, faults)?;
    let uploaded = now_ms();
    let race = canary(&mut gpu, &mut cpu).await?;
    gpu.restart_call_count();
    let phases = StartPhases {
        device_ms: requested - began,
        upload_ms: uploaded - requested,
        canary_ms: now_ms() - uploaded,
    };
    Ok((gpu, race, phases))
}

/// A GPU start that ended without an answer (its thread or task stopped).
fn stopped() -> GpuError {
    GpuError::DeviceLost("the GPU start stopped without an answer".to_string())
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

/// Runs the canary on the GPU and on the CPU reference (same weights), compares every
/// logit of every call, and times the decode calls on both.
async fn canary(gpu: &mut GpuTransformer, cpu: &mut Transformer) -> Result<Race, GpuError> {
    let vocab = cpu.config().vocab_size as u32;
    let prompt: Vec<u32> = CANARY_PROMPT.iter().map(|id| id % vocab).collect();
    let mut calls = vec![None];
    calls.extend(CANARY_DECODE.iter().map(|id| Some(id % vocab)));
    // (difference, call, logit)
    let mut worst = (0.0f32, 0usize, 0usize);
    let (mut cpu_ms, mut gpu_ms) = (Vec::new(), Vec::new());
    for (i, call) in calls.into_iter().enumerate() {
        let (expected, got) = match call {
            None => (cpu.prefill(&prompt)?.to_vec(), gpu.prefill(&prompt).await?),
            Some(token) => {
                let began = now_ms();
                let expected = cpu.decode_step(token)?.to_vec();
                let between = now_ms();
                let got = gpu.decode_step(token).await?;
                cpu_ms.push(between - began);
                gpu_ms.push(now_ms() - between);
                (expected, got)
            }
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
    Ok(Race {
        cpu_ms: median(&mut cpu_ms),
        gpu_ms: median(&mut gpu_ms),
    })
}

/// The median of a few values. An insertion sort: a `sort_by` instantiation for these four
/// values would cost the model worker kilobytes.
fn median(values: &mut [f64]) -> f64 {
    for i in 1..values.len() {
        let mut j = i;
        while j > 0 && values[j - 1] > values[j] {
            values.swap(j - 1, j);
            j -= 1;
        }
    }
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
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
