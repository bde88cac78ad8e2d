//! The KV cache, preallocated to the context length.
//!
//! Layout, f32, one sequence (B = 1): values `[layer][kv_head][position][head_dim]`, keys
//! transposed within each head, `[layer][kv_head][head_dim][position]`, so that attention
//! scores eight positions at once with one load per key dimension. Each (layer, KV head)
//! is one contiguous slab of `S · d_head` floats in both. Allocated bytes are exactly
//! `2 · L · B · S · H_kv · d_head · q` with q = 4.

use crate::ModelConfig;

#[derive(Clone, Debug)]
pub struct KvCache {
    keys: Vec<f32>,
    values: Vec<f32>,
    context_len: usize,
    /// Positions written so far.
    len: usize,
}

impl KvCache {
    /// The cache for `config`, which must have passed [`ModelConfig::validate`] (as every
    /// config read from a file has): the size comes from its shapes, bounded there.
    pub fn new(config: &ModelConfig) -> KvCache {
        let size = config.n_layers * config.n_kv_heads * config.context_len * config.head_dim();
        KvCache {
            keys: vec![0.0; size],
            values: vec![0.0; size],
            context_len: config.context_len,
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

    /// Keys and values, whole: the forward pass writes and reads slab `(layer, kv_head)` at
    /// `(layer · n_kv_heads + kv_head) · context_len · head_dim`, disjoint slabs from
    /// different threads.
    pub(crate) fn storage_mut(&mut self) -> (&mut [f32], &mut [f32]) {
        (&mut self.keys, &mut self.values)
    }
}
