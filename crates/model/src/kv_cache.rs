//! The KV cache, preallocated to the context length.
//!
//! Layout, for keys and values alike: `[layer][kv_head][position][head_dim]`, f32, one
//! sequence (B = 1). A position's keys for one head are contiguous, and so are all the
//! positions of one head, which is what attention reads. Allocated bytes are exactly
//! `2 · L · B · S · H_kv · d_head · q` with q = 4.

use crate::ModelConfig;

#[derive(Clone, Debug)]
pub struct KvCache {
    keys: Vec<f32>,
    values: Vec<f32>,
    n_kv_heads: usize,
    context_len: usize,
    head_dim: usize,
    /// Positions written so far.
    len: usize,
}

impl KvCache {
    pub fn new(config: &ModelConfig) -> KvCache {
        let size = config.n_layers * config.n_kv_heads * config.context_len * config.head_dim();
        KvCache {
            keys: vec![0.0; size],
            values: vec![0.0; size],
            n_kv_heads: config.n_kv_heads,
            context_len: config.context_len,
            head_dim: config.head_dim(),
            len: 0,
        }
    }

    /// Bytes held by keys and values together.
    pub fn allocated_bytes(&self) -> usize {
        (self.keys.capacity() + self.values.capacity()) * std::mem::size_of::<f32>()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.context_len
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn advance(&mut self, positions: usize) {
        self.len += positions;
    }

    fn offset(&self, layer: usize, kv_head: usize, position: usize) -> usize {
        ((layer * self.n_kv_heads + kv_head) * self.context_len + position) * self.head_dim
    }

    pub(crate) fn write(
        &mut self,
        layer: usize,
        kv_head: usize,
        position: usize,
        key: &[f32],
        value: &[f32],
    ) {
        let at = self.offset(layer, kv_head, position);
        self.keys[at..at + self.head_dim].copy_from_slice(key);
        self.values[at..at + self.head_dim].copy_from_slice(value);
    }

    /// Keys and values of positions `0..positions` for one layer and KV head.
    pub(crate) fn head(&self, layer: usize, kv_head: usize, positions: usize) -> (&[f32], &[f32]) {
        let at = self.offset(layer, kv_head, 0);
        let end = at + positions * self.head_dim;
        (&self.keys[at..end], &self.values[at..end])
    }
}
