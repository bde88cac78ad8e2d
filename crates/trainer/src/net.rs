//! The model crate's transformer as a differentiable candle graph.
//!
//! Every tensor lives in a [`VarMap`] under the model crate's safetensors name
//! (`embed.weight`, `layers.{i}.attn.q.weight`, ...), `[out, in]` with `y = x·Wᵀ`, and the
//! graph is read back through a [`VarBuilder`]. The arithmetic follows
//! `model::Transformer` exactly: tied embeddings, pre-norm RMSNorm
//! `x / sqrt(mean(x²) + eps) · w`, rotary embeddings in the "rotate half" convention with the
//! same cos/sin tables (computed in f64, cast to f32), causal softmax attention scaled by
//! `1/sqrt(head_dim)`, grouped-query attention (query head `h` reads KV head
//! `h / group_size`), and a SwiGLU MLP `down(silu(gate(x)) · up(x))`.
//!
//! candle-nn's fused `rope`, `rms_norm` and `softmax_last_dim` have no backward pass, so the
//! graph is built from differentiable primitives (`rope_slow` and friends).

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{VarBuilder, VarMap};
use model::{Layer, Linear, ModelConfig, Weights};

use crate::{Rng, TrainError};

/// How the weights are drawn: matrices from N(0, std²), norm weights `1 + jitter·N(0,1)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Init {
    pub embed_std: f64,
    /// q, k, v, gate and up.
    pub matrix_std: f64,
    /// o and down, which write into the residual stream.
    pub residual_std: f64,
    pub norm_jitter: f64,
}

impl Init {
    /// GPT-2's scheme: 0.02 everywhere, residual projections scaled by `1/sqrt(2·n_layers)`,
    /// norms at exactly 1.
    pub fn training(config: &ModelConfig) -> Init {
        Init {
            embed_std: 0.02,
            matrix_std: 0.02,
            residual_std: 0.02 / (2.0 * config.n_layers as f64).sqrt(),
            norm_jitter: 0.0,
        }
    }

    /// Large weights and uneven norms, so that a parity check sees logits of order one and
    /// every tensor matters.
    pub fn testing(config: &ModelConfig) -> Init {
        let d = config.d_model as f64;
        Init {
            embed_std: 1.0,
            matrix_std: 1.0 / d.sqrt(),
            residual_std: 1.0 / d.sqrt(),
            norm_jitter: 0.2,
        }
    }
}

/// The tensor names and shapes of `config`, in a fixed order (the order of initialisation).
pub fn tensor_shapes(config: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (d, kv, ff) = (config.d_model, config.kv_dim(), config.d_ff);
    let mut shapes = vec![("embed.weight".to_string(), vec![config.vocab_size, d])];
    for i in 0..config.n_layers {
        let p = format!("layers.{i}");
        shapes.push((format!("{p}.attn_norm.weight"), vec![d]));
        shapes.push((format!("{p}.attn.q.weight"), vec![d, d]));
        shapes.push((format!("{p}.attn.k.weight"), vec![kv, d]));
        shapes.push((format!("{p}.attn.v.weight"), vec![kv, d]));
        shapes.push((format!("{p}.attn.o.weight"), vec![d, d]));
        shapes.push((format!("{p}.mlp_norm.weight"), vec![d]));
        shapes.push((format!("{p}.mlp.gate.weight"), vec![ff, d]));
        shapes.push((format!("{p}.mlp.up.weight"), vec![ff, d]));
        shapes.push((format!("{p}.mlp.down.weight"), vec![d, ff]));
    }
    shapes.push(("norm.weight".to_string(), vec![d]));
    shapes
}

/// The number of parameters of `config` (the embedding counted once: it is tied).
pub fn parameter_count(config: &ModelConfig) -> usize {
    tensor_shapes(config)
        .iter()
        .map(|(_, s)| s.iter().product::<usize>())
        .sum()
}

struct NetLayer {
    attn_norm: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    mlp_norm: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
}

/// The transformer as candle tensors that share storage with the [`VarMap`]'s variables,
/// so an optimiser step on the variables changes what [`Net::forward`] computes.
pub struct Net {
    config: ModelConfig,
    varmap: VarMap,
    device: Device,
    embed: Tensor,
    layers: Vec<NetLayer>,
    norm: Tensor,
    /// `[context_len, head_dim / 2]`, the reference's tables.
    cos: Tensor,
    sin: Tensor,
}

impl Net {
    /// A freshly initialised model; the values depend only on `init` and `rng`.
    pub fn new(config: &ModelConfig, init: &Init, rng: &mut Rng) -> Result<Net, TrainError> {
        let tensors = tensor_shapes(config).into_iter().map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let values: Vec<f32> = if shape.len() == 1 {
                (0..n)
                    .map(|_| (1.0 + init.norm_jitter * rng.normal()) as f32)
                    .collect()
            } else {
                let std = if name == "embed.weight" {
                    init.embed_std
                } else if name.ends_with("attn.o.weight") || name.ends_with("mlp.down.weight") {
                    init.residual_std
                } else {
                    init.matrix_std
                };
                (0..n).map(|_| (std * rng.normal()) as f32).collect()
            };
            (name, values, shape)
        });
        Net::from_tensors(config, tensors)
    }

    /// A model holding `weights` (int8 matrices are dequantised).
    pub fn from_weights(config: &ModelConfig, weights: &Weights) -> Result<Net, TrainError> {
        let dense = |m: &Linear| {
            let mut out = vec![0.0f32; m.rows() * m.cols()];
            for (r, row) in out.chunks_exact_mut(m.cols()).enumerate() {
                m.row(r, row);
            }
            (out, vec![m.rows(), m.cols()])
        };
        let vector = |v: &[f32]| (v.to_vec(), vec![v.len()]);
        let mut tensors = Vec::new();
        let (v, s) = dense(&weights.embed);
        tensors.push(("embed.weight".to_string(), v, s));
        for (i, l) in weights.layers.iter().enumerate() {
            let p = format!("layers.{i}");
            let (v, s) = vector(&l.attn_norm);
            tensors.push((format!("{p}.attn_norm.weight"), v, s));
            let (v, s) = vector(&l.mlp_norm);
            tensors.push((format!("{p}.mlp_norm.weight"), v, s));
            for (name, m) in l.matrices() {
                let (v, s) = dense(m);
                tensors.push((format!("{p}.{name}.weight"), v, s));
            }
        }
        let (v, s) = vector(&weights.norm);
        tensors.push(("norm.weight".to_string(), v, s));
        Net::from_tensors(config, tensors)
    }

    /// A model holding the named tensors `(name, values, shape)`.
    fn from_tensors(
        config: &ModelConfig,
        tensors: impl IntoIterator<Item = (String, Vec<f32>, Vec<usize>)>,
    ) -> Result<Net, TrainError> {
        config.validate()?;
        let varmap = VarMap::new();
        {
            let mut data = varmap
                .data()
                .lock()
                .map_err(|_| TrainError::State("the VarMap lock is poisoned".into()))?;
            for (name, values, shape) in tensors {
                let tensor = Tensor::from_vec(values, shape, &Device::Cpu)?;
                data.insert(name, Var::from_tensor(&tensor)?);
            }
        }
        Net::from_varmap(config, varmap)
    }

    /// Builds the graph's tensors from a VarMap that holds every tensor of `config`
    /// (missing or misshapen tensors are errors).
    pub fn from_varmap(config: &ModelConfig, varmap: VarMap) -> Result<Net, TrainError> {
        config.validate()?;
        let device = Device::Cpu;
        let (d, kv, ff) = (config.d_model, config.kv_dim(), config.d_ff);
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let embed = vb.get_with_hints((config.vocab_size, d), "embed.weight", NO_INIT)?;
        let mut layers = Vec::with_capacity(config.n_layers);
        for i in 0..config.n_layers {
            let vb = vb.pp(format!("layers.{i}"));
            let (attn, mlp) = (vb.pp("attn"), vb.pp("mlp"));
            layers.push(NetLayer {
                attn_norm: vb.get_with_hints(d, "attn_norm.weight", NO_INIT)?,
                q: attn.get_with_hints((d, d), "q.weight", NO_INIT)?,
                k: attn.get_with_hints((kv, d), "k.weight", NO_INIT)?,
                v: attn.get_with_hints((kv, d), "v.weight", NO_INIT)?,
                o: attn.get_with_hints((d, d), "o.weight", NO_INIT)?,
                mlp_norm: vb.get_with_hints(d, "mlp_norm.weight", NO_INIT)?,
                gate: mlp.get_with_hints((ff, d), "gate.weight", NO_INIT)?,
                up: mlp.get_with_hints((ff, d), "up.weight", NO_INIT)?,
                down: mlp.get_with_hints((d, ff), "down.weight", NO_INIT)?,
            });
        }
        let norm = vb.get_with_hints(d, "norm.weight", NO_INIT)?;
        let expected = tensor_shapes(config).len();
        let held = varmap.all_vars().len();
        if held != expected {
            return Err(TrainError::State(format!(
                "the VarMap holds {held} tensors, but the config has {expected}"
            )));
        }
        let (cos, sin) = rope_tables(config, &device)?;
        Ok(Net {
            config: config.clone(),
            varmap,
            device,
            embed,
            layers,
            norm,
            cos,
            sin,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Logits `[batch, time, vocab]` for token ids `[batch, time]` (u32), every position
    /// attending causally to the positions before it, starting at position 0.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor, TrainError> {
        let c = &self.config;
        let (b, t) = ids.dims2()?;
        if t > c.context_len {
            return Err(TrainError::Args(format!(
                "{t} positions do not fit the context of {}",
                c.context_len
            )));
        }
        let (d, hd, nh, nkv) = (c.d_model, c.head_dim(), c.n_heads, c.n_kv_heads);
        let eps = f64::from(c.norm_eps);
        let cos = self.cos.narrow(0, 0, t)?;
        let sin = self.sin.narrow(0, 0, t)?;
        let mask = causal_mask(t, &self.device)?;
        let scale = 1.0 / (hd as f64).sqrt();
        // The residual stream, `[b·t, d]`.
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?;
        for layer in &self.layers {
            let h = rms_norm(&x, &layer.attn_norm, eps)?;
            let heads = |w: &Tensor, n: usize| -> candle_core::Result<Tensor> {
                linear(&h, w)?
                    .reshape((b, t, n, hd))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = candle_nn::rotary_emb::rope_slow(&heads(&layer.q, nh)?, &cos, &sin)?;
            let k = candle_nn::rotary_emb::rope_slow(&heads(&layer.k, nkv)?, &cos, &sin)?;
            let v = heads(&layer.v, nkv)?;
            let k = repeat_kv(&k, nh / nkv)?.contiguous()?;
            let v = repeat_kv(&v, nh / nkv)?.contiguous()?;
            let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
            let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
            let attended = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((b * t, d))?;
            x = (x + linear(&attended, &layer.o)?)?;
            let h = rms_norm(&x, &layer.mlp_norm, eps)?;
            let gated = (linear(&h, &layer.gate)?.silu()? * linear(&h, &layer.up)?)?;
            x = (x + linear(&gated, &layer.down)?)?;
        }
        let x = rms_norm(&x, &self.norm, eps)?;
        Ok(linear(&x, &self.embed)?.reshape((b, t, c.vocab_size))?)
    }

    /// Mean cross-entropy (nats per token) of predicting `targets` `[b, t]` from `inputs`.
    pub fn loss(&self, inputs: &Tensor, targets: &Tensor) -> Result<Tensor, TrainError> {
        let logits = self.forward(inputs)?;
        let (b, t, v) = logits.dims3()?;
        Ok(candle_nn::loss::cross_entropy(
            &logits.reshape((b * t, v))?,
            &targets.flatten_all()?,
        )?)
    }

    /// The current values as the model crate's f32 weights.
    pub fn to_weights(&self) -> Result<Weights, TrainError> {
        let data = self
            .varmap
            .data()
            .lock()
            .map_err(|_| TrainError::State("the VarMap lock is poisoned".into()))?;
        let vector = |name: &str| -> Result<Vec<f32>, TrainError> {
            let var = data
                .get(name)
                .ok_or_else(|| TrainError::State(format!("no tensor {name}")))?;
            Ok(var.as_tensor().flatten_all()?.to_vec1::<f32>()?)
        };
        let matrix = |name: &str| -> Result<Linear, TrainError> {
            let var = data
                .get(name)
                .ok_or_else(|| TrainError::State(format!("no tensor {name}")))?;
            let (rows, cols) = var.as_tensor().dims2()?;
            Ok(Linear::F32 {
                rows,
                cols,
                data: var.as_tensor().flatten_all()?.to_vec1::<f32>()?,
            })
        };
        let layers = (0..self.config.n_layers)
            .map(|i| {
                let p = format!("layers.{i}");
                Ok(Layer {
                    attn_norm: vector(&format!("{p}.attn_norm.weight"))?,
                    q: matrix(&format!("{p}.attn.q.weight"))?,
                    k: matrix(&format!("{p}.attn.k.weight"))?,
                    v: matrix(&format!("{p}.attn.v.weight"))?,
                    o: matrix(&format!("{p}.attn.o.weight"))?,
                    mlp_norm: vector(&format!("{p}.mlp_norm.weight"))?,
                    gate: matrix(&format!("{p}.mlp.gate.weight"))?,
                    up: matrix(&format!("{p}.mlp.up.weight"))?,
                    down: matrix(&format!("{p}.mlp.down.weight"))?,
                })
            })
            .collect::<Result<Vec<Layer>, TrainError>>()?;
        Ok(Weights {
            embed: matrix("embed.weight")?,
            layers,
            norm: vector("norm.weight")?,
        })
    }
}

/// Every tensor must already be in the VarMap; this initialiser is never used for them.
const NO_INIT: candle_nn::Init = candle_nn::Init::Const(f64::NAN);

/// `x·Wᵀ` for `x` `[n, in]` and `W` `[out, in]`.
fn linear(x: &Tensor, w: &Tensor) -> candle_core::Result<Tensor> {
    x.matmul(&w.t()?)
}

/// `x / sqrt(mean(x²) + eps) · w` over the last dimension.
fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(mean_square + eps)?.sqrt()?)?
        .broadcast_mul(w)
}

/// `[b, n_kv, t, hd]` → `[b, n_kv·group, t, hd]`, each KV head repeated `group` times in a
/// row, so that query head `h` meets KV head `h / group`.
fn repeat_kv(x: &Tensor, group: usize) -> candle_core::Result<Tensor> {
    if group == 1 {
        return Ok(x.clone());
    }
    let (b, n, t, hd) = x.dims4()?;
    x.unsqueeze(2)?
        .broadcast_as((b, n, group, t, hd))?
        .reshape((b, n * group, t, hd))
}

/// 0 on and below the diagonal, −∞ above it.
fn causal_mask(t: usize, device: &Device) -> candle_core::Result<Tensor> {
    let values: Vec<f32> = (0..t)
        .flat_map(|i| (0..t).map(move |j| if j <= i { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Tensor::from_vec(values, (t, t), device)
}

/// The reference's rotary tables: angle = position · theta^(−2i/head_dim) in f64, cast to f32.
pub fn rope_tables(config: &ModelConfig, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let hd = config.head_dim();
    let half = hd / 2;
    let mut cos = Vec::with_capacity(config.context_len * half);
    let mut sin = Vec::with_capacity(config.context_len * half);
    for position in 0..config.context_len {
        for i in 0..half {
            let exponent = -((2 * i) as f64) / hd as f64;
            let angle = position as f64 * f64::from(config.rope_theta).powf(exponent);
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (config.context_len, half), device)?,
        Tensor::from_vec(sin, (config.context_len, half), device)?,
    ))
}
