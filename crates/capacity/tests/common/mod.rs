//! What the plan and reference tests share, and the `kv_pressure` example (which includes
//! this file by path). Each of them uses part of it.
#![allow(dead_code)]

use capacity::{Arrivals, Batching, LengthDist, ServingPolicy, SliceMix, TraceSpec, WeightPath};

/// A serving policy on full-precision weights with KV blocks of 16 tokens.
pub fn policy(batching: Batching, max_sequences: u32) -> ServingPolicy {
    ServingPolicy {
        batching,
        max_sequences,
        block_size: 16,
        weights: WeightPath::Full,
    }
}

/// The whole trace in one slice, "en".
pub fn one_slice() -> Vec<SliceMix> {
    vec![SliceMix {
        slice: "en".into(),
        share: 1.0,
        prompt_scale: 1.0,
    }]
}

/// ShareGPT-like chat (the vLLM paper's workload): `requests` Poisson arrivals at
/// `rate_per_s`, prompts and outputs log-normal around 160 and 200 tokens.
pub fn sharegpt_like(requests: u64, rate_per_s: f64) -> TraceSpec {
    TraceSpec {
        name: "sharegpt-like".into(),
        requests,
        seed: 13,
        arrivals: Arrivals::Poisson { rate_per_s },
        prompt_tokens: LengthDist::LogNormal {
            median: 160.0,
            sigma: 1.0,
            min: 4,
            max: 1024,
        },
        output_tokens: LengthDist::LogNormal {
            median: 200.0,
            sigma: 0.9,
            min: 1,
            max: 1024,
        },
        slices: one_slice(),
        shared_prefixes: None,
    }
}
