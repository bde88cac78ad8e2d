//! The tiny model's forward pass on the GPU: resident weights and KV cache, one command
//! buffer per model call, one read-back per call.
//!
//! Buffers and when they are written:
//! - weights (embedding; per layer q, k, v, o, gate, up, down, f32 or packed int8 with row
//!   scales; the norms) and the rotary tables (`context · head_dim/2` cos and sin): once,
//!   at load;
//! - the KV cache, keys and values each `L · H_kv · context · head_dim` f32 laid out
//!   `[position][head_dim]` within a head (the CPU keeps its keys transposed): per call, by
//!   `kv_store`, at positions `start..start+n` only;
//! - `tokens` and the `Step` uniform (start, n): per call, by the host, the only
//!   host-to-GPU writes (and the sampler's parameters when it runs);
//! - activations, sized for `n = context`: per call, by the kernels;
//! - the logits and the buffer they are copied to for the call's one read-back.
//!
//! Every bind group is made at load, so a call writes `tokens[..n]` and `Step`, then runs
//! one compute pass: `embed`; per layer `rmsnorm, q, k, v, rope q, rope k, kv store,
//! attention, o (+= x), rmsnorm, gate, up, swiglu, down (+= x)`; the final `rmsnorm` of the
//! last position and the `logits` product with the tied embedding
//! ([`GpuTransformer::pass_labels`]). A prefill is that sequence with `n` = the prompt's
//! length from `start` = 0; a decode step has `n` = 1.

use std::cell::RefCell;

use model::{Linear, ModelConfig, ModelError, Weights};
use policy::ArtifactId;

use crate::device::{Faults, Gpu, GpuError};
use crate::kernels::{
    bind, readback, scratch, storage, uniform, DeviceMatrix, Kernels, ACCUMULATE, ELEMENT_WG,
    MATVEC_WG, MAX_CONTEXT, MAX_HEAD_DIM, MAX_SAMPLER_VOCAB, SAMPLE_WORDS, SINGLE_ROW, TILE,
};

/// How many workgroups a pass dispatches, as a function of the block's length `n`.
#[derive(Clone, Copy, Debug)]
enum Grid {
    /// One thread per element of `[n][per_position]`, `ELEMENT_WG` to a workgroup.
    Elements(u32),
    /// One workgroup per position.
    Rows,
    /// A single workgroup.
    One,
    /// Matmul tiles over `rows` output rows and the block's positions.
    Tiles(u32),
    /// One invocation per output row, `MATVEC_WG` to a workgroup.
    RowsOf(u32),
    /// One workgroup per (position, query head).
    Attention(u32),
}

impl Grid {
    fn workgroups(self, n: u32) -> (u32, u32, u32) {
        match self {
            Grid::Elements(per) => ((n * per).div_ceil(ELEMENT_WG), 1, 1),
            Grid::Rows => (n, 1, 1),
            Grid::One => (1, 1, 1),
            Grid::Tiles(rows) => (rows.div_ceil(TILE), n.div_ceil(TILE), 1),
            Grid::RowsOf(rows) => (rows.div_ceil(MATVEC_WG), 1, 1),
            Grid::Attention(heads) => (n, heads, 1),
        }
    }
}

/// One dispatch of the per-call command sequence, bound once at load.
struct Pass {
    label: &'static str,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    grid: Grid,
    /// The variant for a block of one position (a decode step), where there is one.
    one_position: Option<(wgpu::ComputePipeline, wgpu::BindGroup, Grid)>,
}

/// Where the time of the last model call went, in milliseconds of host time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepTimings {
    /// Writing the inputs, encoding the passes and submitting them.
    pub dispatch_ms: f64,
    /// From submission until the logits were mapped: the kernels and the copy.
    pub gpu_ms: f64,
    /// Copying the mapped logits into host memory and unmapping.
    pub readback_ms: f64,
}

/// The model on a GPU, ready to run. Buffers live as long as this value: the weights, the
/// rotary tables and the KV cache are uploaded once; each call writes the token ids and the
/// `Step` uniform (start position, block length) and reads the logits back.
pub struct GpuTransformer {
    gpu: Gpu,
    config: ModelConfig,
    id: ArtifactId,
    step: wgpu::Buffer,
    tokens: wgpu::Buffer,
    logits: wgpu::Buffer,
    readback: wgpu::Buffer,
    passes: Vec<Pass>,
    /// The sampler: its per-call parameters, its output, and the buffer both the output
    /// and (on checked steps) the logits are read back through.
    sampler_params: wgpu::Buffer,
    sample_out: wgpu::Buffer,
    sample_readback: wgpu::Buffer,
    sample_pass: Pass,
    host_logits: Vec<f32>,
    cache_len: usize,
    calls: usize,
    readbacks: u64,
    /// The injected device loss, armed by `restart_call_count` (after the canary).
    lose_device_after: Option<usize>,
    injected_loss: Option<usize>,
    timings: StepTimings,
    resident_bytes: u64,
}

impl GpuTransformer {
    /// Uploads `weights` (f32 or int8) for `config` and binds every pass. `id` names the
    /// weights in run records.
    pub fn new(
        gpu: Gpu,
        config: ModelConfig,
        weights: &Weights,
        id: ArtifactId,
        faults: Faults,
    ) -> Result<GpuTransformer, GpuError> {
        check_shapes(&config)?;
        let device = &gpu.device;
        let kernels = Kernels::new(device);
        let (d, kv, ff, hd) = (
            config.d_model,
            config.kv_dim(),
            config.d_ff,
            config.head_dim(),
        );
        let (ctx, vocab) = (config.context_len, config.vocab_size);
        let mut resident_bytes = 0u64;
        let mut upload = |label: &str, linear: &Linear| {
            resident_bytes += linear_bytes(linear);
            DeviceMatrix::upload(device, label, linear)
        };
        let embed = if faults.canary {
            upload("embed", &perturbed(&weights.embed))
        } else {
            upload("embed", &weights.embed)
        };
        struct DeviceLayer {
            attn_norm: wgpu::Buffer,
            mlp_norm: wgpu::Buffer,
            q: DeviceMatrix,
            k: DeviceMatrix,
            v: DeviceMatrix,
            o: DeviceMatrix,
            gate: DeviceMatrix,
            up: DeviceMatrix,
            down: DeviceMatrix,
        }
        let layers: Vec<DeviceLayer> = weights
            .layers
            .iter()
            .map(|layer| DeviceLayer {
                q: upload("q", &layer.q),
                k: upload("k", &layer.k),
                v: upload("v", &layer.v),
                o: upload("o", &layer.o),
                gate: upload("gate", &layer.gate),
                up: upload("up", &layer.up),
                down: upload("down", &layer.down),
                attn_norm: storage(device, "attn_norm", &layer.attn_norm),
                mlp_norm: storage(device, "mlp_norm", &layer.mlp_norm),
            })
            .collect();
        let final_norm = storage(device, "norm", &weights.norm);
        let (cos, sin) = rope_tables(&config);
        let cos = storage(device, "rope cos", &cos);
        let sin = storage(device, "rope sin", &sin);
        let cache_floats = config.n_layers * config.n_kv_heads * ctx * hd;
        let k_cache = scratch(device, "k cache", cache_floats);
        let v_cache = scratch(device, "v cache", cache_floats);
        resident_bytes += 2 * cache_floats as u64 * 4;

        let step = uniform(device, &[0, 0]);
        let tokens = storage(device, "tokens", &vec![0u32; ctx]);
        let x = scratch(device, "x", ctx * d);
        let normed = scratch(device, "normed", ctx * d);
        let q = scratch(device, "q", ctx * d);
        let k = scratch(device, "k", ctx * kv);
        let v = scratch(device, "v", ctx * kv);
        let attended = scratch(device, "attended", ctx * d);
        let gate = scratch(device, "gate", ctx * ff);
        let up = scratch(device, "up", ctx * ff);
        let logits = scratch(device, "logits", vocab);
        let readback = readback(device, vocab);
        let sampler_params = uniform(device, &[0; 8]);
        let sample_out = scratch(device, "sample", SAMPLE_WORDS);
        let sample_readback = crate::kernels::readback(device, SAMPLE_WORDS + vocab);
        let sample_pass = Pass {
            label: "sample",
            pipeline: kernels.sample.clone(),
            bind_group: bind(
                device,
                &kernels.sample,
                &[(0, &sampler_params), (1, &logits), (2, &sample_out)],
            ),
            grid: Grid::One,
            one_position: None,
        };

        let passes = RefCell::new(Vec::new());
        let pass =
            |label, pipeline: &wgpu::ComputePipeline, buffers: &[(u32, &wgpu::Buffer)], grid| {
                passes.borrow_mut().push(Pass {
                    label,
                    pipeline: pipeline.clone(),
                    bind_group: bind(device, pipeline, buffers),
                    grid,
                    one_position: None,
                });
            };
        // A matrix product: tiled over positions, with a one-row-per-invocation variant for a
        // single position, which the final projection (one row whatever the block) always uses.
        let matmul = |label: &'static str,
                      m: &DeviceMatrix,
                      input: &wgpu::Buffer,
                      output: &wgpu::Buffer,
                      flags: u32| {
            let params = uniform(device, &m.params(flags));
            let rows = m.rows() as u32;
            let (vector, mut vector_buffers) = m.select(&kernels.matvec_f32, &kernels.matvec_int8);
            vector_buffers.extend([(1, &params), (2, input), (3, output)]);
            let one = (
                vector.clone(),
                bind(device, vector, &vector_buffers),
                Grid::RowsOf(rows),
            );
            let pass = if flags & SINGLE_ROW != 0 {
                Pass {
                    label,
                    pipeline: one.0,
                    bind_group: one.1,
                    grid: one.2,
                    one_position: None,
                }
            } else {
                let (tiled, mut buffers) = m.select(&kernels.matmul_f32, &kernels.matmul_int8);
                buffers.extend([(0, &step), (1, &params), (2, input), (3, output)]);
                Pass {
                    label,
                    pipeline: tiled.clone(),
                    bind_group: bind(device, tiled, &buffers),
                    grid: Grid::Tiles(rows),
                    one_position: Some(one),
                }
            };
            passes.borrow_mut().push(pass);
        };
        let norm = |weight: &wgpu::Buffer, last_only: bool| {
            let params = uniform(
                device,
                &[d as u32, u32::from(last_only), config.norm_eps.to_bits(), 0],
            );
            let buffers = [(0, &step), (1, &params), (2, &x), (3, weight), (4, &normed)];
            let grid = if last_only { Grid::One } else { Grid::Rows };
            pass("rmsnorm", &kernels.rmsnorm, &buffers, grid);
        };

        let embed_params = uniform(device, &embed.params(0));
        let (gather, mut buffers) = embed.select(&kernels.gather_f32, &kernels.gather_int8);
        buffers.extend([(0, &step), (1, &embed_params), (2, &tokens), (3, &x)]);
        pass("embed", gather, &buffers, Grid::Elements(d as u32));

        let rope_q = uniform(device, &[config.n_heads as u32, hd as u32]);
        let rope_k = uniform(device, &[config.n_kv_heads as u32, hd as u32]);
        let swiglu = uniform(device, &[ff as u32]);
        for (l, layer) in layers.iter().enumerate() {
            norm(&layer.attn_norm, false);
            matmul("q", &layer.q, &normed, &q, 0);
            matmul("k", &layer.k, &normed, &k, 0);
            matmul("v", &layer.v, &normed, &v, 0);
            let rope_grid = |heads: usize| Grid::Elements((heads * hd / 2) as u32);
            pass(
                "rope q",
                &kernels.rope,
                &[(0, &step), (1, &rope_q), (2, &cos), (3, &sin), (4, &q)],
                rope_grid(config.n_heads),
            );
            pass(
                "rope k",
                &kernels.rope,
                &[(0, &step), (1, &rope_k), (2, &cos), (3, &sin), (4, &k)],
                rope_grid(config.n_kv_heads),
            );
            let store = uniform(
                device,
                &[l as u32, config.n_kv_heads as u32, hd as u32, ctx as u32],
            );
            pass(
                "kv store",
                &kernels.kv_store,
                &[
                    (0, &step),
                    (1, &store),
                    (2, &k),
                    (3, &v),
                    (4, &k_cache),
                    (5, &v_cache),
                ],
                Grid::Elements(kv as u32),
            );
            let scale = 1.0 / (hd as f32).sqrt();
            let attention = uniform(
                device,
                &[
                    l as u32,
                    config.n_heads as u32,
                    config.n_kv_heads as u32,
                    hd as u32,
                    ctx as u32,
                    scale.to_bits(),
                ],
            );
            pass(
                "attention",
                &kernels.attention,
                &[
                    (0, &step),
                    (1, &attention),
                    (2, &q),
                    (3, &k_cache),
                    (4, &v_cache),
                    (5, &attended),
                ],
                Grid::Attention(config.n_heads as u32),
            );
            matmul("o", &layer.o, &attended, &x, ACCUMULATE);
            norm(&layer.mlp_norm, false);
            matmul("gate", &layer.gate, &normed, &gate, 0);
            matmul("up", &layer.up, &normed, &up, 0);
            pass(
                "swiglu",
                &kernels.swiglu,
                &[(0, &step), (1, &swiglu), (2, &gate), (3, &up)],
                Grid::Elements(ff as u32),
            );
            matmul("down", &layer.down, &gate, &x, ACCUMULATE);
        }
        norm(&final_norm, true);
        matmul("logits", &embed, &normed, &logits, SINGLE_ROW);

        let model = GpuTransformer {
            host_logits: vec![0.0; vocab],
            config,
            id,
            step,
            tokens,
            logits,
            readback,
            passes: passes.into_inner(),
            sampler_params,
            sample_out,
            sample_readback,
            sample_pass,
            cache_len: 0,
            calls: 0,
            readbacks: 0,
            lose_device_after: None,
            injected_loss: faults.lose_device_after,
            timings: StepTimings::default(),
            resident_bytes,
            gpu,
        };
        model.gpu.check()?;
        Ok(model)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn id(&self) -> ArtifactId {
        self.id.clone()
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// GPU-to-CPU read-backs since load: one per model call.
    pub fn readbacks(&self) -> u64 {
        self.readbacks
    }

    /// Where the last call's time went.
    pub fn timings(&self) -> StepTimings {
        self.timings
    }

    /// Bytes of weights and KV cache resident on the device.
    pub fn resident_bytes(&self) -> u64 {
        self.resident_bytes
    }

    /// The labels of the per-call command sequence, in order (for the architecture notes
    /// and the tests).
    pub fn pass_labels(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.label).collect()
    }

    /// Counts model calls from zero again: [`Faults::lose_device_after`] counts the run's
    /// calls, not the canary's.
    pub(crate) fn restart_call_count(&mut self) {
        self.calls = 0;
        self.lose_device_after = self.injected_loss;
    }

    /// Positions in the KV cache.
    pub fn cache_len(&self) -> usize {
        self.cache_len
    }

    /// Runs the whole prompt from position 0 and returns the logits at its last position.
    pub async fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], GpuError> {
        if prompt.is_empty() {
            return Err(ModelError::EmptyPrompt.into());
        }
        self.cache_len = 0;
        self.forward(prompt).await
    }

    /// Appends one token at the next position and returns the logits that follow it.
    pub async fn decode_step(&mut self, token: u32) -> Result<&[f32], GpuError> {
        self.forward(&[token]).await
    }

    /// One read-back of the logits with no kernels before it: the floor that a model
    /// call's overhead beyond its kernels is measured against.
    pub async fn read_back_only(&mut self) -> Result<(), GpuError> {
        let bytes = (self.config.vocab_size * 4) as u64;
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.logits, 0, &self.readback, 0, bytes);
        self.gpu.queue.submit([encoder.finish()]);
        self.gpu.read(&self.readback, bytes).await?;
        self.readbacks += 1;
        self.gpu.check()
    }

    /// Whether [`choose`](Self::choose) can run here: the sampler holds the vocabulary in
    /// workgroup memory.
    pub fn can_sample(&self) -> bool {
        self.config.vocab_size <= MAX_SAMPLER_VOCAB
    }

    /// Runs `tokens` (a prompt from position 0 when `prefill`, else one token) and takes a
    /// filter-only policy step on the device with `draw` (the run's next uniform; ignored
    /// when greedy). One read-back brings the chosen token and its account home, with the
    /// logits too when `with_logits` (so the host can check the step).
    pub async fn choose(
        &mut self,
        tokens: &[u32],
        prefill: bool,
        policy: &policy::Policy,
        draw: Option<f64>,
        with_logits: bool,
    ) -> Result<DeviceStep, GpuError> {
        if !self.can_sample() {
            return Err(GpuError::Unsupported(format!(
                "the sampler holds at most {MAX_SAMPLER_VOCAB} tokens, not {}",
                self.config.vocab_size
            )));
        }
        if prefill {
            if tokens.is_empty() {
                return Err(ModelError::EmptyPrompt.into());
            }
            self.cache_len = 0;
        }
        let params = crate::kernels::sampler_params(self.config.vocab_size, policy, draw);
        self.gpu
            .queue
            .write_buffer(&self.sampler_params, 0, bytemuck::cast_slice(&params));
        let began = now_ms();
        let mut encoder = self.encode(tokens)?;
        {
            let mut compute = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("sample"),
                timestamp_writes: None,
            });
            compute.set_pipeline(&self.sample_pass.pipeline);
            compute.set_bind_group(0, &self.sample_pass.bind_group, &[]);
            compute.dispatch_workgroups(1, 1, 1);
        }
        let head = (SAMPLE_WORDS * 4) as u64;
        encoder.copy_buffer_to_buffer(&self.sample_out, 0, &self.sample_readback, 0, head);
        let logit_bytes = (self.config.vocab_size * 4) as u64;
        if with_logits {
            encoder.copy_buffer_to_buffer(
                &self.logits,
                0,
                &self.sample_readback,
                head,
                logit_bytes,
            );
        }
        let values = self
            .submit_and_read(
                encoder,
                began,
                true,
                head + if with_logits { logit_bytes } else { 0 },
            )
            .await?;
        self.cache_len += tokens.len();
        let outcome = crate::kernels::sampled_outcome(&values, policy, draw);
        if outcome.token as usize >= self.config.vocab_size {
            return Err(GpuError::Validation(format!(
                "the sampler chose token {} of {}",
                outcome.token, self.config.vocab_size
            )));
        }
        Ok(DeviceStep {
            outcome,
            logits: with_logits.then(|| values[SAMPLE_WORDS..].to_vec()),
        })
    }

    async fn forward(&mut self, tokens: &[u32]) -> Result<&[f32], GpuError> {
        let began = now_ms();
        let mut encoder = self.encode(tokens)?;
        let bytes = (self.config.vocab_size * 4) as u64;
        encoder.copy_buffer_to_buffer(&self.logits, 0, &self.readback, 0, bytes);
        let logits = self.submit_and_read(encoder, began, false, bytes).await?;
        self.host_logits.copy_from_slice(&logits);
        self.cache_len += tokens.len();
        Ok(&self.host_logits)
    }

    /// Checks `tokens` against the context and vocabulary, writes them and the `Step`
    /// uniform, and encodes the model's passes at positions `cache_len..`.
    fn encode(&mut self, tokens: &[u32]) -> Result<wgpu::CommandEncoder, GpuError> {
        let c = &self.config;
        let (start, n) = (self.cache_len, tokens.len());
        if start + n > c.context_len {
            return Err(ModelError::ContextFull {
                needed: start + n,
                context: c.context_len,
            }
            .into());
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= c.vocab_size) {
            return Err(ModelError::TokenOutOfRange {
                id,
                vocab: c.vocab_size,
            }
            .into());
        }
        if self.lose_device_after == Some(self.calls) {
            self.gpu.lose_device();
        }
        self.calls += 1;
        self.gpu.check()?;

        let queue = &self.gpu.queue;
        queue.write_buffer(&self.tokens, 0, bytemuck::cast_slice(tokens));
        queue.write_buffer(
            &self.step,
            0,
            bytemuck::cast_slice(&[start as u32, n as u32, 0, 0]),
        );
        let mut encoder = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("forward"),
            });
        {
            let mut compute = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("forward"),
                timestamp_writes: None,
            });
            for pass in &self.passes {
                let (pipeline, bind_group, grid) = match &pass.one_position {
                    Some((pipeline, bind_group, grid)) if n == 1 => (pipeline, bind_group, grid),
                    _ => (&pass.pipeline, &pass.bind_group, &pass.grid),
                };
                compute.set_pipeline(pipeline);
                compute.set_bind_group(0, bind_group, &[]);
                let (x, y, z) = grid.workgroups(n as u32);
                compute.dispatch_workgroups(x, y, z);
            }
        }
        Ok(encoder)
    }

    /// Submits `encoder`, whose last commands copy into the read buffer of this call (the
    /// sampler's when `sampled`), and reads `bytes` of it back: the call's one read-back.
    async fn submit_and_read(
        &mut self,
        encoder: wgpu::CommandEncoder,
        began: f64,
        sampled: bool,
        bytes: u64,
    ) -> Result<Vec<f32>, GpuError> {
        self.gpu.queue.submit([encoder.finish()]);
        let submitted = now_ms();
        let buffer = if sampled {
            &self.sample_readback
        } else {
            &self.readback
        };
        let values = self.gpu.read(buffer, bytes).await?;
        self.readbacks += 1;
        let mapped = now_ms();
        self.gpu.check()?;
        self.timings = StepTimings {
            dispatch_ms: submitted - began,
            gpu_ms: mapped - submitted,
            readback_ms: now_ms() - mapped,
        };
        Ok(values)
    }
}

/// A policy step taken on the device: its outcome and, when asked for, the logits it was
/// taken from.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceStep {
    pub outcome: policy::StepOutcome,
    pub logits: Option<Vec<f32>>,
}

/// The model must fit the attention kernel's workgroup arrays.
fn check_shapes(config: &ModelConfig) -> Result<(), GpuError> {
    if config.context_len > MAX_CONTEXT {
        return Err(GpuError::Unsupported(format!(
            "context_len {} is more than the attention kernel's {MAX_CONTEXT}",
            config.context_len
        )));
    }
    if config.head_dim() > MAX_HEAD_DIM || !config.head_dim().is_multiple_of(2) {
        return Err(GpuError::Unsupported(format!(
            "head_dim {} must be even and at most {MAX_HEAD_DIM}",
            config.head_dim()
        )));
    }
    Ok(())
}

fn linear_bytes(linear: &Linear) -> u64 {
    match linear {
        Linear::F32 { data, .. } => data.len() as u64 * 4,
        Linear::Int8 { rows, cols, .. } => (rows * cols.div_ceil(4) * 4 + rows * 4) as u64,
    }
}

/// The embedding with a fault injected: every value moved, so the canary must notice.
fn perturbed(linear: &Linear) -> Linear {
    match linear.clone() {
        Linear::F32 { rows, cols, data } => Linear::F32 {
            rows,
            cols,
            data: data.iter().map(|w| w * 1.5 + 0.01).collect(),
        },
        Linear::Int8 {
            rows,
            cols,
            data,
            scales,
        } => Linear::Int8 {
            rows,
            cols,
            data,
            scales: scales.iter().map(|s| s * 1.5).collect(),
        },
    }
}

/// cos and sin of every position and rotary pair, `[context][head_dim / 2]`: the model
/// crate's tables, so both passes turn by the same f32 angles.
fn rope_tables(config: &ModelConfig) -> (Vec<f32>, Vec<f32>) {
    config.rope_tables()
}

/// Milliseconds from an arbitrary origin.
pub(crate) fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        // performance.now() (microsecond resolution) where the page has it.
        use wasm_bindgen::JsCast;
        let global = js_sys::global();
        js_sys::Reflect::get(&global, &"performance".into())
            .ok()
            .and_then(|performance| {
                let now = js_sys::Reflect::get(&performance, &"now".into()).ok()?;
                now.dyn_into::<js_sys::Function>()
                    .ok()?
                    .call0(&performance)
                    .ok()?
                    .as_f64()
            })
            .unwrap_or_else(js_sys::Date::now)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
            * 1e3
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl policy::LanguageModel for GpuTransformer {
    type Error = GpuError;

    fn id(&self) -> ArtifactId {
        self.id.clone()
    }

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn context_len(&self) -> usize {
        self.config.context_len
    }

    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], GpuError> {
        pollster::block_on(GpuTransformer::prefill(self, prompt))
    }

    fn decode_step(&mut self, token: u32) -> Result<&[f32], GpuError> {
        pollster::block_on(GpuTransformer::decode_step(self, token))
    }

    fn backend(&self) -> policy::Backend {
        policy::Backend {
            name: policy::BackendKind::WebGpu,
            adapter: Some(self.gpu.adapter_name()),
            driver: Some(self.gpu.driver()),
            degraded_reason: None,
            degraded_at_step: None,
        }
    }
}
