//! The CPU reference forward pass: prefill (the whole prompt, causal mask) and decode (one
//! token against the KV cache) are the same code over a block of positions.
//!
//! Matrix products share loads across positions and rows, attention takes four query rows
//! at a time over keys stored transposed, and `exp` is a polynomial over eight lanes; long
//! blocks are split over two threads. Every output value is summed in an order that depends
//! on neither the block, nor the thread split, nor the CPU's vector width, so prefill,
//! decode and every machine give bit-identical logits.

use std::ops::Range;

use crate::packed::{Packed, PackedLayer, PackedWeights};
use crate::parallel::{self, Barrier};
use crate::simd::{exp, finish, Lanes, Portable};
use crate::weights::Layer;
use crate::{KvCache, ModelConfig, ModelError, Weights};

/// Blocks of at least this many positions are split over two threads (when the CPU has
/// two cores); shorter ones, decode steps among them, stay on the calling thread.
const PARALLEL_MIN: usize = 16;

/// The model with its KV cache and scratch memory, ready to run.
pub struct Transformer {
    config: ModelConfig,
    weights: Weights,
    /// Names the weights in run records: the SHA-256 of the safetensors bytes.
    weights_hash: String,
    /// The matrices transposed for the kernels.
    packed: PackedWeights,
    cache: KvCache,
    rope: Rope,
    logits: Vec<f32>,
    block: Block,
    /// [`PARALLEL_MIN`], lowered or raised by tests.
    parallel_min: usize,
    /// Portable lanes even where AVX is there (tests compare the two).
    portable: bool,
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
        let (cos, sin) = config.rope_tables();
        Rope {
            half: config.head_dim() / 2,
            cos,
            sin,
        }
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

/// Per-position activations of one block of positions (`[n][width]` each), kept between
/// calls so that a decode step allocates nothing.
#[derive(Default)]
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
    /// Attention scores of up to four query rows, one buffer per thread.
    scores: [Vec<f32>; 2],
}

impl Block {
    fn resize(&mut self, c: &ModelConfig, n: usize) {
        let (d, kv, ff) = (c.d_model, c.kv_dim(), c.d_ff);
        for (buffer, width) in [
            (&mut self.x, d),
            (&mut self.normed, d),
            (&mut self.q, d),
            (&mut self.k, kv),
            (&mut self.v, kv),
            (&mut self.attended, d),
            (&mut self.projected, d),
            (&mut self.gate, ff),
            (&mut self.up, ff),
        ] {
            buffer.resize(n * width, 0.0);
        }
        for scores in &mut self.scores {
            scores.resize(ROWS * c.context_len.next_multiple_of(8), 0.0);
        }
    }
}

impl Transformer {
    /// Loads a safetensors file (f32 or int8) for `config`.
    pub fn from_safetensors(config: ModelConfig, bytes: &[u8]) -> Result<Transformer, ModelError> {
        let weights = Weights::from_safetensors(&config, bytes)?;
        let hash = crate::sha256_hex(bytes);
        Ok(Transformer::new(config, weights, hash))
    }

    /// Wraps weights that are already checked against `config` (a config that passed
    /// [`ModelConfig::validate`]), as [`Weights::from_safetensors`] checks them;
    /// `weights_hash` names them.
    pub fn new(config: ModelConfig, weights: Weights, weights_hash: String) -> Transformer {
        Transformer {
            cache: KvCache::new(&config),
            rope: Rope::new(&config),
            packed: PackedWeights::new(&weights),
            logits: vec![0.0; config.vocab_size],
            block: Block::default(),
            parallel_min: PARALLEL_MIN,
            portable: false,
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
        let n = tokens.len();
        let first = match outputs {
            Outputs::Last => n - 1,
            Outputs::Every => 0,
        };
        self.logits.resize((n - first) * c.vocab_size, 0.0);
        self.block.resize(c, n);
        let b = &mut self.block;
        let (keys, values) = self.cache.storage_mut();
        let [scores0, scores1] = &mut b.scores;
        let pass = Pass {
            c,
            weights: &self.weights,
            packed: &self.packed,
            rope: &self.rope,
            tokens,
            start,
            first,
            portable: self.portable,
            x: Raw::new(&mut b.x),
            normed: Raw::new(&mut b.normed),
            q: Raw::new(&mut b.q),
            k: Raw::new(&mut b.k),
            v: Raw::new(&mut b.v),
            attended: Raw::new(&mut b.attended),
            projected: Raw::new(&mut b.projected),
            gate: Raw::new(&mut b.gate),
            up: Raw::new(&mut b.up),
            scores: [Raw::new(scores0), Raw::new(scores1)],
            keys: Raw::new(keys),
            values: Raw::new(values),
            logits: Raw::new(&mut self.logits),
        };
        let task =
            |thread: usize, threads: usize, barrier: &Barrier| pass.run(thread, threads, barrier);
        if n >= self.parallel_min {
            parallel::run(&task);
        } else {
            task(0, 1, &Barrier::new(1));
        }
        // On an error the positions are not added to the cache: the next call writes them
        // again.
        check_logits(&self.logits, c.vocab_size, start + first)?;
        self.cache.advance(n);
        Ok(&self.logits)
    }
}

/// Checks that every logit is finite: `logits` is `[positions][vocab]`, its first row the
/// logits after position `first_position`. A non-finite logit (weights or activations that
/// overflowed f32) is an error naming the first such position, never a distribution.
/// Every forward pass (CPU and GPU) checks its logits with this before returning them.
pub fn check_logits(logits: &[f32], vocab: usize, first_position: usize) -> Result<(), ModelError> {
    match logits.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(at) => Err(ModelError::NonFiniteLogit {
            position: first_position + at / vocab.max(1),
            id: at % vocab.max(1),
            value: logits[at],
        }),
    }
}

/// Query rows (position, head) that attention takes together, sharing key and value loads.
const ROWS: usize = 4;

/// A buffer that the threads of a pass share. Between two barriers each thread touches
/// only its own disjoint ranges (see [`Pass::run_with`]), or only reads.
#[derive(Clone, Copy)]
struct Raw {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: access is coordinated by the pass (disjoint ranges, barriers between phases).
unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

impl Raw {
    fn new(v: &mut [f32]) -> Raw {
        Raw {
            ptr: v.as_mut_ptr(),
            len: v.len(),
        }
    }

    /// # Safety
    /// No other reference to any of `range` may be alive while the result is.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice<'a>(self, range: Range<usize>) -> &'a mut [f32] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: in bounds (asserted); exclusive by the caller's guarantee.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    /// # Safety
    /// Nothing may write to the buffer while the result is alive.
    unsafe fn view<'a>(self) -> &'a [f32] {
        // SAFETY: the whole buffer; shared by the caller's guarantee.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// One forward pass over a block of positions, run by one thread or split over two.
struct Pass<'a> {
    c: &'a ModelConfig,
    weights: &'a Weights,
    packed: &'a PackedWeights,
    rope: &'a Rope,
    tokens: &'a [u32],
    /// Position of the block's first token.
    start: usize,
    /// The first position of the block that gets logits.
    first: usize,
    portable: bool,
    x: Raw,
    normed: Raw,
    q: Raw,
    k: Raw,
    v: Raw,
    attended: Raw,
    projected: Raw,
    gate: Raw,
    up: Raw,
    scores: [Raw; 2],
    keys: Raw,
    values: Raw,
    logits: Raw,
}

/// The part of `0..n` that `thread` of `threads` takes, cut at multiples of `align`.
fn share(n: usize, thread: usize, threads: usize, align: usize) -> Range<usize> {
    let cut = |i: usize| (n * i / threads).next_multiple_of(align).min(n);
    cut(thread)..cut(thread + 1)
}

/// The `[n][width]` rows of `positions`.
fn rows(positions: &Range<usize>, width: usize) -> Range<usize> {
    positions.start * width..positions.end * width
}

impl Pass<'_> {
    fn matmul(&self, m: &Packed, xs: &[f32], out: &mut [f32]) {
        if self.portable {
            m.matmul_portable(xs, out);
        } else {
            m.matmul(xs, out);
        }
    }

    fn run(&self, thread: usize, threads: usize, barrier: &Barrier) {
        #[cfg(target_arch = "x86_64")]
        if !self.portable && std::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX, checked just above.
            return unsafe { self.run_avx(thread, threads, barrier) };
        }
        self.run_with::<Portable>(thread, threads, barrier);
    }

    /// `run_with` compiled for AVX: the same lane operations in the same order, so the same
    /// bits, twice as wide.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    unsafe fn run_avx(&self, thread: usize, threads: usize, barrier: &Barrier) {
        self.run_with::<Portable>(thread, threads, barrier);
    }

    /// Every layer in three phases. A: norm, q/k/v and rotary embeddings of this thread's
    /// positions. B (after a barrier): this thread's KV heads write the block's keys and
    /// values to the cache and attend, for every position. C (after a barrier): output
    /// projection and MLP of this thread's positions, which the next layer's phase A reads
    /// without a barrier. Every value is computed by one thread, in an order that does not
    /// depend on the split, so one thread and two give the same bits.
    #[inline(always)]
    fn run_with<V: Lanes>(&self, thread: usize, threads: usize, barrier: &Barrier) {
        let c = self.c;
        let d = c.d_model;
        let n = self.tokens.len();
        let positions = share(n, thread, threads, 4);
        let kv_heads = share(c.n_kv_heads, thread, threads, 1);
        // SAFETY (every block below): between barriers this thread writes only the rows of
        // `positions` (phases A and C), or the cache slabs and attention outputs of
        // `kv_heads` (phase B); what it reads from other threads was written before the
        // barrier that separates the phases.
        let x = unsafe { self.x.slice(rows(&positions, d)) };
        for (t, row) in positions.clone().zip(x.chunks_exact_mut(d)) {
            self.weights.embed.row(self.tokens[t] as usize, row);
        }
        for (l, (layer, packed)) in self
            .weights
            .layers
            .iter()
            .zip(&self.packed.layers)
            .enumerate()
        {
            unsafe { self.project_qkv(layer, packed, &positions) };
            barrier.wait();
            unsafe { self.attend::<V>(l, kv_heads.clone(), thread) };
            barrier.wait();
            unsafe { self.mlp::<V>(layer, packed, &positions) };
        }
        unsafe { self.logits(&positions) };
    }

    /// Phase A.
    #[inline(always)]
    unsafe fn project_qkv(&self, layer: &Layer, packed: &PackedLayer, positions: &Range<usize>) {
        let c = self.c;
        let (d, kv, hd) = (c.d_model, c.kv_dim(), c.head_dim());
        // SAFETY: this thread's rows (see `run_with`).
        let (x, normed, q, k, v) = unsafe {
            (
                &*self.x.slice(rows(positions, d)),
                self.normed.slice(rows(positions, d)),
                self.q.slice(rows(positions, d)),
                self.k.slice(rows(positions, kv)),
                self.v.slice(rows(positions, kv)),
            )
        };
        norm_block(x, &layer.attn_norm, c.norm_eps, normed);
        self.matmul(&packed.q, normed, q);
        self.matmul(&packed.k, normed, k);
        self.matmul(&packed.v, normed, v);
        for ((t, q), k) in positions
            .clone()
            .zip(q.chunks_exact_mut(d))
            .zip(k.chunks_exact_mut(kv))
        {
            for head in q.chunks_exact_mut(hd).chain(k.chunks_exact_mut(hd)) {
                self.rope.rotate(head, self.start + t);
            }
        }
    }

    /// Phase B: causal attention, position `start + t` seeing positions `0..=start + t`.
    #[inline(always)]
    unsafe fn attend<V: Lanes>(&self, l: usize, kv_heads: Range<usize>, thread: usize) {
        let c = self.c;
        let (d, kv, hd, ctx) = (c.d_model, c.kv_dim(), c.head_dim(), c.context_len);
        let group = c.group_size();
        let n = self.tokens.len();
        let slab = ctx * hd;
        // SAFETY: q, k and v were written before the barrier and are only read now; the
        // slabs, output slots and score buffer are this thread's (see `run_with`).
        let (q, k, v, scores) = unsafe {
            (
                self.q.view(),
                self.k.view(),
                self.v.view(),
                self.scores[thread].slice(0..self.scores[thread].len),
            )
        };
        for g in kv_heads {
            let at = (l * c.n_kv_heads + g) * slab;
            let (keys, values) = unsafe {
                (
                    self.keys.slice(at..at + slab),
                    self.values.slice(at..at + slab),
                )
            };
            for t in 0..n {
                let p = self.start + t;
                let from = t * kv + g * hd;
                for (i, &key) in k[from..from + hd].iter().enumerate() {
                    keys[i * ctx + p] = key;
                }
                values[p * hd..(p + 1) * hd].copy_from_slice(&v[from..from + hd]);
            }
            let (keys, values) = (&*keys, &*values);
            // Rows (t, h) for the group's query heads, position-major, four at a time.
            let row = |r: usize| {
                let (t, h) = (r / group, g * group + r % group);
                let at = t * d + h * hd;
                (&q[at..at + hd], self.start + t + 1, at)
            };
            let heads = Heads {
                keys,
                values,
                ctx,
                hd,
            };
            let mut r = 0;
            while r < n * group {
                let m = (n * group - r).min(ROWS);
                macro_rules! rows {
                    ($m:literal) => {{
                        let picked: [_; $m] = std::array::from_fn(|j| row(r + j));
                        // SAFETY: each (t, h) output slot belongs to this thread alone.
                        let out =
                            picked.map(|(_, _, at)| unsafe { self.attended.slice(at..at + hd) });
                        heads.attend::<V, $m>(
                            picked.map(|(q, _, _)| q),
                            picked.map(|(_, visible, _)| visible),
                            scores,
                            out,
                        );
                    }};
                }
                match m {
                    4 => rows!(4),
                    3 => rows!(3),
                    2 => rows!(2),
                    _ => rows!(1),
                }
                r += m;
            }
        }
    }

    /// Phase C: output projection and MLP, both with their residuals.
    #[inline(always)]
    unsafe fn mlp<V: Lanes>(&self, layer: &Layer, packed: &PackedLayer, positions: &Range<usize>) {
        let c = self.c;
        let (d, ff) = (c.d_model, c.d_ff);
        // SAFETY: this thread's rows (see `run_with`).
        let (x, normed, attended, projected, gate, up) = unsafe {
            (
                self.x.slice(rows(positions, d)),
                self.normed.slice(rows(positions, d)),
                &*self.attended.slice(rows(positions, d)),
                self.projected.slice(rows(positions, d)),
                self.gate.slice(rows(positions, ff)),
                self.up.slice(rows(positions, ff)),
            )
        };
        self.matmul(&packed.o, attended, projected);
        for (x, p) in x.iter_mut().zip(&*projected) {
            *x += p;
        }
        norm_block(x, &layer.mlp_norm, c.norm_eps, normed);
        self.matmul(&packed.gate, normed, gate);
        self.matmul(&packed.up, normed, up);
        swiglu::<V>(gate, up);
        self.matmul(&packed.down, gate, projected);
        for (x, p) in x.iter_mut().zip(&*projected) {
            *x += p;
        }
    }

    /// The final norm and the logits of this thread's positions from `first` on.
    unsafe fn logits(&self, positions: &Range<usize>) {
        let c = self.c;
        let (d, vocab) = (c.d_model, c.vocab_size);
        let wanted = positions.start.max(self.first)..positions.end;
        if wanted.is_empty() {
            return;
        }
        let out = (wanted.start - self.first)..(wanted.end - self.first);
        // SAFETY: this thread's rows (see `run_with`).
        let (x, normed, logits) = unsafe {
            (
                &*self.x.slice(rows(&wanted, d)),
                self.normed.slice(rows(&wanted, d)),
                self.logits.slice(rows(&out, vocab)),
            )
        };
        norm_block(x, &self.weights.norm, c.norm_eps, normed);
        self.matmul(&self.packed.embed, normed, logits);
    }
}

/// One KV head's cache slabs: keys `[hd][ctx]`, values `[ctx][hd]`.
struct Heads<'a> {
    keys: &'a [f32],
    values: &'a [f32],
    ctx: usize,
    hd: usize,
}

impl Heads<'_> {
    /// Softmax attention of `M` query rows over the first `visible[j]` cached positions
    /// each. Per row the operations do not depend on `M` or on the other rows: a score is
    /// `(Σ_i q_i · k_i) · scale` summed over `i` in order; the softmax total sums position
    /// `p` into lane `p mod 8`, then the lanes; an output is `(Σ_p e_p · v_p) / total`
    /// summed over `p` in order. So decode (one position) and prefill give the same bits.
    #[inline(always)]
    fn attend<V: Lanes, const M: usize>(
        &self,
        q: [&[f32]; M],
        visible: [usize; M],
        scores: &mut [f32],
        mut out: [&mut [f32]; M],
    ) {
        let (ctx, hd) = (self.ctx, self.hd);
        let scale = 1.0 / (hd as f32).sqrt();
        let most = visible.iter().copied().max().unwrap_or(0);
        let least = visible.iter().copied().min().unwrap_or(0);
        let stride = most.next_multiple_of(8);
        assert!(
            most <= ctx
                && scores.len() >= M * stride
                && self.keys.len() >= hd * ctx
                && self.values.len() >= ctx * hd
                && q.iter().all(|q| q.len() == hd)
                && out.iter().all(|o| o.len() == hd)
        );

        // Scores, eight (or sixteen) positions at a time; lanes past a row's visible
        // positions are computed and ignored.
        let kp = self.keys.as_ptr();
        let mut block = 0;
        while block < most {
            if block + 8 < most && block + 16 <= ctx {
                let mut acc = [[V::zero(); M]; 2];
                for i in 0..hd {
                    // SAFETY: i < hd and block + 16 <= ctx, inside the slab (asserted).
                    let k = unsafe {
                        [
                            V::load_ptr(kp.add(i * ctx + block)),
                            V::load_ptr(kp.add(i * ctx + block + 8)),
                        ]
                    };
                    for (j, q) in q.iter().enumerate() {
                        let qi = V::splat(q[i]);
                        acc[0][j] = acc[0][j].add(qi.mul(k[0]));
                        acc[1][j] = acc[1][j].add(qi.mul(k[1]));
                    }
                }
                for (half, acc) in acc.iter().enumerate() {
                    for (j, acc) in acc.iter().enumerate() {
                        let at = j * stride + block + 8 * half;
                        acc.mul(V::splat(scale)).store(&mut scores[at..at + 8]);
                    }
                }
                block += 16;
            } else {
                let mut acc = [V::zero(); M];
                for i in 0..hd {
                    let k = if block + 8 <= ctx {
                        // SAFETY: i < hd and block + 8 <= ctx, inside the slab (asserted).
                        unsafe { V::load_ptr(kp.add(i * ctx + block)) }
                    } else {
                        let row = &self.keys[i * ctx + block..(i + 1) * ctx];
                        let mut padded = [0.0; 8];
                        padded[..row.len()].copy_from_slice(row);
                        V::load(&padded)
                    };
                    for (acc, q) in acc.iter_mut().zip(&q) {
                        *acc = acc.add(V::splat(q[i]).mul(k));
                    }
                }
                for (j, acc) in acc.iter().enumerate() {
                    let at = j * stride + block;
                    acc.mul(V::splat(scale)).store(&mut scores[at..at + 8]);
                }
                block += 8;
            }
        }

        // Softmax, row by row: scores become e^(s - max); `total` is their sum.
        let mut total = [0.0f32; M];
        for (j, total) in total.iter_mut().enumerate() {
            let s = &mut scores[j * stride..j * stride + visible[j]];
            // The largest score (exact in any order): lanes, then across them.
            let mut top = V::splat(f32::NEG_INFINITY);
            let mut chunks = s.chunks_exact(8);
            for chunk in &mut chunks {
                top = top.max(V::load(chunk));
            }
            let max = chunks
                .remainder()
                .iter()
                .chain(&top.to_array())
                .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
            let mut sum = V::zero();
            let mut chunks = s.chunks_exact_mut(8);
            for chunk in &mut chunks {
                let e = exp(V::load(chunk).sub(V::splat(max)));
                e.store(chunk);
                sum = sum.add(e);
            }
            let rest = chunks.into_remainder();
            if !rest.is_empty() {
                let mut padded = [max; 8];
                padded[..rest.len()].copy_from_slice(rest);
                let mut e = exp(V::load(&padded).sub(V::splat(max))).to_array();
                e[rest.len()..].fill(0.0);
                rest.copy_from_slice(&e[..rest.len()]);
                sum = sum.add(V::load(&e));
            }
            *total = finish(sum.to_array(), 0.0);
        }

        // Weighted values, eight (or sixteen) dimensions at a time, then a scalar tail.
        let body = hd - hd % 8;
        let mut at = 0;
        while at < body {
            if at + 16 <= body {
                self.weigh::<V, M, 2>(at, scores, stride, visible, least, &total, &mut out);
                at += 16;
            } else {
                self.weigh::<V, M, 1>(at, scores, stride, visible, least, &total, &mut out);
                at += 8;
            }
        }
        for i in body..hd {
            for (j, out) in out.iter_mut().enumerate() {
                let mut a = 0.0;
                for p in 0..visible[j] {
                    a += scores[j * stride + p] * self.values[p * hd + i];
                }
                out[i] = a / total[j];
            }
        }
    }

    /// Dimensions `at..at + 8 · W` of the outputs: `Σ_p e_p · v_p` in order of `p`, over
    /// the positions every row sees together, then each row's own, divided by the total.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn weigh<V: Lanes, const M: usize, const W: usize>(
        &self,
        at: usize,
        scores: &[f32],
        stride: usize,
        visible: [usize; M],
        least: usize,
        total: &[f32; M],
        out: &mut [&mut [f32]; M],
    ) {
        let hd = self.hd;
        let vp = self.values.as_ptr();
        let sp = scores.as_ptr();
        let mut acc = [[V::zero(); W]; M];
        for p in 0..least {
            // SAFETY: p < ctx and at + 8 · W <= hd, inside the slab (asserted by `attend`).
            let mut v = [V::zero(); W];
            for (w, v) in v.iter_mut().enumerate() {
                *v = unsafe { V::load_ptr(vp.add(p * hd + at + 8 * w)) };
            }
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: p < least <= visible[j] <= stride, inside row j's scores.
                let e = V::splat(unsafe { *sp.add(j * stride + p) });
                for (acc, v) in acc.iter_mut().zip(&v) {
                    *acc = acc.add(e.mul(*v));
                }
            }
        }
        for (j, acc) in acc.iter_mut().enumerate() {
            for p in least..visible[j] {
                let e = V::splat(scores[j * stride + p]);
                for (w, acc) in acc.iter_mut().enumerate() {
                    let from = p * hd + at + 8 * w;
                    *acc = acc.add(e.mul(V::load(&self.values[from..from + 8])));
                }
            }
            for (w, acc) in acc.iter().enumerate() {
                let to = at + 8 * w;
                acc.div(V::splat(total[j])).store(&mut out[j][to..to + 8]);
            }
        }
    }
}

/// SwiGLU in place: `gate = gate / (1 + e^-gate) · up`, eight lanes at a time.
#[inline(always)]
fn swiglu<V: Lanes>(gate: &mut [f32], up: &[f32]) {
    let mut gates = gate.chunks_exact_mut(8);
    let mut ups = up.chunks_exact(8);
    for (g, u) in (&mut gates).zip(&mut ups) {
        swiglu_lanes(V::load(g), V::load(u)).store(g);
    }
    let (g, u) = (gates.into_remainder(), ups.remainder());
    if !g.is_empty() {
        let (mut gp, mut up) = ([0.0; 8], [0.0; 8]);
        gp[..g.len()].copy_from_slice(g);
        up[..u.len()].copy_from_slice(u);
        let r = swiglu_lanes(V::load(&gp), V::load(&up)).to_array();
        g.copy_from_slice(&r[..g.len()]);
    }
}

#[inline(always)]
fn swiglu_lanes<V: Lanes>(g: V, u: V) -> V {
    g.div(V::splat(1.0).add(exp(g.mul(V::splat(-1.0))))).mul(u)
}

/// RMSNorm of every position of a block (`[n][d]` in and out).
fn norm_block(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let d = weight.len();
    for (x, out) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        rms_norm(x, weight, eps, out);
    }
}

/// A mean square beyond f32 (activations near f32's limit, from absurd weights) would make
/// the scale exactly 0 and the output exactly 0, a silently uniform distribution downstream;
/// NaN instead carries the overflow to the logits, where [`check_logits`] names it.
fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let mean_square = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let scale = if mean_square.is_finite() {
        1.0 / (mean_square + eps).sqrt()
    } else {
        f32::NAN
    };
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * scale * w;
    }
}

impl policy::LanguageModel for Transformer {
    type Error = ModelError;

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

    fn prefill(&mut self, prompt: &[u32]) -> Result<&[f32], ModelError> {
        Transformer::prefill(self, prompt)
    }

    fn decode_step(&mut self, token: u32) -> Result<&[f32], ModelError> {
        Transformer::decode_step(self, token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Linear;

    fn config(n_kv_heads: usize) -> ModelConfig {
        ModelConfig {
            name: "test".into(),
            vocab_size: 50,
            d_model: 40,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads,
            d_ff: 52,
            context_len: 83,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            files: Vec::new(),
        }
    }

    fn weights(c: &ModelConfig) -> Weights {
        let mut seed = 12_345u32;
        let linear = |rows: usize, cols: usize| {
            let data = (0..rows * cols)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                })
                .collect();
            Linear::F32 { rows, cols, data }
        };
        Weights::from_fn(c, linear)
    }

    /// Prefill of every length in one block, split over threads or not, with AVX or
    /// without, gives exactly the bits of decoding one position at a time.
    #[test]
    fn every_split_and_every_lane_width_gives_the_same_bits() {
        for (c, w) in [1, 2, 4].into_iter().flat_map(|kv_heads| {
            let c = config(kv_heads);
            let w = weights(&c);
            [(c.clone(), w.quantized()), (c, w)]
        }) {
            let tokens: Vec<u32> = (0..c.context_len as u32).map(|i| i * 7 % 50).collect();
            let mut decoded = Transformer::new(c.clone(), w.clone(), "t".into());
            let mut expected = decoded.prefill(&tokens[..1]).unwrap().to_vec();
            for &t in &tokens[1..] {
                expected.extend_from_slice(decoded.decode_step(t).unwrap());
            }
            for (parallel_min, portable) in [(1, false), (usize::MAX, false), (1, true)] {
                let mut m = Transformer::new(c.clone(), w.clone(), "t".into());
                m.parallel_min = parallel_min;
                m.portable = portable;
                assert_eq!(m.prefill_all(&tokens).unwrap(), expected);
                // A prompt, then decode steps, then a block appended to the cache.
                m.prefill(&tokens[..37]).unwrap();
                for &t in &tokens[37..40] {
                    m.decode_step(t).unwrap();
                }
                let at = 70 * c.vocab_size;
                assert_eq!(
                    m.forward(&tokens[40..71], Outputs::Last).unwrap(),
                    &expected[at..at + c.vocab_size]
                );
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            let split = parallel::SPLIT_RUNS.load(std::sync::atomic::Ordering::Relaxed);
            assert!(split > 0, "the two-thread path never ran");
        }
    }
}
