//! The compute pipelines, one per kernel entry point, compiled once per device from the
//! `.wgsl` sources beside this file.

use wgpu::util::DeviceExt;

/// The workgroup size of the element-wise kernels (embed, rope_store, swiglu).
pub(crate) const ELEMENT_WG: u32 = 64;
/// The prefill matmul's tile edge (positions and rows per workgroup).
pub(crate) const TILE: u32 = 32;
/// Invocations per workgroup of the one-position kernels (`matvec.wgsl`), which split each
/// output over `slices` of them (`Kernels::slices`).
pub(crate) const MATVEC_WG: u32 = 64;
/// The longest row the one-position kernels stage in workgroup memory.
pub(crate) const MAX_COLS: usize = 2048;
/// The attention kernel's limits (its workgroup arrays are this large).
pub(crate) const MAX_CONTEXT: usize = 1024;
pub(crate) const MAX_HEAD_DIM: usize = 256;
/// The sampler's limit (its workgroup arrays are this large), and its output's length.
pub(crate) const MAX_SAMPLER_VOCAB: usize = 1024;
pub(crate) const SAMPLE_WORDS: usize = 34;

/// One kernel that reads a weight matrix, compiled once per weight format.
pub(crate) struct ByFormat {
    pub f32: wgpu::ComputePipeline,
    pub int8: wgpu::ComputePipeline,
}

pub(crate) struct Kernels {
    /// Invocations per output of the one-position kernels.
    pub slices: u32,
    pub gather: ByFormat,
    pub matmul: ByFormat,
    pub matvec: ByFormat,
    pub logits: ByFormat,
    pub qkv: ByFormat,
    pub gate_up: ByFormat,
    pub rmsnorm: wgpu::ComputePipeline,
    pub rope_store: wgpu::ComputePipeline,
    pub attention: wgpu::ComputePipeline,
    pub swiglu: wgpu::ComputePipeline,
    pub softmax: wgpu::ComputePipeline,
    pub sample: wgpu::ComputePipeline,
}

/// The source of a kernel: its `.wgsl` file after the files it builds on.
macro_rules! source {
    ($($file:literal),+) => {
        concat!($(include_str!(concat!("shaders/", $file))),+)
    };
}

impl Kernels {
    /// The kernels for `gpu`: the one-position kernels split each output over 8
    /// invocations on a GPU, over 1 on an adapter that runs shaders on the CPU.
    pub fn new(gpu: &crate::Gpu) -> Kernels {
        Kernels::with_slices(&gpu.device, if gpu.is_emulated() { 1 } else { 8 })
    }

    /// The kernels with the one-position kernels split over `slices` invocations per
    /// output (a divisor of [`MATVEC_WG`]).
    pub fn with_slices(device: &wgpu::Device, slices: u32) -> Kernels {
        let module = |label: &str, source: &'static str| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            })
        };
        let constants = [("SLICES", f64::from(slices))];
        let pipeline = |module: &wgpu::ShaderModule, entry: &str| {
            let split = matches!(entry, "matvec" | "logits" | "qkv" | "gate_up");
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: if split { &constants } else { &[] },
                    // Every kernel writes its workgroup memory before reading it; zeroing
                    // it first costs each workgroup (browsers do it regardless).
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            })
        };
        // A kernel that reads weights, after each format's prelude (and after the
        // reductions of reduce.wgsl, for the `reducing` ones).
        macro_rules! by_format {
            ($file:literal, $entry:literal $(, $reduce:literal)?) => {
                ByFormat {
                    f32: pipeline(
                        &module($file, source!($($reduce,)? "weights_f32.wgsl", $file)),
                        $entry,
                    ),
                    int8: pipeline(
                        &module($file, source!($($reduce,)? "weights_int8.wgsl", $file)),
                        $entry,
                    ),
                }
            };
        }
        let single =
            |file: &str, source: &'static str, entry: &str| pipeline(&module(file, source), entry);
        Kernels {
            slices,
            gather: by_format!("embed.wgsl", "main"),
            matmul: by_format!("matmul.wgsl", "main"),
            matvec: by_format!("matvec.wgsl", "matvec", "reduce.wgsl"),
            logits: by_format!("matvec.wgsl", "logits", "reduce.wgsl"),
            qkv: by_format!("matvec.wgsl", "qkv", "reduce.wgsl"),
            gate_up: by_format!("matvec.wgsl", "gate_up", "reduce.wgsl"),
            rmsnorm: single("rmsnorm.wgsl", source!("rmsnorm.wgsl"), "main"),
            rope_store: single("rope_store.wgsl", source!("rope_store.wgsl"), "main"),
            attention: single(
                "attention.wgsl",
                source!("reduce.wgsl", "attention.wgsl"),
                "main",
            ),
            swiglu: single("swiglu.wgsl", source!("swiglu.wgsl"), "main"),
            softmax: single(
                "softmax.wgsl",
                source!("reduce.wgsl", "softmax.wgsl"),
                "main",
            ),
            sample: single("sample.wgsl", source!("reduce.wgsl", "sample.wgsl"), "main"),
        }
    }
}

/// A bind group for group 0 of `pipeline` from `(binding, buffer)` pairs (auto layouts keep
/// only the bindings the entry point uses, so the pairs are per entry point).
pub(crate) fn bind(
    device: &wgpu::Device,
    pipeline: &wgpu::ComputePipeline,
    buffers: &[(u32, &wgpu::Buffer)],
) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .map(|&(binding, buffer)| wgpu::BindGroupEntry {
            binding,
            resource: buffer.as_entire_binding(),
        })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    })
}

/// A uniform buffer holding `words` (each u32 or f32 bits), padded to 16 bytes.
pub(crate) fn uniform(device: &wgpu::Device, words: &[u32]) -> wgpu::Buffer {
    let mut padded = words.to_vec();
    padded.resize(words.len().div_ceil(4).max(1) * 4, 0);
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("params"),
        contents: bytemuck::cast_slice(&padded),
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    })
}

/// A storage buffer initialised with `data`.
pub(crate) fn storage<T: bytemuck::Pod>(
    device: &wgpu::Device,
    label: &str,
    data: &[T],
) -> wgpu::Buffer {
    let bytes: &[u8] = bytemuck::cast_slice(data);
    // Zero-length bindings are invalid; keep at least one word.
    let contents: Vec<u8> = if bytes.is_empty() {
        vec![0; 4]
    } else {
        bytes.to_vec()
    };
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: &contents,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
    })
}

/// A zeroed storage buffer of `floats` f32 values.
pub(crate) fn scratch(device: &wgpu::Device, label: &str, floats: usize) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (floats.max(1) * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// A buffer the host can map to read `floats` f32 values back.
pub(crate) fn readback(device: &wgpu::Device, floats: usize) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: (floats.max(1) * 4) as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// A weight matrix on the device, column-major in groups of four rows (the layout of
/// `weights_f32.wgsl`): f32 values, or int8 values four to a u32 word with one f32 scale
/// per row. The rows are padded with zeros to whole groups.
pub(crate) enum DeviceMatrix {
    F32 {
        rows: usize,
        cols: usize,
        data: wgpu::Buffer,
    },
    Int8 {
        rows: usize,
        cols: usize,
        data: wgpu::Buffer,
        scales: wgpu::Buffer,
    },
}

impl DeviceMatrix {
    pub fn upload(device: &wgpu::Device, label: &str, linear: &model::Linear) -> DeviceMatrix {
        let (rows, cols) = (linear.rows(), linear.cols());
        let groups = rows.div_ceil(4);
        // Where W[r][c] goes: word (c, r / 4), lane r % 4.
        let at = |r: usize, c: usize| ((c * groups + r / 4), r % 4);
        match linear {
            model::Linear::F32 { data, .. } => {
                let mut columns = vec![0.0f32; cols * groups * 4];
                for (r, row) in data.chunks_exact(cols.max(1)).enumerate() {
                    for (c, &v) in row.iter().enumerate() {
                        let (word, lane) = at(r, c);
                        columns[word * 4 + lane] = v;
                    }
                }
                DeviceMatrix::F32 {
                    rows,
                    cols,
                    data: storage(device, label, &columns),
                }
            }
            model::Linear::Int8 { data, scales, .. } => {
                let mut packed = vec![0u32; cols * groups];
                for (r, row) in data.chunks_exact(cols.max(1)).enumerate() {
                    for (c, &q) in row.iter().enumerate() {
                        let (word, lane) = at(r, c);
                        packed[word] |= u32::from(q as u8) << (8 * lane);
                    }
                }
                let mut padded = scales.clone();
                padded.resize(groups * 4, 0.0);
                DeviceMatrix::Int8 {
                    rows,
                    cols,
                    data: storage(device, label, &packed),
                    scales: storage(device, label, &padded),
                }
            }
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            DeviceMatrix::F32 { rows, .. } | DeviceMatrix::Int8 { rows, .. } => *rows,
        }
    }

    /// Groups of four rows: the invocations of a one-position product.
    pub fn groups(&self) -> usize {
        self.rows().div_ceil(4)
    }

    /// `[rows, cols, groups, flags]`, the `Params` of the embed and matmul kernels.
    pub fn params(&self, flags: u32) -> [u32; 4] {
        let cols = match self {
            DeviceMatrix::F32 { cols, .. } | DeviceMatrix::Int8 { cols, .. } => *cols,
        };
        [self.rows() as u32, cols as u32, self.groups() as u32, flags]
    }

    /// The pipeline of `kernel` that reads this matrix, and its weight bindings (4 = f32
    /// data; 5 = packed int8, 6 = scales).
    pub fn select<'a>(
        &'a self,
        kernel: &'a ByFormat,
    ) -> (&'a wgpu::ComputePipeline, Vec<(u32, &'a wgpu::Buffer)>) {
        match self {
            DeviceMatrix::F32 { data, .. } => (&kernel.f32, vec![(4, data)]),
            DeviceMatrix::Int8 { data, scales, .. } => (&kernel.int8, vec![(5, data), (6, scales)]),
        }
    }

    /// The `Params` of the one-position kernels (`matvec.wgsl`): the matrix's, then the
    /// norm's epsilon and the attention's shape (for `qkv`).
    pub fn fused_params(&self, flags: u32, fused: &Fused) -> [u32; 12] {
        let [rows, cols, groups, flags] = self.params(flags);
        [
            rows,
            cols,
            groups,
            flags,
            fused.eps.to_bits(),
            fused.layer,
            fused.heads,
            fused.kv_heads,
            fused.head_dim,
            fused.context,
            0,
            0,
        ]
    }
}

/// What the fused one-position kernels know beyond their matrix: RMSNorm's epsilon, and
/// for `qkv` the layer and the attention's shape.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Fused {
    pub eps: f32,
    pub layer: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub context: u32,
}

/// Matrices with the same columns as one, their rows stacked in order (q, k, v or gate,
/// up), so one kernel reads them all: int8 if all are int8, else f32 (an int8 part then
/// dequantised to scale · q; a model's weights are all of one format).
pub(crate) fn stack(parts: &[&model::Linear]) -> model::Linear {
    let cols = parts.first().map_or(0, |m| m.cols());
    let rows = parts.iter().map(|m| m.rows()).sum();
    let mut int8 = (Vec::new(), Vec::new());
    for m in parts {
        match m {
            model::Linear::Int8 { data, scales, .. } => {
                int8.0.extend_from_slice(data);
                int8.1.extend_from_slice(scales);
            }
            model::Linear::F32 { .. } => {
                let mut data = vec![0.0; rows * cols];
                for (row, out) in parts
                    .iter()
                    .flat_map(|m| (0..m.rows()).map(move |r| (m, r)))
                    .zip(data.chunks_exact_mut(cols.max(1)))
                {
                    row.0.row(row.1, out);
                }
                return model::Linear::F32 { rows, cols, data };
            }
        }
    }
    model::Linear::Int8 {
        rows,
        cols,
        data: int8.0,
        scales: int8.1,
    }
}

/// Matmul flag: add the product to `out` (the residual stream) instead of overwriting it.
pub(crate) const ACCUMULATE: u32 = 1;

/// The sampler's `Params`: vocabulary, top-k, greedy, then temperature, top-p, min-p and
/// the draw as f32 bits.
pub(crate) fn sampler_params(vocab: usize, policy: &policy::Policy, draw: Option<f64>) -> [u32; 8] {
    [
        vocab as u32,
        policy.top_k.min(u32::MAX as usize) as u32,
        u32::from(policy.is_greedy()),
        0,
        (policy.temperature as f32).to_bits(),
        (policy.top_p as f32).to_bits(),
        (policy.min_p as f32).to_bits(),
        (draw.unwrap_or(0.0) as f32).to_bits(),
    ]
}

/// The step the sampler wrote (its first `SAMPLE_WORDS` words, read back as f32 values).
pub(crate) fn sampled_outcome(
    values: &[f32],
    policy: &policy::Policy,
    draw: Option<f64>,
) -> policy::StepOutcome {
    let word = |i: usize| values[i].to_bits();
    let count = (word(4) as usize).min(5);
    policy::StepOutcome {
        token: word(0),
        survivors: word(1) as usize,
        prob: f64::from(values[2]),
        entropy: f64::from(values[3]),
        draw: if policy.is_greedy() { None } else { draw },
        top: (0..count)
            .map(|s| policy::TokenProb {
                id: word(5 + s),
                prob: f64::from(values[10 + s]),
                logit: f64::from(values[15 + s]),
            })
            .collect(),
        stages: None,
        model: Some(model_view(values)),
        mirostat: None,
    }
}

/// The model's own distribution as the sampler wrote it (words 20 to 34): the raw maximum,
/// the normaliser and the raw logits, turned into probabilities here in f64.
fn model_view(values: &[f32]) -> policy::ModelView {
    let logsumexp = f64::from(values[20]) + f64::from(values[21]).ln();
    let logprob = f64::from(values[22]) - logsumexp;
    let count = (values[23].to_bits() as usize).min(policy::MODEL_TOP);
    policy::ModelView {
        prob: logprob.exp(),
        logprob,
        top: (0..count)
            .map(|s| {
                let logit = f64::from(values[29 + s]);
                policy::TokenProb {
                    id: values[24 + s].to_bits(),
                    logit,
                    prob: (logit - logsumexp).exp(),
                }
            })
            .collect(),
    }
}
