//! What the plan and reference tests share.

use capacity::{Batching, ServingPolicy, WeightPath};

/// A serving policy on full-precision weights with KV blocks of 16 tokens.
pub fn policy(batching: Batching, max_sequences: u32) -> ServingPolicy {
    ServingPolicy {
        batching,
        max_sequences,
        block_size: 16,
        weights: WeightPath::Full,
    }
}
