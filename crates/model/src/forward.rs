//! The CPU reference forward pass: prefill (the whole prompt, causal mask) and decode (one
//! token against the KV cache) are the same code over a block of positions.

use crate::weights::{dot, Layer};
use crate::{KvCache, ModelConfig, ModelError, Weights};

/// The model with its KV cache and scratch memory, ready to run.
pub struct Transformer {
    config: ModelConfig,
    weights: Weights,
    /// Names the weights in run records: the SHA-256 of the safetensors bytes.
    weights_hash: String,
    cache: KvCache,
    rope: Rope,
    logits: Vec<f32>,
}

/// Rotary position embeddings, "rotate half" convention: the pair (i, i + head_dim / 2)
/// of every head turns by `position · theta^(-2i / head_dim)`.
struct Rope {
    half: usize,
    /// cos and sin of every position and pair: `[context_len][head_dim / 2]`.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    fn new(config: &ModelConfig) -> Rope {
        let half = config.head_dim() / 2;
        let mut cos = Vec::with_capacity(config.context_len * half);
        let mut sin = Vec::with_capacity(config.context_len * half);
        for position in 0..config.context_len {
            for i in 0..half {
                let exponent = -((2 * i) as f64) / config.head_dim() as f64;
                let angle = position as f64 * f64::from(config.rope_theta).powf(exponent);
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        Rope { half, cos, sin }
    }

    fn rotate(&self, v: &mut [f32], position: usize) {
        let at = position * self.half;
        let (cos, sin) = (&self.cos[at..at + self.half], &self.sin[at..at + self.half]);
        for i in 0..self.half {
            let (a, b) = (v[i], v[i + self.half]);
            v[i] = a * cos[i] - b * sin[i];
            v[i + self.half] = a * sin[i] + b * cos[i];
        }
    }
}

/// Which positions of a block get logits.
#[derive(Clone, Copy)]
enum Outputs {
    Last,
    Every,
}

/// Per-position activations of one block of positions.
struct Block {
    x: Vec<f32>,
    normed: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attended: Vec<f32>,
    projected: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    scores: Vec<f32>,
}

impl Transformer {
    /// Loads a safetensors file (f32 or int8) for `config`.
    pub fn from_safetensors(config: ModelConfig, bytes: &[u8]) -> Result<Transformer, ModelError> {
        let weights = Weights::from_safetensors(&config, bytes)?;
        let hash = crate::sha256_hex(bytes);
        Ok(Transformer::new(config, weights, hash))
    }

    /// Wraps weights that are already checked against `config`; `weights_hash` names them.
    pub fn new(config: ModelConfig, weights: Weights, weights_hash: String) -> Transformer {
        Transformer {
            cache: KvCache::new(&config),
            rope: Rope::new(&config),
            logits: vec![0.0; config.vocab_size],
            config,
            weights,
            weights_hash,
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    pub fn weights_hash(&self) -> &str {
        &self.weights_hash
    }

    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Runs the whole prompt from position 0 (the cache is reset) and returns the logits
    /// at its last position.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], ModelError> {
        if prompt.is_empty() {
            return Err(ModelError::EmptyPrompt);
        }
        self.cache.clear();
        self.forward(prompt, Outputs::Last)
    }

    /// Like [`prefill`](Self::prefill), but returns the logits after every position of the
    /// prompt, `[prompt.len()][vocab]` flattened: what teacher-forced evaluation reads.
    pub fn prefill_all(&mut self, prompt: &[u32]) -> Result<&[f32], ModelError> {
        if prompt.is_empty() {
            return Err(ModelError::EmptyPrompt);
        }
        self.cache.clear();
        self.forward(prompt, Outputs::Every)
    }

    /// Appends one token at the next position and returns the logits that follow it.
    pub fn decode_step(&mut self, token: u32) -> Result<&[f32], ModelError> {
        self.forward(&[token], Outputs::Last)
    }

    /// Logits after every position of `tokens` run from an empty cache: the full
    /// recompute that prefill-then-decode must match. `[tokens.len()][vocab]`.
    pub fn logits_at_every_position(
        &mut self,
        tokens: &[u32],
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut all = Vec::with_capacity(tokens.len());
        for end in 1..=tokens.len() {
            all.push(self.prefill(&tokens[..end])?.to_vec());
        }
        Ok(all)
    }

    /// Runs `tokens` at positions `cache.len()..`, writing their keys and values.
    fn forward(&mut self, tokens: &[u32], outputs: Outputs) -> Result<&[f32], ModelError> {
        let c = &self.config;
        let start = self.cache.len();
        if start + tokens.len() > c.context_len {
            return Err(ModelError::ContextFull {
                needed: start + tokens.len(),
                context: c.context_len,
            });
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= c.vocab_size) {
            return Err(ModelError::TokenOutOfRange {
                id,
                vocab: c.vocab_size,
            });
        }
        let (n, d, kv, ff) = (tokens.len(), c.d_model, c.kv_dim(), c.d_ff);
        let mut b = Block {
            x: vec![0.0; n * d],
            normed: vec![0.0; n * d],
            q: vec![0.0; n * d],
            k: vec![0.0; n * kv],
            v: vec![0.0; n * kv],
            attended: vec![0.0; n * d],
            projected: vec![0.0; n * d],
            gate: vec![0.0; n * ff],
            up: vec![0.0; n * ff],
            scores: vec![0.0; start + n],
        };
        for (t, &token) in tokens.iter().enumerate() {
            self.weights
                .embed
                .row(token as usize, &mut b.x[t * d..(t + 1) * d]);
        }
        for (l, layer) in self.weights.layers.iter().enumerate() {
            attention(c, layer, l, start, &mut b, &mut self.cache, &self.rope);
            mlp(c, layer, &mut b);
        }
        self.cache.advance(n);
        let first = match outputs {
            Outputs::Last => n - 1,
            Outputs::Every => 0,
        };
        let vocab = c.vocab_size;
        self.logits.resize((n - first) * vocab, 0.0);
        let mut normed = vec![0.0; d];
        for (i, t) in (first..n).enumerate() {
            rms_norm(
                &b.x[t * d..(t + 1) * d],
                &self.weights.norm,
                c.norm_eps,
                &mut normed,
            );
            let out = &mut self.logits[i * vocab..(i + 1) * vocab];
            self.weights.embed.matvec(&normed, out);
        }
        Ok(&self.logits)
    }
}

/// RMSNorm of every position of a block (`[n][d]` in and out).
fn norm_block(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let d = weight.len();
    for (x, out) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        rms_norm(x, weight, eps, out);
    }
}

fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let mean_square = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let scale = 1.0 / (mean_square + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * scale * w;
    }
}

fn attention(
    c: &ModelConfig,
    layer: &Layer,
    l: usize,
    start: usize,
    b: &mut Block,
    cache: &mut KvCache,
    rope: &Rope,
) {
    let (d, kv, hd) = (c.d_model, c.kv_dim(), c.head_dim());
    let n = b.x.len() / d;
    norm_block(&b.x, &layer.attn_norm, c.norm_eps, &mut b.normed);
    layer.q.matmul(&b.normed, &mut b.q);
    layer.k.matmul(&b.normed, &mut b.k);
    layer.v.matmul(&b.normed, &mut b.v);
    for t in 0..n {
        let position = start + t;
        for h in 0..c.n_heads {
            rope.rotate(&mut b.q[t * d + h * hd..t * d + (h + 1) * hd], position);
        }
        for h in 0..c.n_kv_heads {
            let k = &mut b.k[t * kv + h * hd..t * kv + (h + 1) * hd];
            rope.rotate(k, position);
            cache.write(
                l,
                h,
                position,
                k,
                &b.v[t * kv + h * hd..t * kv + (h + 1) * hd],
            );
        }
    }
    // Causal attention: position `start + t` sees positions 0..=start + t.
    let scale = 1.0 / (hd as f32).sqrt();
    for t in 0..n {
        let visible = start + t + 1;
        for h in 0..c.n_heads {
            let (keys, values) = cache.head(l, h / c.group_size(), visible);
            let q = &b.q[t * d + h * hd..t * d + (h + 1) * hd];
            let scores = &mut b.scores[..visible];
            for (p, s) in scores.iter_mut().enumerate() {
                *s = dot(q, &keys[p * hd..(p + 1) * hd]) * scale;
            }
            let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
            let mut total = 0.0;
            for s in scores.iter_mut() {
                *s = (*s - max).exp();
                total += *s;
            }
            let out = &mut b.attended[t * d + h * hd..t * d + (h + 1) * hd];
            out.fill(0.0);
            for (p, &s) in scores.iter().enumerate() {
                let weight = s / total;
                for (o, &v) in out.iter_mut().zip(&values[p * hd..(p + 1) * hd]) {
                    *o += weight * v;
                }
            }
        }
    }
    layer.o.matmul(&b.attended, &mut b.projected);
    for (x, p) in b.x.iter_mut().zip(&b.projected) {
        *x += p;
    }
}

fn mlp(c: &ModelConfig, layer: &Layer, b: &mut Block) {
    norm_block(&b.x, &layer.mlp_norm, c.norm_eps, &mut b.normed);
    layer.gate.matmul(&b.normed, &mut b.gate);
    layer.up.matmul(&b.normed, &mut b.up);
    for (g, &u) in b.gate.iter_mut().zip(&b.up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
    layer.down.matmul(&b.gate, &mut b.projected);
    for (x, p) in b.x.iter_mut().zip(&b.projected) {
        *x += p;
    }
}

impl policy::LanguageModel for Transformer {
    fn id(&self) -> policy::ArtifactId {
        policy::ArtifactId {
            name: self.config.name.clone(),
            hash: self.weights_hash.clone(),
        }
    }

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn context_len(&self) -> usize {
        self.config.context_len
    }

    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], String> {
        Transformer::prefill(self, prompt).map_err(|e| e.to_string())
    }

    fn decode_step(&mut self, token: u32) -> Result<&[f32], String> {
        Transformer::decode_step(self, token).map_err(|e| e.to_string())
    }
}
