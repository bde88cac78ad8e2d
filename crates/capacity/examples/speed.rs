//! Times one simulation of N requests of the poisson preset (default 1,000,000) on the tiny
//! model, continuous batching of 64 sequences: `cargo run --release -p capacity --example
//! speed -- 1000000`. The criterion benchmark (crates/bench/benches/capacity.rs) is the
//! measurement of record; this is the quick check.

use std::time::Instant;

use capacity::{
    simulate, Batching, HardwareProfile, ModelProfile, ServingPolicy, TraceSpec, WeightPath,
};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let spec = TraceSpec {
        requests: n,
        ..TraceSpec::preset("poisson").unwrap()
    };
    let trace = spec.generate().unwrap();
    let policy = ServingPolicy {
        batching: Batching::Continuous,
        max_sequences: 64,
        block_size: 16,
        weights: WeightPath::Full,
    };
    let hw = HardwareProfile::preset("lab-cpu").unwrap();
    let start = Instant::now();
    let out = simulate(&trace, &hw, &ModelProfile::tiny(), &policy).unwrap();
    println!(
        "{n} requests: {:.3} s, {} iterations, simulated {:.0} s",
        start.elapsed().as_secs_f64(),
        out.iterations,
        out.end_s - out.first_arrival_s
    );
}
