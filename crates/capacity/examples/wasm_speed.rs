//! The simulator's speed under WebAssembly without any JavaScript glue: a cdylib with two
//! plain exports, `prepare(n)` (draws n requests of the poisson preset) and `simulate()`
//! (one simulation, continuous batching of 64 sequences; returns the iterations), which
//! `crates/capacity/wasm_speed.mjs` times in Node.
//!
//! ```sh
//! cargo build --release -p capacity --target wasm32-unknown-unknown --example wasm_speed
//! node crates/capacity/wasm_speed.mjs
//! ```

use std::sync::Mutex;

use capacity::{
    simulate, Batching, HardwareProfile, ModelProfile, ServingPolicy, Trace, TraceSpec, WeightPath,
};

static TRACE: Mutex<Option<Trace>> = Mutex::new(None);

/// Draws `requests` requests; returns how many it holds (0 on a bad count).
#[no_mangle]
pub extern "C" fn prepare(requests: u32) -> u32 {
    let spec = TraceSpec {
        requests: requests as u64,
        ..TraceSpec::preset("poisson").expect("preset")
    };
    match (spec.generate(), TRACE.lock()) {
        (Ok(trace), Ok(mut slot)) => {
            let n = trace.requests.len() as u32;
            *slot = Some(trace);
            n
        }
        _ => 0,
    }
}

/// Simulates the prepared trace; returns the iterations run (or -1).
#[no_mangle]
pub extern "C" fn simulate_prepared() -> f64 {
    let Ok(slot) = TRACE.lock() else { return -1.0 };
    let Some(trace) = slot.as_ref() else {
        return -1.0;
    };
    let policy = ServingPolicy {
        batching: Batching::Continuous,
        max_sequences: 64,
        block_size: 16,
        weights: WeightPath::Full,
    };
    let hardware = HardwareProfile::preset("lab-cpu").expect("preset");
    match simulate(trace, &hardware, &ModelProfile::tiny(), &policy) {
        Ok(out) => out.iterations as f64,
        Err(_) => -1.0,
    }
}
