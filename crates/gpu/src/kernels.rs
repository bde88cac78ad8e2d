//! The compute pipelines, one per kernel entry point, compiled once per device from the
//! `.wgsl` sources beside this file.

use wgpu::util::DeviceExt;

/// The workgroup size of the element-wise kernels (embed, rope, kv_store, swiglu).
pub(crate) const ELEMENT_WG: u32 = 64;
/// The matmul kernel's tile edge.
pub(crate) const TILE: u32 = 16;
/// Rows per workgroup of the one-position matmul (`matvec_*`).
pub(crate) const MATVEC_WG: u32 = 64;
/// The attention kernel's limits (its workgroup arrays are this large).
pub(crate) const MAX_CONTEXT: usize = 1024;
pub(crate) const MAX_HEAD_DIM: usize = 256;
/// The sampler's limit (its workgroup arrays are this large), and its output's length.
pub(crate) const MAX_SAMPLER_VOCAB: usize = 1024;
pub(crate) const SAMPLE_WORDS: usize = 34;

pub(crate) struct Kernels {
    pub gather_f32: wgpu::ComputePipeline,
    pub gather_int8: wgpu::ComputePipeline,
    pub rmsnorm: wgpu::ComputePipeline,
    pub matmul_f32: wgpu::ComputePipeline,
    pub matmul_int8: wgpu::ComputePipeline,
    pub matvec_f32: wgpu::ComputePipeline,
    pub matvec_int8: wgpu::ComputePipeline,
    pub rope: wgpu::ComputePipeline,
    pub kv_store: wgpu::ComputePipeline,
    pub attention: wgpu::ComputePipeline,
    pub swiglu: wgpu::ComputePipeline,
    pub softmax: wgpu::ComputePipeline,
    pub sample: wgpu::ComputePipeline,
}

impl Kernels {
    pub fn new(device: &wgpu::Device) -> Kernels {
        let module = |label: &str, source: &'static str| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            })
        };
        // The kernels that reduce within a workgroup, after the reductions they share.
        macro_rules! reducing {
            ($file:literal) => {
                concat!(include_str!("shaders/reduce.wgsl"), include_str!($file))
            };
        }
        let embed = module("embed.wgsl", include_str!("shaders/embed.wgsl"));
        let rmsnorm = module("rmsnorm.wgsl", include_str!("shaders/rmsnorm.wgsl"));
        let matmul = module("matmul.wgsl", include_str!("shaders/matmul.wgsl"));
        let rope = module("rope.wgsl", include_str!("shaders/rope.wgsl"));
        let kv_store = module("kv_store.wgsl", include_str!("shaders/kv_store.wgsl"));
        let attention = module("attention.wgsl", reducing!("shaders/attention.wgsl"));
        let swiglu = module("swiglu.wgsl", include_str!("shaders/swiglu.wgsl"));
        let softmax = module("softmax.wgsl", reducing!("shaders/softmax.wgsl"));
        let sample = module("sample.wgsl", reducing!("shaders/sample.wgsl"));
        let pipeline = |module: &wgpu::ShaderModule, entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        Kernels {
            gather_f32: pipeline(&embed, "gather_f32"),
            gather_int8: pipeline(&embed, "gather_int8"),
            rmsnorm: pipeline(&rmsnorm, "main"),
            matmul_f32: pipeline(&matmul, "matmul_f32"),
            matmul_int8: pipeline(&matmul, "matmul_int8"),
            matvec_f32: pipeline(&matmul, "matvec_f32"),
            matvec_int8: pipeline(&matmul, "matvec_int8"),
            rope: pipeline(&rope, "main"),
            kv_store: pipeline(&kv_store, "main"),
            attention: pipeline(&attention, "main"),
            swiglu: pipeline(&swiglu, "main"),
            softmax: pipeline(&softmax, "main"),
            sample: pipeline(&sample, "main"),
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

/// A weight matrix on the device: f32 values, or int8 packed four to a u32 word per row
/// (rows padded to whole words) with one f32 scale per row.
pub(crate) enum DeviceMatrix {
    F32 {
        rows: usize,
        cols: usize,
        data: wgpu::Buffer,
    },
    Int8 {
        rows: usize,
        cols: usize,
        row_words: usize,
        data: wgpu::Buffer,
        scales: wgpu::Buffer,
    },
}

impl DeviceMatrix {
    pub fn upload(device: &wgpu::Device, label: &str, linear: &model::Linear) -> DeviceMatrix {
        match linear {
            model::Linear::F32 { rows, cols, data } => DeviceMatrix::F32 {
                rows: *rows,
                cols: *cols,
                data: storage(device, label, data),
            },
            model::Linear::Int8 {
                rows,
                cols,
                data,
                scales,
            } => {
                let row_words = cols.div_ceil(4);
                let mut packed = vec![0u32; rows * row_words];
                for (r, row) in data.chunks_exact(*cols).enumerate() {
                    for (c, &q) in row.iter().enumerate() {
                        packed[r * row_words + c / 4] |= u32::from(q as u8) << (8 * (c % 4));
                    }
                }
                DeviceMatrix::Int8 {
                    rows: *rows,
                    cols: *cols,
                    row_words,
                    data: storage(device, label, &packed),
                    scales: storage(device, label, scales),
                }
            }
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            DeviceMatrix::F32 { rows, .. } | DeviceMatrix::Int8 { rows, .. } => *rows,
        }
    }

    /// `[rows, cols, row_words, flags]`, the `Params` of the embed and matmul kernels.
    pub fn params(&self, flags: u32) -> [u32; 4] {
        match self {
            DeviceMatrix::F32 { rows, cols, .. } => [*rows as u32, *cols as u32, 0, flags],
            DeviceMatrix::Int8 {
                rows,
                cols,
                row_words,
                ..
            } => [*rows as u32, *cols as u32, *row_words as u32, flags],
        }
    }

    /// The pipeline of `f32_kernel`/`int8_kernel` that reads this matrix, and its weight
    /// bindings (4 = f32 data; 5 = packed int8, 6 = scales).
    pub fn select<'a>(
        &'a self,
        f32_kernel: &'a wgpu::ComputePipeline,
        int8_kernel: &'a wgpu::ComputePipeline,
    ) -> (&'a wgpu::ComputePipeline, Vec<(u32, &'a wgpu::Buffer)>) {
        match self {
            DeviceMatrix::F32 { data, .. } => (f32_kernel, vec![(4, data)]),
            DeviceMatrix::Int8 { data, scales, .. } => (int8_kernel, vec![(5, data), (6, scales)]),
        }
    }
}

/// Matmul flag: add the product to `out` (the residual stream) instead of overwriting it.
pub(crate) const ACCUMULATE: u32 = 1;
/// Matmul flag: one row of input, whatever the block's length (the last position's logits).
pub(crate) const SINGLE_ROW: u32 = 2;

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
