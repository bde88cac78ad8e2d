//! Times one simulation of N requests (default 1,000,000) on the tiny model, continuous
//! batching of 64 sequences: the poisson preset on one replica, or with a replica count and
//! a router, the chat-prefix preset at that many times the rate on that many replicas with
//! prefix caches: `cargo run --release -p capacity --example speed -- 1000000 [8 kv-aware]`.
//! The criterion benchmark (crates/bench/benches/capacity.rs) is the measurement of
//! record; this is the quick check.

use std::time::Instant;

use capacity::{
    simulate_fleet, Batching, Fleet, HardwareProfile, ModelProfile, Router, ServingPolicy,
    TraceSpec, WeightPath,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let replicas: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let router: Router = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(Router::RoundRobin);
    let mut spec = TraceSpec {
        requests: n,
        ..TraceSpec::preset(if replicas == 1 {
            "poisson"
        } else {
            "chat-prefix"
        })
        .unwrap()
    };
    let rate = spec.arrivals.mean_rate() * replicas as f64;
    spec.arrivals.set_mean_rate(rate);
    let trace = spec.generate().unwrap();
    let policy = ServingPolicy {
        batching: Batching::Continuous,
        max_sequences: 64,
        block_size: 16,
        weights: WeightPath::Full,
    };
    let fleet = Fleet {
        replicas,
        router,
        prefix_cache: replicas > 1,
        ..Fleet::single()
    };
    let hw = HardwareProfile::preset("lab-cpu").unwrap();
    let start = Instant::now();
    let out = simulate_fleet(&trace, &hw, &ModelProfile::tiny(), &policy, &fleet).unwrap();
    println!(
        "{n} requests on {replicas} replica(s), {router}: {:.3} s, {} iterations, simulated {:.0} s, prefix hits {:.3}",
        start.elapsed().as_secs_f64(),
        out.iterations,
        out.end_s - out.first_arrival_s,
        out.prefix_cache_hit_rate()
    );
}
