//! The capacity planner's simulator: one simulation of the poisson trace preset (the tiny
//! model on the calibrated lab CPU, 64 sequences at most) at 100,000 and 1,000,000
//! requests, for each batching policy side by side, and at 1,000,000 requests the
//! simulation plus its figures (percentiles, per slice, bottleneck, KV timeline). The
//! trace is drawn outside the timed loop. Target: 1,000,000 requests in at most 2 s, cost
//! linear in requests (compare the two sizes). Also (issue 13) the chat-prefix preset at 8
//! times its rate on 8 replicas with prefix caches behind kv-aware routing, continuous
//! batching: the same target.
//!
//! Run with `cargo bench -p policy-bench --bench capacity`; criterion keeps the medians
//! under `target/criterion/capacity/`.

use std::hint::black_box;
use std::time::Duration;

use capacity::{
    simulate, simulate_fleet, Batching, Calibration, Fleet, HardwareProfile, Metrics, ModelProfile,
    Router, ServingPolicy, Slo, TraceSpec, WeightPath,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn policies() -> [(&'static str, Batching); 3] {
    [
        ("static", Batching::Static),
        ("continuous", Batching::Continuous),
        (
            "chunked-prefill",
            Batching::ChunkedPrefill { token_budget: 128 },
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let model = ModelProfile::tiny();
    let fit = Calibration::lab_cpu().fit(&model).expect("calibration");
    let hardware = fit.apply(
        &HardwareProfile::preset("lab-cpu").unwrap(),
        WeightPath::Full,
    );
    let slo = Slo {
        ttft_p99_s: 0.05,
        tpot_p99_s: 0.001,
    };
    let mut group = c.benchmark_group("capacity");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    for requests in [100_000u64, 1_000_000] {
        let trace = TraceSpec {
            requests,
            ..TraceSpec::preset("poisson").unwrap()
        }
        .generate()
        .unwrap();
        group.throughput(Throughput::Elements(requests));
        for (name, batching) in policies() {
            let policy = ServingPolicy {
                batching,
                max_sequences: 64,
                block_size: 16,
                weights: WeightPath::Full,
            };
            group.bench_with_input(
                BenchmarkId::new(format!("simulate/{name}"), requests),
                &trace,
                |b, trace| {
                    b.iter(|| simulate(black_box(trace), &hardware, &model, &policy).unwrap())
                },
            );
            if name == "continuous" {
                let mut spec = TraceSpec {
                    requests,
                    ..TraceSpec::preset("chat-prefix").unwrap()
                };
                spec.arrivals.set_mean_rate(8.0 * spec.arrivals.mean_rate());
                let chat = spec.generate().unwrap();
                let fleet = Fleet {
                    replicas: 8,
                    router: Router::KvAware,
                    prefix_cache: true,
                    ..Fleet::single()
                };
                group.bench_with_input(
                    BenchmarkId::new("simulate/8-replicas-kv-aware", requests),
                    &chat,
                    |b, trace| {
                        b.iter(|| {
                            simulate_fleet(black_box(trace), &hardware, &model, &policy, &fleet)
                                .unwrap()
                        })
                    },
                );
            }
            if requests == 1_000_000 && name == "continuous" {
                group.bench_with_input(
                    BenchmarkId::new("simulate-and-metrics/continuous", requests),
                    &trace,
                    |b, trace| {
                        b.iter(|| {
                            let out =
                                simulate(black_box(trace), &hardware, &model, &policy).unwrap();
                            Metrics::new(&out, trace, &policy, &hardware, &slo)
                        })
                    },
                );
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
