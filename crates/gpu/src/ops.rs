//! One kernel at a time on host data: upload the inputs, dispatch the same pipeline the
//! model uses, read the output back. The kernel tests compare these with CPU formulas on
//! the model's shapes and on awkward ones; the benchmarks time them.

use model::Linear;

use crate::device::{Gpu, GpuError};
use crate::kernels::{
    bind, readback, sampled_outcome, sampler_params, scratch, storage, uniform, DeviceMatrix,
    Kernels, ELEMENT_WG, MATVEC_WG, MAX_CONTEXT, MAX_HEAD_DIM, MAX_SAMPLER_VOCAB, SAMPLE_WORDS,
    TILE,
};

/// The compiled kernels of one device.
pub struct Ops<'g> {
    gpu: &'g Gpu,
    kernels: Kernels,
}

impl<'g> Ops<'g> {
    pub fn new(gpu: &'g Gpu) -> Ops<'g> {
        Ops {
            kernels: Kernels::new(&gpu.device),
            gpu,
        }
    }

    /// Dispatches `pipeline` once over `grid` workgroups and reads `out` back.
    async fn run(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[(u32, &wgpu::Buffer)],
        grid: (u32, u32, u32),
        out: &wgpu::Buffer,
        out_len: usize,
    ) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let bind_group = bind(device, pipeline, buffers);
        let staging = readback(device, out_len);
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(grid.0, grid.1, grid.2);
        }
        let bytes = (out_len.max(1) * 4) as u64;
        encoder.copy_buffer_to_buffer(out, 0, &staging, 0, bytes);
        self.gpu.queue.submit([encoder.finish()]);
        let mut values = self.gpu.read(&staging, bytes).await?;
        self.gpu.check()?;
        values.truncate(out_len);
        Ok(values)
    }

    fn step(&self, start: usize, n: usize) -> wgpu::Buffer {
        uniform(&self.gpu.device, &[start as u32, n as u32])
    }

    /// `out[t][r] = W[r] · xs[t]` (plus `out` when `accumulate`), `xs` `[n][cols]`: the
    /// tiled kernel, or for one position the decode kernel.
    pub async fn matmul(
        &self,
        w: &Linear,
        xs: &[f32],
        accumulate_onto: Option<&[f32]>,
    ) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let n = xs.len() / w.cols();
        let m = DeviceMatrix::upload(device, "w", w);
        let flags = u32::from(accumulate_onto.is_some());
        let params = uniform(device, &m.params(flags));
        let step = self.step(0, n);
        let input = storage(device, "xs", xs);
        let out = match accumulate_onto {
            Some(base) => storage(device, "out", base),
            None => scratch(device, "out", n * w.rows()),
        };
        // One position goes through the decode kernel, as in the model.
        let (pipeline, mut buffers, grid) = if n == 1 {
            let (pipeline, buffers) = m.select(&self.kernels.matvec_f32, &self.kernels.matvec_int8);
            (
                pipeline,
                buffers,
                ((w.rows() as u32).div_ceil(MATVEC_WG), 1, 1),
            )
        } else {
            let (pipeline, mut buffers) =
                m.select(&self.kernels.matmul_f32, &self.kernels.matmul_int8);
            buffers.push((0, &step));
            let grid = (
                (w.rows() as u32).div_ceil(TILE),
                (n as u32).div_ceil(TILE),
                1,
            );
            (pipeline, buffers, grid)
        };
        buffers.extend([(1, &params), (2, &input), (3, &out)]);
        self.run(pipeline, &buffers, grid, &out, n * w.rows()).await
    }

    /// Rows of the embedding for `tokens`.
    pub async fn embed(&self, embedding: &Linear, tokens: &[u32]) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let cols = embedding.cols();
        let m = DeviceMatrix::upload(device, "embed", embedding);
        let params = uniform(device, &m.params(0));
        let step = self.step(0, tokens.len());
        let ids = storage(device, "tokens", tokens);
        let out = scratch(device, "x", tokens.len() * cols);
        let (pipeline, mut buffers) = m.select(&self.kernels.gather_f32, &self.kernels.gather_int8);
        buffers.extend([(0, &step), (1, &params), (2, &ids), (3, &out)]);
        let grid = ((tokens.len() * cols) as u32).div_ceil(ELEMENT_WG);
        self.run(pipeline, &buffers, (grid, 1, 1), &out, tokens.len() * cols)
            .await
    }

    /// RMSNorm of each row of `x` (`[n][weight.len()]`).
    pub async fn rmsnorm(&self, x: &[f32], weight: &[f32], eps: f32) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let (cols, n) = (weight.len(), x.len() / weight.len());
        let params = uniform(device, &[cols as u32, 0, eps.to_bits(), 0]);
        let step = self.step(0, n);
        let (input, w, out) = (
            storage(device, "x", x),
            storage(device, "weight", weight),
            scratch(device, "out", x.len()),
        );
        let buffers = [(0, &step), (1, &params), (2, &input), (3, &w), (4, &out)];
        self.run(
            &self.kernels.rmsnorm,
            &buffers,
            (n as u32, 1, 1),
            &out,
            x.len(),
        )
        .await
    }

    /// Rotary embedding of `v` (`[n][heads][head_dim]`) at positions `start..start + n`,
    /// with tables `[positions][head_dim / 2]`.
    pub async fn rope(
        &self,
        v: &[f32],
        heads: usize,
        head_dim: usize,
        start: usize,
        (cos, sin): (&[f32], &[f32]),
    ) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let n = v.len() / (heads * head_dim);
        let params = uniform(device, &[heads as u32, head_dim as u32]);
        let step = self.step(start, n);
        let (c, s, buf) = (
            storage(device, "cos", cos),
            storage(device, "sin", sin),
            storage(device, "v", v),
        );
        let buffers = [(0, &step), (1, &params), (2, &c), (3, &s), (4, &buf)];
        let grid = ((n * heads * head_dim / 2) as u32).div_ceil(ELEMENT_WG);
        self.run(&self.kernels.rope, &buffers, (grid, 1, 1), &buf, v.len())
            .await
    }

    /// Writes a block's keys and values into caches `[layers][kv_heads][context][head_dim]`
    /// at layer `layer`, positions `start..`; returns the key cache then the value cache.
    #[allow(clippy::too_many_arguments)]
    pub async fn kv_store(
        &self,
        k: &[f32],
        v: &[f32],
        (k_cache, v_cache): (&[f32], &[f32]),
        layer: usize,
        kv_heads: usize,
        head_dim: usize,
        context: usize,
        start: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        let device = &self.gpu.device;
        let n = k.len() / (kv_heads * head_dim);
        let params = uniform(
            device,
            &[
                layer as u32,
                kv_heads as u32,
                head_dim as u32,
                context as u32,
            ],
        );
        let step = self.step(start, n);
        let (kb, vb, kc, vc) = (
            storage(device, "k", k),
            storage(device, "v", v),
            storage(device, "k cache", k_cache),
            storage(device, "v cache", v_cache),
        );
        let buffers = [
            (0, &step),
            (1, &params),
            (2, &kb),
            (3, &vb),
            (4, &kc),
            (5, &vc),
        ];
        let grid = (k.len() as u32).div_ceil(ELEMENT_WG);
        let keys = self
            .run(
                &self.kernels.kv_store,
                &buffers,
                (grid, 1, 1),
                &kc,
                k_cache.len(),
            )
            .await?;
        let values = self.read(&vc, v_cache.len()).await?;
        Ok((keys, values))
    }

    async fn read(&self, buffer: &wgpu::Buffer, len: usize) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let staging = readback(device, len);
        let mut encoder = device.create_command_encoder(&Default::default());
        let bytes = (len.max(1) * 4) as u64;
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
        self.gpu.queue.submit([encoder.finish()]);
        let mut values = self.gpu.read(&staging, bytes).await?;
        values.truncate(len);
        Ok(values)
    }

    /// Causal grouped-query attention of the block's queries (`[n][heads][head_dim]`, at
    /// positions `start..start + n`) over caches `[layers][kv_heads][context][head_dim]`.
    #[allow(clippy::too_many_arguments)]
    pub async fn attention(
        &self,
        q: &[f32],
        (k_cache, v_cache): (&[f32], &[f32]),
        layer: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        context: usize,
        start: usize,
    ) -> Result<Vec<f32>, GpuError> {
        if context > MAX_CONTEXT || head_dim > MAX_HEAD_DIM {
            return Err(GpuError::Unsupported(format!(
                "context {context} or head_dim {head_dim} beyond the kernel's limits"
            )));
        }
        let device = &self.gpu.device;
        let n = q.len() / (heads * head_dim);
        let scale = 1.0 / (head_dim as f32).sqrt();
        let params = uniform(
            device,
            &[
                layer as u32,
                heads as u32,
                kv_heads as u32,
                head_dim as u32,
                context as u32,
                scale.to_bits(),
            ],
        );
        let step = self.step(start, n);
        let (qb, kc, vc, out) = (
            storage(device, "q", q),
            storage(device, "k cache", k_cache),
            storage(device, "v cache", v_cache),
            scratch(device, "out", q.len()),
        );
        let buffers = [
            (0, &step),
            (1, &params),
            (2, &qb),
            (3, &kc),
            (4, &vc),
            (5, &out),
        ];
        self.run(
            &self.kernels.attention,
            &buffers,
            (n as u32, heads as u32, 1),
            &out,
            q.len(),
        )
        .await
    }

    /// SwiGLU: `silu(gate) * up`, element-wise.
    pub async fn swiglu(&self, gate: &[f32], up: &[f32]) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let params = uniform(device, &[gate.len() as u32]);
        let step = self.step(0, 1);
        let (g, u) = (storage(device, "gate", gate), storage(device, "up", up));
        let buffers = [(0, &step), (1, &params), (2, &g), (3, &u)];
        let grid = (gate.len() as u32).div_ceil(ELEMENT_WG);
        self.run(&self.kernels.swiglu, &buffers, (grid, 1, 1), &g, gate.len())
            .await
    }

    /// Softmax of each row of `logits` (`[rows][cols]`) at `temperature`.
    pub async fn softmax(
        &self,
        logits: &[f32],
        cols: usize,
        temperature: f32,
    ) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let rows = logits.len() / cols;
        let params = uniform(
            device,
            &[cols as u32, rows as u32, (1.0 / temperature).to_bits(), 0],
        );
        let (input, out) = (
            storage(device, "logits", logits),
            scratch(device, "probs", logits.len()),
        );
        let buffers = [(0, &params), (1, &input), (2, &out)];
        self.run(
            &self.kernels.softmax,
            &buffers,
            (rows as u32, 1, 1),
            &out,
            logits.len(),
        )
        .await
    }

    /// The device's policy step (`sample.wgsl`) on `logits` with `draw`.
    pub async fn sample(
        &self,
        logits: &[f32],
        policy: &policy::Policy,
        draw: Option<f64>,
    ) -> Result<policy::StepOutcome, GpuError> {
        if logits.len() > MAX_SAMPLER_VOCAB {
            return Err(GpuError::Unsupported(format!(
                "the sampler holds at most {MAX_SAMPLER_VOCAB} tokens, not {}",
                logits.len()
            )));
        }
        let device = &self.gpu.device;
        let params = uniform(device, &sampler_params(logits.len(), policy, draw));
        let (input, out) = (
            storage(device, "logits", logits),
            scratch(device, "sample", SAMPLE_WORDS),
        );
        let buffers = [(0, &params), (1, &input), (2, &out)];
        let values = self
            .run(
                &self.kernels.sample,
                &buffers,
                (1, 1, 1),
                &out,
                SAMPLE_WORDS,
            )
            .await?;
        Ok(sampled_outcome(&values, policy, draw))
    }
}
