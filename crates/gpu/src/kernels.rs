//! The compute pipelines, one per kernel entry point, compiled once per device from the
//! `.wgsl` sources beside this file.

use wgpu::util::DeviceExt;

use policy::Precision;

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

/// The lengths of the kernels' workgroup arrays, declared in each module's source: a
/// model's own, so no array is larger than it needs. Browsers zero workgroup memory at
/// every dispatch, and on SwiftShader (Chromium's CPU fallback adapter) the one-position
/// kernels' rows at the 2,048-value limit instead of the tiny model's 352 made the GPU
/// backend's start 3 s slower and its decode steps slower too (BENCHMARKS.md).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    /// The longest row a one-position kernel stages: d_model or d_ff.
    pub cols: usize,
    pub context: usize,
    pub head_dim: usize,
    pub vocab: usize,
}

impl Sizes {
    /// The runtime's limits: what the one-kernel operations of `ops` are compiled for.
    pub const LIMITS: Sizes = Sizes {
        cols: MAX_COLS,
        context: MAX_CONTEXT,
        head_dim: MAX_HEAD_DIM,
        vocab: MAX_SAMPLER_VOCAB,
    };

    /// A model's, within the limits (which `GpuTransformer::new` checks first), and at
    /// least 1 (WGSL has no empty arrays).
    pub fn of(config: &model::ModelConfig) -> Sizes {
        let within = |n: usize, limit: usize| n.clamp(1, limit);
        Sizes {
            cols: within(config.d_model.max(config.d_ff), MAX_COLS),
            context: within(config.context_len, MAX_CONTEXT),
            head_dim: within(config.head_dim(), MAX_HEAD_DIM),
            vocab: within(config.vocab_size, MAX_SAMPLER_VOCAB),
        }
    }
}

/// The pipelines for one device and one weight format (the kernels that read weights are
/// compiled for that format only: each compile costs the first token time, seconds on a
/// browser's CPU fallback adapter).
pub(crate) struct Kernels {
    /// Invocations per output of the one-position kernels.
    pub slices: u32,
    pub gather: wgpu::ComputePipeline,
    pub matmul: wgpu::ComputePipeline,
    pub matvec: wgpu::ComputePipeline,
    pub logits: wgpu::ComputePipeline,
    pub qkv: wgpu::ComputePipeline,
    pub gate_up: wgpu::ComputePipeline,
    pub rmsnorm: wgpu::ComputePipeline,
    pub rope_store: wgpu::ComputePipeline,
    pub attention: wgpu::ComputePipeline,
    pub swiglu: wgpu::ComputePipeline,
    pub softmax: wgpu::ComputePipeline,
    pub sample: wgpu::ComputePipeline,
}

/// The `.wgsl` files, each included once, without comments (`build.rs`): a kernel's source
/// is its file after the preludes it builds on, joined when the module is made.
mod wgsl {
    macro_rules! files {
        ($($name:ident = $file:literal;)+) => {
            $(pub const $name: &str = include_str!(concat!(env!("OUT_DIR"), "/", $file));)+
        };
    }
    files! {
        REDUCE = "reduce.wgsl";
        WEIGHTS_F32 = "weights_f32.wgsl";
        WEIGHTS_INT8 = "weights_int8.wgsl";
        EMBED = "embed.wgsl";
        MATMUL = "matmul.wgsl";
        MATVEC = "matvec.wgsl";
        RMSNORM = "rmsnorm.wgsl";
        ROPE_STORE = "rope_store.wgsl";
        ATTENTION = "attention.wgsl";
        SWIGLU = "swiglu.wgsl";
        SOFTMAX = "softmax.wgsl";
        SAMPLE = "sample.wgsl";
    }
}

impl Kernels {
    /// The kernels for `gpu`, weights in `precision` and workgroup arrays of `sizes`: the
    /// one-position kernels split each output over 8 invocations on a GPU, over 1 on an
    /// adapter that runs shaders on the CPU.
    pub fn new(gpu: &crate::Gpu, precision: Precision, sizes: Sizes) -> Kernels {
        let slices = if gpu.is_emulated() { 1 } else { 8 };
        Kernels::with_slices(&gpu.device, precision, slices, sizes)
    }

    /// The kernels with the one-position kernels split over `slices` invocations per
    /// output (a divisor of [`MATVEC_WG`]).
    pub fn with_slices(
        device: &wgpu::Device,
        precision: Precision,
        slices: u32,
        sizes: Sizes,
    ) -> Kernels {
        let module = |label: &str, parts: &[&str]| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(parts.concat().into()),
            })
        };
        let pipeline = |module: &wgpu::ShaderModule, entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &[],
                    // Every kernel writes its workgroup memory before reading it; zeroing
                    // it first costs each workgroup (browsers do it regardless).
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            })
        };
        // A kernel file that reads weights, after the format's prelude (and after
        // `first`, the reductions where it needs them).
        let prelude = match precision {
            Precision::F32 => wgsl::WEIGHTS_F32,
            Precision::Int8 => wgsl::WEIGHTS_INT8,
        };
        let weighted = |label: &str, first: &[&str], file: &str| {
            module(label, &[first, &[prelude, file]].concat())
        };
        let declared = format!(
            "const SLICES: u32 = {slices}u;\nconst MAX_COLS: u32 = {}u;\n",
            sizes.cols
        );
        let attention = format!(
            "const MAX_CONTEXT: u32 = {}u;\nconst MAX_HEAD_DIM: u32 = {}u;\n",
            sizes.context, sizes.head_dim
        );
        let sample = format!("const MAX_VOCAB: u32 = {}u;\n", sizes.vocab);
        let one_position = weighted("matvec.wgsl", &[&declared, wgsl::REDUCE], wgsl::MATVEC);
        let single = |file: &str, parts: &[&str]| pipeline(&module(file, parts), "main");
        Kernels {
            slices,
            gather: pipeline(&weighted("embed.wgsl", &[], wgsl::EMBED), "main"),
            matmul: pipeline(&weighted("matmul.wgsl", &[], wgsl::MATMUL), "main"),
            matvec: pipeline(&one_position, "matvec"),
            logits: pipeline(&one_position, "logits"),
            qkv: pipeline(&one_position, "qkv"),
            gate_up: pipeline(&one_position, "gate_up"),
            rmsnorm: single("rmsnorm.wgsl", &[wgsl::REDUCE, wgsl::RMSNORM]),
            rope_store: single("rope_store.wgsl", &[wgsl::ROPE_STORE]),
            attention: single(
                "attention.wgsl",
                &[&attention, wgsl::REDUCE, wgsl::ATTENTION],
            ),
            swiglu: single("swiglu.wgsl", &[wgsl::SWIGLU]),
            softmax: single("softmax.wgsl", &[wgsl::REDUCE, wgsl::SOFTMAX]),
            sample: single("sample.wgsl", &[&sample, wgsl::REDUCE, wgsl::SAMPLE]),
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

    /// The weight bindings of a kernel that reads this matrix (4 = f32 data; 5 = packed
    /// int8, 6 = scales).
    pub fn bindings(&self) -> Vec<(u32, &wgpu::Buffer)> {
        match self {
            DeviceMatrix::F32 { data, .. } => vec![(4, data)],
            DeviceMatrix::Int8 { data, scales, .. } => vec![(5, data), (6, scales)],
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

/// Matrices with the same columns and format as one, their rows stacked in order (q, k, v
/// or gate, up), so one kernel reads them all; `None` when the formats differ.
pub(crate) fn stack(parts: &[&model::Linear]) -> Option<model::Linear> {
    let cols = parts.first()?.cols();
    let rows = parts.iter().map(|m| m.rows()).sum();
    let (mut data, mut q, mut scales) = (Vec::new(), Vec::new(), Vec::new());
    for m in parts {
        match m {
            model::Linear::F32 { data: d, .. } => data.extend_from_slice(d),
            model::Linear::Int8 {
                data: d, scales: s, ..
            } => {
                q.extend_from_slice(d);
                scales.extend_from_slice(s);
            }
        }
    }
    match (data.is_empty(), q.is_empty()) {
        (false, true) => Some(model::Linear::F32 { rows, cols, data }),
        (true, false) => Some(model::Linear::Int8 {
            rows,
            cols,
            data: q,
            scales,
        }),
        _ => None,
    }
}

/// Matmul flag: add the product to `out` (the residual stream) instead of overwriting it.
pub(crate) const ACCUMULATE: u32 = 1;

/// The sampler's `Params`: vocabulary, top-k, greedy, then temperature, top-p, min-p, the
/// draw, the repetition, frequency and presence penalties as f32 bits, and whether the
/// constraint table applies.
pub(crate) fn sampler_params(
    vocab: usize,
    policy: &policy::Policy,
    draw: Option<f64>,
    constrained: bool,
) -> [u32; 12] {
    [
        vocab as u32,
        policy.top_k.min(u32::MAX as usize) as u32,
        u32::from(policy.is_greedy()),
        0,
        (policy.temperature as f32).to_bits(),
        (policy.top_p as f32).to_bits(),
        (policy.min_p as f32).to_bits(),
        (draw.unwrap_or(0.0) as f32).to_bits(),
        (policy.repetition_penalty as f32).to_bits(),
        (policy.frequency_penalty as f32).to_bits(),
        (policy.presence_penalty as f32).to_bits(),
        u32::from(constrained),
    ]
}

/// The sampler's constraint table as words (see `sample.wgsl`): each token's bias as f32
/// bits, then its flags (bit 31 repeated, bit 30 removed, the low 30 bits its count).
pub(crate) fn constraint_words(table: &policy::ConstraintTable) -> Vec<u32> {
    let flags = table
        .repeated
        .iter()
        .zip(&table.removed)
        .zip(&table.counts)
        .map(|((&repeated, &removed), &count)| {
            (u32::from(repeated) << 31) | (u32::from(removed) << 30) | count.min(0x3fff_ffff)
        });
    table
        .bias
        .iter()
        .map(|&b| (b as f32).to_bits())
        .chain(flags)
        .collect()
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
