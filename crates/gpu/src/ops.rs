//! One kernel at a time on host data: upload the inputs, dispatch the same pipeline the
//! model uses, read the output back. The kernel tests compare these with CPU formulas on
//! the model's shapes and on awkward ones; the benchmarks time them.

use model::Linear;

use crate::device::{Gpu, GpuError};
use crate::kernels::{
    bind, constraint_words, readback, sampled_outcome, sampler_params, scratch, storage, uniform,
    DeviceMatrix, Fused, Kernels, Sizes, ELEMENT_WG, MATVEC_WG, MAX_COLS, MAX_CONTEXT,
    MAX_HEAD_DIM, MAX_SAMPLER_VOCAB, SAMPLE_WORDS, TILE,
};
use policy::Precision;

/// The attention's shape and where in the KV cache a kernel works: layer `layer` of
/// caches `[layers][kv_heads][context][head_dim]`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub layer: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub context: usize,
}

impl Shape {
    fn fused(&self, eps: f32) -> Fused {
        Fused {
            eps,
            layer: self.layer as u32,
            heads: self.heads as u32,
            kv_heads: self.kv_heads as u32,
            head_dim: self.head_dim as u32,
            context: self.context as u32,
        }
    }

    fn words(&self) -> [u32; 5] {
        [
            self.layer as u32,
            self.heads as u32,
            self.kv_heads as u32,
            self.head_dim as u32,
            self.context as u32,
        ]
    }
}

/// The compiled kernels of one device.
pub struct Ops<'g> {
    gpu: &'g Gpu,
    /// The kernels for f32 weights (and every kernel that reads none), and for int8.
    kernels: Kernels,
    int8: Kernels,
}

/// Which pipeline of a [`Kernels`] a one-position operation runs.
type Pick = fn(&Kernels) -> &wgpu::ComputePipeline;

impl<'g> Ops<'g> {
    pub fn new(gpu: &'g Gpu) -> Ops<'g> {
        Ops {
            kernels: Kernels::new(gpu, Precision::F32, Sizes::LIMITS),
            int8: Kernels::new(gpu, Precision::Int8, Sizes::LIMITS),
            gpu,
        }
    }

    /// The kernels with the one-position kernels split over `slices` invocations per
    /// output (1, 2, 4, 8, ... 64), whatever the adapter: so both variants are tested on any.
    pub fn with_slices(gpu: &'g Gpu, slices: u32) -> Ops<'g> {
        Ops {
            kernels: Kernels::with_slices(&gpu.device, Precision::F32, slices, Sizes::LIMITS),
            int8: Kernels::with_slices(&gpu.device, Precision::Int8, slices, Sizes::LIMITS),
            gpu,
        }
    }

    /// The kernels that read `w`'s format.
    fn reading(&self, w: &Linear) -> &Kernels {
        match w.precision() {
            Precision::F32 => &self.kernels,
            Precision::Int8 => &self.int8,
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
    /// prefill's register-blocked kernel, or for one position the decode kernel.
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
        let step = self.step(0, n);
        let input = storage(device, "xs", xs);
        let out = match accumulate_onto {
            Some(base) => storage(device, "out", base),
            None => scratch(device, "out", n * w.rows()),
        };
        // One position goes through the decode kernel, as in the model.
        let rows = w.rows() as u32;
        let kernels = self.reading(w);
        let (params, pipeline, grid) = if n == 1 {
            self.fits(w.cols())?;
            let params = uniform(device, &m.fused_params(flags, &Fused::default()));
            let groups = m.groups() as u32;
            let per_workgroup = MATVEC_WG / self.kernels.slices;
            (
                params,
                &kernels.matvec,
                (groups.div_ceil(per_workgroup), 1, 1),
            )
        } else {
            let params = uniform(device, &m.params(flags));
            let grid = (rows.div_ceil(TILE), (n as u32).div_ceil(TILE), 1);
            (params, &kernels.matmul, grid)
        };
        let mut buffers = m.bindings();
        if n != 1 {
            buffers.push((0, &step));
        }
        buffers.extend([(1, &params), (2, &input), (3, &out)]);
        self.run(pipeline, &buffers, grid, &out, n * w.rows()).await
    }

    fn fits(&self, cols: usize) -> Result<(), GpuError> {
        if cols > MAX_COLS {
            return Err(GpuError::Unsupported(format!(
                "rows of {cols} values are longer than the one-position kernels' {MAX_COLS}"
            )));
        }
        Ok(())
    }

    /// One of `matvec.wgsl`'s normed kernels: `x` (its last row) RMSNorm-ed by `norm`,
    /// then `kernel` with `w`, over `units` invocations, into `out_len` values (and the
    /// `extra` bindings, the `Step` among them where the kernel reads it).
    #[allow(clippy::too_many_arguments)]
    async fn normed(
        &self,
        pick: Pick,
        (x, norm, eps): (&[f32], &[f32], f32),
        w: &Linear,
        shape: Option<&Shape>,
        units: usize,
        out_len: usize,
        extra: &[(u32, &wgpu::Buffer)],
    ) -> Result<Vec<f32>, GpuError> {
        self.fits(w.cols())?;
        let device = &self.gpu.device;
        let m = DeviceMatrix::upload(device, "w", w);
        let fused = match shape {
            Some(shape) => shape.fused(eps),
            None => Fused {
                eps,
                ..Fused::default()
            },
        };
        let params = uniform(device, &m.fused_params(0, &fused));
        let (input, weight, out) = (
            storage(device, "x", x),
            storage(device, "norm", norm),
            scratch(device, "out", out_len),
        );
        let pipeline = pick(self.reading(w));
        let mut buffers = m.bindings();
        buffers.extend([(1, &params), (2, &input), (3, &out), (7, &weight)]);
        buffers.extend_from_slice(extra);
        let grid = (
            (units as u32).div_ceil(MATVEC_WG / self.kernels.slices),
            1,
            1,
        );
        self.run(pipeline, &buffers, grid, &out, out_len).await
    }

    /// The logits of the last row of `xs` (`[n][cols]`): RMSNorm by `norm`, then `w`.
    pub async fn logits(
        &self,
        xs: &[f32],
        norm: &[f32],
        eps: f32,
        w: &Linear,
    ) -> Result<Vec<f32>, GpuError> {
        let kernel: Pick = |k| &k.logits;
        let (rows, step) = (w.rows(), self.step(0, xs.len() / w.cols()));
        let groups = rows.div_ceil(4);
        self.normed(
            kernel,
            (xs, norm, eps),
            w,
            None,
            groups,
            rows,
            &[(0, &step)],
        )
        .await
    }

    /// One position's MLP input: RMSNorm of `x` by `norm`, then the stacked `[gate; up]`
    /// (rows `2 d_ff`, `d_ff` a multiple of 4) and SwiGLU; `d_ff` values.
    pub async fn gate_up(
        &self,
        x: &[f32],
        norm: &[f32],
        eps: f32,
        w: &Linear,
    ) -> Result<Vec<f32>, GpuError> {
        let ff = w.rows() / 2;
        if !ff.is_multiple_of(4) {
            return Err(GpuError::Unsupported(format!(
                "d_ff {ff} is not a multiple of 4"
            )));
        }
        let kernel: Pick = |k| &k.gate_up;
        self.normed(kernel, (x, norm, eps), w, None, ff / 4, ff, &[])
            .await
    }

    /// One position's attention input at position `start`: RMSNorm of `x` by `norm`, the
    /// stacked `[Wq; Wk; Wv]`, RoPE, and the key and value stored in the caches. Returns
    /// the queries `[heads][head_dim]`, then the key cache and the value cache. `head_dim`
    /// is a multiple of 8.
    #[allow(clippy::too_many_arguments)]
    pub async fn qkv(
        &self,
        (x, norm, eps): (&[f32], &[f32], f32),
        w: &Linear,
        shape: &Shape,
        (cos, sin): (&[f32], &[f32]),
        (k_cache, v_cache): (&[f32], &[f32]),
        start: usize,
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>), GpuError> {
        if !shape.head_dim.is_multiple_of(8) {
            return Err(GpuError::Unsupported(format!(
                "head_dim {} is not a multiple of 8",
                shape.head_dim
            )));
        }
        let [tables, kc, vc] = self.attention_inputs((cos, sin), (k_cache, v_cache));
        let kv = shape.kv_heads * shape.head_dim;
        let units = shape.heads * shape.head_dim / 8 + kv / 8 + kv / 4;
        let step = self.step(start, 1);
        let extra = [(0, &step), (8, &tables), (9, &kc), (10, &vc)];
        let q_len = shape.heads * shape.head_dim;
        let q = self
            .normed(
                |k| &k.qkv,
                (x, norm, eps),
                w,
                Some(shape),
                units,
                q_len,
                &extra,
            )
            .await?;
        let (keys, values) = self.read_caches((&kc, &vc), k_cache.len()).await?;
        Ok((q, keys, values))
    }

    /// The rotary tables as one buffer (cos, then sin) and the two caches, on the device:
    /// what the kernels that store keys and values bind.
    fn attention_inputs(
        &self,
        (cos, sin): (&[f32], &[f32]),
        (k_cache, v_cache): (&[f32], &[f32]),
    ) -> [wgpu::Buffer; 3] {
        let device = &self.gpu.device;
        [
            storage(device, "rope", &[cos, sin].concat()),
            storage(device, "k cache", k_cache),
            storage(device, "v cache", v_cache),
        ]
    }

    /// The key cache and the value cache, each `len` values, read back.
    async fn read_caches(
        &self,
        (keys, values): (&wgpu::Buffer, &wgpu::Buffer),
        len: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        Ok((self.read(keys, len).await?, self.read(values, len).await?))
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
        let pipeline = &self.reading(embedding).gather;
        let mut buffers = m.bindings();
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
        let (input, w, out) = (
            storage(device, "x", x),
            storage(device, "weight", weight),
            scratch(device, "out", x.len()),
        );
        let buffers = [(1, &params), (2, &input), (3, &w), (4, &out)];
        self.run(
            &self.kernels.rmsnorm,
            &buffers,
            (n as u32, 1, 1),
            &out,
            x.len(),
        )
        .await
    }

    /// A prefill block's RoPE and KV store: from the stacked projections `qkv`
    /// (`[n][q | k | v]`) at positions `start..start + n`, with tables
    /// `[positions][head_dim / 2]`. Returns the rotated queries `[n][heads][head_dim]`,
    /// then the key cache and the value cache.
    pub async fn rope_store(
        &self,
        qkv: &[f32],
        shape: &Shape,
        (cos, sin): (&[f32], &[f32]),
        (k_cache, v_cache): (&[f32], &[f32]),
        start: usize,
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>), GpuError> {
        let device = &self.gpu.device;
        let (q_rows, kv) = (
            shape.heads * shape.head_dim,
            shape.kv_heads * shape.head_dim,
        );
        let n = qkv.len() / (q_rows + 2 * kv);
        let params = uniform(device, &shape.words());
        let step = self.step(start, n);
        let (input, q) = (
            storage(device, "qkv", qkv),
            scratch(device, "q", n * q_rows),
        );
        let [tables, kc, vc] = self.attention_inputs((cos, sin), (k_cache, v_cache));
        let buffers = [
            (0, &step),
            (1, &params),
            (2, &input),
            (3, &q),
            (4, &tables),
            (5, &kc),
            (6, &vc),
        ];
        let units = q_rows / 2 + kv / 2 + kv;
        let grid = ((n * units) as u32).div_ceil(ELEMENT_WG);
        let queries = self
            .run(
                &self.kernels.rope_store,
                &buffers,
                (grid, 1, 1),
                &q,
                n * q_rows,
            )
            .await?;
        let (keys, values) = self.read_caches((&kc, &vc), k_cache.len()).await?;
        Ok((queries, keys, values))
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

    /// SwiGLU of a prefill block: `silu(gate) * up` from the stacked `[n][gate | up]`
    /// (`2 d_ff` per position); `[n][d_ff]` values.
    pub async fn swiglu(&self, gate_up: &[f32], ff: usize) -> Result<Vec<f32>, GpuError> {
        let device = &self.gpu.device;
        let n = gate_up.len() / (2 * ff);
        let params = uniform(device, &[ff as u32]);
        let step = self.step(0, n);
        let (input, act) = (
            storage(device, "gate up", gate_up),
            scratch(device, "act", n * ff),
        );
        let buffers = [(0, &step), (1, &params), (2, &input), (3, &act)];
        let grid = ((n * ff) as u32).div_ceil(ELEMENT_WG);
        self.run(&self.kernels.swiglu, &buffers, (grid, 1, 1), &act, n * ff)
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

    /// The device's policy step (`sample.wgsl`) on `logits` with `draw` and, for a policy
    /// with constraints, their `table`.
    pub async fn sample(
        &self,
        logits: &[f32],
        policy: &policy::Policy,
        draw: Option<f64>,
        table: Option<&policy::ConstraintTable>,
    ) -> Result<policy::StepOutcome, GpuError> {
        if logits.len() > MAX_SAMPLER_VOCAB {
            return Err(GpuError::Unsupported(format!(
                "the sampler holds at most {MAX_SAMPLER_VOCAB} tokens, not {}",
                logits.len()
            )));
        }
        let device = &self.gpu.device;
        let params = uniform(
            device,
            &sampler_params(logits.len(), policy, draw, table.is_some()),
        );
        let words = match table {
            Some(table) => constraint_words(table),
            None => vec![0; 2 * logits.len()],
        };
        let (input, out, table) = (
            storage(device, "logits", logits),
            scratch(device, "sample", SAMPLE_WORDS),
            storage(device, "constraint table", &words),
        );
        let buffers = [(0, &params), (1, &input), (2, &out), (3, &table)];
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
