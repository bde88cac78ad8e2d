//! The simulator's speed under WebAssembly without any JavaScript glue: a cdylib with plain
//! exports, `prepare(n, replicas)` (draws n requests: the poisson preset for one replica,
//! else the chat-prefix preset at `replicas` times its rate) and `simulate_prepared()` (one
//! simulation, continuous batching of 64 sequences, on one replica or on `replicas` with
//! prefix caches behind kv-aware routing; returns the iterations), which
//! `crates/capacity/wasm_speed.mjs` times in Node.
//!
//! ```sh
//! cargo build --release -p capacity --target wasm32-unknown-unknown --example wasm_speed
//! node crates/capacity/wasm_speed.mjs
//! ```

use std::sync::Mutex;

use capacity::{
    simulate_fleet, Batching, Fleet, HardwareProfile, ModelProfile, Router, ServingPolicy, Trace,
    TraceSpec, WeightPath,
};

static TRACE: Mutex<Option<(Trace, Fleet)>> = Mutex::new(None);

/// Draws `requests` requests for `replicas` replicas; returns how many it holds (0 on a
/// bad count).
#[no_mangle]
pub extern "C" fn prepare(requests: u32, replicas: u32) -> u32 {
    let preset = if replicas > 1 {
        "chat-prefix"
    } else {
        "poisson"
    };
    let mut spec = TraceSpec {
        requests: requests as u64,
        ..TraceSpec::preset(preset).expect("preset")
    };
    let rate = spec.arrivals.mean_rate() * replicas.max(1) as f64;
    spec.arrivals.set_mean_rate(rate);
    let fleet = Fleet {
        replicas: replicas.max(1),
        router: Router::KvAware,
        prefix_cache: replicas > 1,
        ..Fleet::single()
    };
    match (spec.generate(), TRACE.lock()) {
        (Ok(trace), Ok(mut slot)) => {
            let n = trace.requests.len() as u32;
            *slot = Some((trace, fleet));
            n
        }
        _ => 0,
    }
}

/// Simulates the prepared trace; returns the iterations run (or -1).
#[no_mangle]
pub extern "C" fn simulate_prepared() -> f64 {
    let Ok(slot) = TRACE.lock() else { return -1.0 };
    let Some((trace, fleet)) = slot.as_ref() else {
        return -1.0;
    };
    let policy = ServingPolicy {
        batching: Batching::Continuous,
        max_sequences: 64,
        block_size: 16,
        weights: WeightPath::Full,
    };
    let hardware = HardwareProfile::preset("lab-cpu").expect("preset");
    match simulate_fleet(trace, &hardware, &ModelProfile::tiny(), &policy, fleet) {
        Ok(out) => out.iterations as f64,
        Err(_) => -1.0,
    }
}
