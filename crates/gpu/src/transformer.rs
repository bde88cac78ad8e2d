//! The tiny model's forward pass on the GPU: resident weights and KV cache, one command
//! buffer per model call, one read-back per call.
//!
//! Buffers and when they are written:
//! - weights (embedding; per layer q, k, v, o, gate, up, down, f32 or packed int8 with row
//!   scales; the norms) and the rotary tables (`context · head_dim/2` cos and sin): once,
//!   at load;
//! - the KV cache, keys and values each `L · H_kv · context · head_dim` f32, values laid
//!   out `[position][head_dim]` within a head and keys transposed, `[head_dim][position]`,
//!   as the CPU keeps them: per call, by `rope store` or the one-position `qkv`, at
//!   positions `start..start+n` only;
//! - `tokens` and the `Step` uniform (start, n): per call, by the host, the only
//!   host-to-GPU writes (and the sampler's parameters when it runs);
//! - activations, sized for `n = context`: per call, by the kernels;
//! - the logits and the buffer they are copied to for the call's one read-back.
//!
//! Every bind group is made at load, so a call writes `tokens[..n]` and `Step`, then runs
//! one compute pass of one of two sequences ([`GpuTransformer::pass_labels`]):
//! - a block of several positions (a prefill): `embed`; per layer `rmsnorm, qkv, rope
//!   store, attention, o (+= x), rmsnorm, gate up, swiglu, down (+= x)`, the projections
//!   through the register-blocked `matmul.wgsl` with q, k and v (and gate and up) stacked
//!   as one matrix; then `logits` (the final RMSNorm of the last position fused in);
//! - one position (a decode step, or a one-token prompt): `embed`; per layer `qkv` (RMSNorm,
//!   the projections, RoPE and the KV store in one kernel), `attention`, `o (+= x)`, `gate
//!   up` (RMSNorm, both projections and SwiGLU), `down (+= x)`; then `logits`. With the
//!   device's policy step that is 6 per layer minus one, plus 3: 23 dispatches for this
//!   model's 4 layers ([`GpuTransformer::dispatches`] counts them).

use model::{Linear, ModelConfig, ModelError, Weights};
use policy::ArtifactId;

use crate::device::{Faults, Gpu, GpuError};
use crate::kernels::{
    bind, readback, scratch, stack, storage, uniform, DeviceMatrix, Fused, Kernels, Sizes,
    ACCUMULATE, ELEMENT_WG, MATVEC_WG, MAX_COLS, MAX_CONTEXT, MAX_HEAD_DIM, MAX_SAMPLER_VOCAB,
    SAMPLE_WORDS, TILE,
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
    /// Outputs of a one-position kernel (groups of four rows), `MATVEC_WG / slices` to a
    /// workgroup.
    Outputs(u32, u32),
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
            Grid::Outputs(outputs, slices) => (outputs.div_ceil(MATVEC_WG / slices), 1, 1),
            Grid::Attention(heads) => (n, heads, 1),
        }
    }
}

/// One dispatch of a per-call command sequence, bound once at load.
struct Pass {
    label: &'static str,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    grid: Grid,
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
    /// The sequence of a block of several positions, and of one.
    block_passes: Vec<Pass>,
    one_passes: Vec<Pass>,
    /// The sampler: its per-call parameters, its output, and the buffer both the output
    /// and (on checked steps) the logits are read back through.
    sampler_params: wgpu::Buffer,
    sample_out: wgpu::Buffer,
    /// The run's constraint table (`policy::ConstraintTable`, packed), rewritten before
    /// each step of a policy with constraints.
    sample_table: wgpu::Buffer,
    sample_readback: wgpu::Buffer,
    sample_pass: Pass,
    host_logits: Vec<f32>,
    cache_len: usize,
    calls: usize,
    readbacks: u64,
    dispatches: u64,
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
        let precision = weights.precision();
        let mixed = || GpuError::Unsupported("the weights mix f32 and int8 matrices".to_string());
        let matrices = weights.layers.iter().flat_map(|l| l.matrices());
        if matrices
            .into_iter()
            .any(|(_, m)| m.precision() != precision)
        {
            return Err(mixed());
        }
        let kernels = Kernels::new(&gpu, precision, Sizes::of(&config));
        let outputs = |n: usize| Grid::Outputs(n as u32, kernels.slices);
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
            qkv: DeviceMatrix,
            o: DeviceMatrix,
            gate_up: DeviceMatrix,
            down: DeviceMatrix,
        }
        let mut layers = Vec::with_capacity(weights.layers.len());
        for layer in &weights.layers {
            let qkv = stack(&[&layer.q, &layer.k, &layer.v]);
            let gate_up = stack(&[&layer.gate, &layer.up]);
            layers.push(DeviceLayer {
                qkv: upload("qkv", &qkv.ok_or_else(mixed)?),
                o: upload("o", &layer.o),
                gate_up: upload("gate up", &gate_up.ok_or_else(mixed)?),
                down: upload("down", &layer.down),
                attn_norm: storage(device, "attn_norm", &layer.attn_norm),
                mlp_norm: storage(device, "mlp_norm", &layer.mlp_norm),
            });
        }
        let final_norm = storage(device, "norm", &weights.norm);
        let (cos, sin) = rope_tables(&config);
        let rope = storage(device, "rope", &[cos, sin].concat());
        let cache_floats = config.n_layers * config.n_kv_heads * ctx * hd;
        let k_cache = scratch(device, "k cache", cache_floats);
        let v_cache = scratch(device, "v cache", cache_floats);
        resident_bytes += 2 * cache_floats as u64 * 4;

        let step = uniform(device, &[0, 0]);
        let tokens = storage(device, "tokens", &vec![0u32; ctx]);
        let x = scratch(device, "x", ctx * d);
        let normed = scratch(device, "normed", ctx * d);
        let qkv = scratch(device, "qkv", ctx * (d + 2 * kv));
        let q = scratch(device, "q", ctx * d);
        let attended = scratch(device, "attended", ctx * d);
        let gate_up = scratch(device, "gate up", ctx * 2 * ff);
        let act = scratch(device, "act", ctx * ff);
        let logits = scratch(device, "logits", vocab);
        let readback = readback(device, vocab);
        let sampler_params = uniform(device, &[0; 12]);
        let sample_out = scratch(device, "sample", SAMPLE_WORDS);
        let sample_table = scratch(device, "constraint table", 2 * vocab);
        let sample_readback = crate::kernels::readback(device, SAMPLE_WORDS + vocab);
        let sample_pass = Pass {
            label: "sample",
            pipeline: kernels.sample.clone(),
            bind_group: bind(
                device,
                &kernels.sample,
                &[
                    (0, &sampler_params),
                    (1, &logits),
                    (2, &sample_out),
                    (3, &sample_table),
                ],
            ),
            grid: Grid::One,
        };

        let pass = |label,
                    pipeline: &wgpu::ComputePipeline,
                    buffers: &[(u32, &wgpu::Buffer)],
                    grid| Pass {
            label,
            pipeline: pipeline.clone(),
            bind_group: bind(device, pipeline, buffers),
            grid,
        };
        // A pass of a kernel that reads the weights `m`, with the other bindings `buffers`.
        let weighted = |label,
                        pipeline: &wgpu::ComputePipeline,
                        m: &DeviceMatrix,
                        params: &[u32],
                        buffers: &[(u32, &wgpu::Buffer)],
                        grid| {
            let params = uniform(device, params);
            let mut all = m.bindings();
            all.push((1, &params));
            all.extend_from_slice(buffers);
            pass(label, pipeline, &all, grid)
        };
        let fused = Fused {
            eps: config.norm_eps,
            layer: 0,
            heads: config.n_heads as u32,
            kv_heads: config.n_kv_heads as u32,
            head_dim: hd as u32,
            context: ctx as u32,
        };
        let attention = |l: usize| {
            let scale = 1.0 / (hd as f32).sqrt();
            let (heads, kv_heads) = (config.n_heads as u32, config.n_kv_heads as u32);
            let params = uniform(
                device,
                &[
                    l as u32,
                    heads,
                    kv_heads,
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
                    (1, &params),
                    (2, &q),
                    (3, &k_cache),
                    (4, &v_cache),
                    (5, &attended),
                ],
                Grid::Attention(config.n_heads as u32),
            )
        };
        let embed_pass = || {
            weighted(
                "embed",
                &kernels.gather,
                &embed,
                &embed.params(0),
                &[(0, &step), (2, &tokens), (3, &x)],
                Grid::Elements(d as u32),
            )
        };
        let logits_pass = || {
            weighted(
                "logits",
                &kernels.logits,
                &embed,
                &embed.fused_params(0, &fused),
                &[(0, &step), (2, &x), (3, &logits), (7, &final_norm)],
                outputs(embed.groups()),
            )
        };

        // Several positions: a prefill.
        let mut block_passes = vec![embed_pass()];
        let norm = |weight: &wgpu::Buffer| {
            let params = uniform(device, &[d as u32, 0, config.norm_eps.to_bits(), 0]);
            let buffers = [(1, &params), (2, &x), (3, weight), (4, &normed)];
            pass("rmsnorm", &kernels.rmsnorm, &buffers, Grid::Rows)
        };
        let matmul = |label, m: &DeviceMatrix, input, output, flags| {
            let buffers = [(0, &step), (2, input), (3, output)];
            let grid = Grid::Tiles(m.rows() as u32);
            weighted(label, &kernels.matmul, m, &m.params(flags), &buffers, grid)
        };
        let rope_units = (config.n_heads * hd / 2 + kv / 2 + kv) as u32;
        // The one-position `qkv` takes four rotary pairs or four values an invocation.
        let qkv_units = config.n_heads * hd / 8 + kv / 8 + kv / 4;
        for (l, layer) in layers.iter().enumerate() {
            let store = uniform(
                device,
                &[
                    l as u32,
                    config.n_heads as u32,
                    config.n_kv_heads as u32,
                    hd as u32,
                    ctx as u32,
                ],
            );
            let swiglu = uniform(device, &[ff as u32]);
            block_passes.extend([
                norm(&layer.attn_norm),
                matmul("qkv", &layer.qkv, &normed, &qkv, 0),
                pass(
                    "rope store",
                    &kernels.rope_store,
                    &[
                        (0, &step),
                        (1, &store),
                        (2, &qkv),
                        (3, &q),
                        (4, &rope),
                        (5, &k_cache),
                        (6, &v_cache),
                    ],
                    Grid::Elements(rope_units),
                ),
                attention(l),
                matmul("o", &layer.o, &attended, &x, ACCUMULATE),
                norm(&layer.mlp_norm),
                matmul("gate up", &layer.gate_up, &normed, &gate_up, 0),
                pass(
                    "swiglu",
                    &kernels.swiglu,
                    &[(0, &step), (1, &swiglu), (2, &gate_up), (3, &act)],
                    Grid::Elements(ff as u32),
                ),
                matmul("down", &layer.down, &act, &x, ACCUMULATE),
            ]);
        }
        block_passes.push(logits_pass());

        // One position: a decode step.
        let mut one_passes = vec![embed_pass()];
        for (l, layer) in layers.iter().enumerate() {
            let fused = Fused {
                layer: l as u32,
                ..fused
            };
            let matvec = |label, m: &DeviceMatrix, input, flags| {
                let params = m.fused_params(flags, &fused);
                let buffers = [(2, input), (3, &x)];
                let grid = outputs(m.groups());
                weighted(label, &kernels.matvec, m, &params, &buffers, grid)
            };
            one_passes.extend([
                weighted(
                    "qkv",
                    &kernels.qkv,
                    &layer.qkv,
                    &layer.qkv.fused_params(0, &fused),
                    &[
                        (0, &step),
                        (2, &x),
                        (3, &q),
                        (7, &layer.attn_norm),
                        (8, &rope),
                        (9, &k_cache),
                        (10, &v_cache),
                    ],
                    outputs(qkv_units),
                ),
                attention(l),
                matvec("o", &layer.o, &attended, ACCUMULATE),
                weighted(
                    "gate up",
                    &kernels.gate_up,
                    &layer.gate_up,
                    &layer.gate_up.fused_params(0, &fused),
                    &[(2, &x), (3, &act), (7, &layer.mlp_norm)],
                    outputs(ff.div_ceil(4)),
                ),
                matvec("down", &layer.down, &act, ACCUMULATE),
            ]);
        }
        one_passes.push(logits_pass());

        let model = GpuTransformer {
            host_logits: vec![0.0; vocab],
            config,
            id,
            step,
            tokens,
            logits,
            readback,
            block_passes,
            one_passes,
            sampler_params,
            sample_out,
            sample_table,
            sample_readback,
            sample_pass,
            cache_len: 0,
            calls: 0,
            readbacks: 0,
            dispatches: 0,
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

    /// The labels of the command sequence of a block of one position (a decode step) or
    /// of several (a prefill), in order (for the architecture notes and the tests).
    pub fn pass_labels(&self, one_position: bool) -> Vec<&'static str> {
        self.passes(one_position).iter().map(|p| p.label).collect()
    }

    fn passes(&self, one_position: bool) -> &[Pass] {
        if one_position {
            &self.one_passes
        } else {
            &self.block_passes
        }
    }

    /// Compute dispatches since load (the device's policy step counts as one).
    pub fn dispatches(&self) -> u64 {
        self.dispatches
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
    /// policy step on the device ([`policy::Policy::is_device_step`]) with `draw` (the
    /// run's next uniform; ignored when greedy) and, for a policy with constraints, their
    /// `table` for this step. One read-back brings the chosen token and its account home,
    /// with the logits too when `with_logits` (so the host can check the step).
    pub async fn choose(
        &mut self,
        tokens: &[u32],
        prefill: bool,
        policy: &policy::Policy,
        draw: Option<f64>,
        table: Option<&policy::ConstraintTable>,
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
        let params =
            crate::kernels::sampler_params(self.config.vocab_size, policy, draw, table.is_some());
        self.gpu
            .queue
            .write_buffer(&self.sampler_params, 0, bytemuck::cast_slice(&params));
        if let Some(table) = table {
            let words = crate::kernels::constraint_words(table);
            if words.len() != 2 * self.config.vocab_size {
                return Err(GpuError::Unsupported(format!(
                    "a constraint table of {} words for a vocabulary of {}",
                    words.len(),
                    self.config.vocab_size
                )));
            }
            self.gpu
                .queue
                .write_buffer(&self.sample_table, 0, bytemuck::cast_slice(&words));
        }
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
        self.dispatches += 1;
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
            let passes = if n == 1 {
                &self.one_passes
            } else {
                &self.block_passes
            };
            for pass in passes {
                compute.set_pipeline(&pass.pipeline);
                compute.set_bind_group(0, &pass.bind_group, &[]);
                let (x, y, z) = pass.grid.workgroups(n as u32);
                compute.dispatch_workgroups(x, y, z);
            }
            self.dispatches += passes.len() as u64;
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

/// The model must fit the kernels' workgroup arrays.
fn check_shapes(config: &ModelConfig) -> Result<(), GpuError> {
    let widest = config.d_model.max(config.d_ff);
    if widest > MAX_COLS {
        return Err(GpuError::Unsupported(format!(
            "a row of {widest} values is more than the one-position kernels' {MAX_COLS}"
        )));
    }
    if config.context_len > MAX_CONTEXT {
        return Err(GpuError::Unsupported(format!(
            "context_len {} is more than the attention kernel's {MAX_CONTEXT}",
            config.context_len
        )));
    }
    if config.head_dim() > MAX_HEAD_DIM || !config.head_dim().is_multiple_of(8) {
        return Err(GpuError::Unsupported(format!(
            "head_dim {} must be a multiple of 8 and at most {MAX_HEAD_DIM}",
            config.head_dim()
        )));
    }
    if !config.d_ff.is_multiple_of(4) {
        return Err(GpuError::Unsupported(format!(
            "d_ff {} must be a multiple of 4 (the MLP kernel takes rows four at a time)",
            config.d_ff
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
            ..policy::Backend::cpu_reference()
        }
    }
}
