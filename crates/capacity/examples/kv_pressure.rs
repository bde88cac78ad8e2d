//! Preemptions and tail latency under KV-cache pressure: Llama-3-8B on an A100-80GB whose
//! memory is cut so that the KV cache holds about 25,000 tokens, serving 3,000 ShareGPT-like
//! requests at about 50 %, 90 % and 125 % of the arrival rate that saturates it (8 a second).
//! `cargo run --release -p capacity --example kv_pressure`. The figures of issue 13's
//! scheduler fix (admission after the running sequences grow; vLLM's token budget) were
//! measured with it, before and after.

use capacity::{simulate, Batching, HardwareProfile, Metrics, ModelProfile, Slo};

#[path = "../tests/common/mod.rs"]
mod common;

use common::{policy, sharegpt_like};

fn main() {
    let model = ModelProfile::preset("llama-3-8b").unwrap();
    let mut hw = HardwareProfile::preset("a100-80gb").unwrap();
    // 20 GiB less the 10 % reserve leaves about 3.3 GB, some 25,000 tokens, for the cache.
    hw.memory_bytes = 20.0 * (1u64 << 30) as f64;
    let slo = Slo {
        ttft_p99_s: 1e9,
        tpot_p99_s: 1e9,
    };
    println!("policy                                 rate/s  preemptions  p99 TTFT s  p99 queue s  p50 TTFT s  tokens/s");
    for batching in [
        Batching::Continuous,
        Batching::ChunkedPrefill { token_budget: 512 },
        Batching::ChunkedPrefill { token_budget: 2048 },
    ] {
        for rate in [4.0, 7.0, 10.0] {
            let trace = sharegpt_like(3_000, rate).generate().unwrap();
            let serving = policy(batching, 256);
            let outcome = simulate(&trace, &hw, &model, &serving).unwrap();
            let m = Metrics::new(&outcome, &trace, &serving, &hw, &slo);
            println!(
                "{:<38} {:>6} {:>12} {:>11.3} {:>12.3} {:>11.3} {:>9.0}",
                serving.label(),
                rate,
                outcome.preemptions,
                m.all.ttft.p99,
                m.queue.p99,
                m.all.ttft.p50,
                m.output_tokens_per_s
            );
        }
    }
}
