//! Replicas behind routers, and the prefix cache, against references: each replica's M/D/1
//! wait under random routing, least-outstanding against random on the same trace, prefix
//! affinity against round-robin on shared system prompts, and the single engine as the
//! one-replica case of every router.

use capacity::{
    simulate, simulate_fleet, Arrivals, Batching, Fleet, HardwareProfile, LengthDist, Metrics,
    ModelProfile, PrefixMix, Router, ServingPolicy, SimOutcome, Slo, Trace, TraceSpec,
};

mod common;

use common::{one_slice, policy, sharegpt_like};

/// Roofs so high that an iteration costs exactly its overhead, `service` seconds; one
/// sequence at a time, one-token prompts and answers: each request is one iteration, a
/// deterministic server.
fn md1_machine(service: f64) -> (HardwareProfile, ModelProfile, ServingPolicy) {
    let hw = HardwareProfile {
        peak_flops: 1e30,
        bandwidth_bytes_per_s: 1e30,
        iteration_overhead_s: service,
        ..HardwareProfile::preset("a100-80gb").unwrap()
    };
    (hw, ModelProfile::tiny(), policy(Batching::Continuous, 1))
}

fn poisson_one_token(requests: u64, rate_per_s: f64, seed: u64) -> Trace {
    TraceSpec {
        name: "md1".into(),
        requests,
        seed,
        arrivals: Arrivals::Poisson { rate_per_s },
        prompt_tokens: LengthDist::Constant { tokens: 1 },
        output_tokens: LengthDist::Constant { tokens: 1 },
        slices: one_slice(),
        shared_prefixes: None,
    }
    .generate()
    .unwrap()
}

fn fleet(replicas: u32, router: Router) -> Fleet {
    Fleet {
        replicas,
        router,
        ..Fleet::single()
    }
}

fn mean_wait(out: &SimOutcome, service: f64, replica: Option<u32>) -> f64 {
    let waits: Vec<f64> = (0..out.ttft_s.len())
        .filter(|&i| replica.is_none_or(|r| out.replica[i] == r))
        .map(|i| out.ttft_s[i] - service)
        .collect();
    waits.iter().sum::<f64>() / waits.len() as f64
}

/// Random routing thins a Poisson stream of rate λ into N independent Poisson streams of
/// rate λ/N, so each replica is an M/D/1 queue at ρ = λD/N, whose mean wait is
/// ρD / (2(1 − ρ)) (Pollaczek–Khinchine).
#[test]
fn random_routing_over_n_replicas_gives_each_replica_the_md1_wait_at_its_share() {
    let service = 1e-3;
    let (hw, model, p) = md1_machine(service);
    let (n, rho) = (4u32, 0.7);
    let trace = poisson_one_token(1_600_000, n as f64 * rho / service, 5);
    let out = simulate_fleet(&trace, &hw, &model, &p, &fleet(n, Router::Random)).unwrap();
    let formula = rho * service / (2.0 * (1.0 - rho));
    for r in 0..n {
        let served = out.replica.iter().filter(|&&x| x == r).count();
        let waited = mean_wait(&out, service, Some(r));
        let error = waited / formula - 1.0;
        eprintln!(
            "replica {r}: {served} requests, mean wait {waited:.6e} s, M/D/1 {formula:.6e} s, {error:+.4}"
        );
        assert!(
            error.abs() < 0.02,
            "replica {r}: {waited} against {formula}"
        );
    }
}

/// Joining the shortest queue beats random assignment (Winston 1977): on the same
/// arrivals, least-outstanding routing waits less than random routing, on average and at
/// the tail. (Round-robin, printed, waits less still here: with a constant service time,
/// every fourth arrival of a Poisson stream is an Erlang-4 stream, nearly regular, and
/// the shortest queue cannot see how far along each replica's request is.)
#[test]
fn least_outstanding_routing_waits_less_than_random_on_the_same_trace() {
    let service = 1e-3;
    let (hw, model, p) = md1_machine(service);
    let n = 4;
    let trace = poisson_one_token(200_000, n as f64 * 0.8 / service, 9);
    let slo = Slo {
        ttft_p99_s: 1e9,
        tpot_p99_s: 1e9,
    };
    let run = |router| {
        let out = simulate_fleet(&trace, &hw, &model, &p, &fleet(n, router)).unwrap();
        let m = Metrics::new(&out, &trace, &p, &hw, &slo);
        (mean_wait(&out, service, None), m.all.ttft.p99)
    };
    let (random, random_p99) = run(Router::Random);
    let (round_robin, round_robin_p99) = run(Router::RoundRobin);
    let (least, least_p99) = run(Router::LeastOutstanding);
    eprintln!("mean wait: random {random:.3e}, round-robin {round_robin:.3e}, least-outstanding {least:.3e} s");
    eprintln!("p99 TTFT: random {random_p99:.3e}, round-robin {round_robin_p99:.3e}, least-outstanding {least_p99:.3e} s");
    assert!(least < 0.5 * random && least_p99 < 0.5 * random_p99);
}

/// One replica is the single engine, whichever router, cap-free and cache-free.
#[test]
fn one_replica_behind_any_router_is_the_single_engine() {
    let trace = sharegpt_like(400, 3.0).generate().unwrap();
    let hw = HardwareProfile::preset("a100-80gb").unwrap();
    let model = ModelProfile::preset("llama-2-13b").unwrap();
    let p = policy(Batching::ChunkedPrefill { token_budget: 512 }, 32);
    let single = simulate(&trace, &hw, &model, &p).unwrap();
    for router in Router::ALL {
        let out = simulate_fleet(&trace, &hw, &model, &p, &fleet(1, router)).unwrap();
        assert_eq!(out.ttft_s, single.ttft_s, "{router}");
        assert_eq!(out.e2e_s, single.e2e_s, "{router}");
        assert_eq!(out.iterations, single.iterations, "{router}");
    }
}

/// Shared system prompts: `prefixes` prefixes of `prefix_tokens`, every request starts with
/// one, followed by its own message.
fn shared_prompts(requests: u64, rate_per_s: f64, prefixes: u32, prefix_tokens: u32) -> Trace {
    TraceSpec {
        name: "shared-prompts".into(),
        requests,
        seed: 21,
        arrivals: Arrivals::Poisson { rate_per_s },
        prompt_tokens: LengthDist::LogNormal {
            median: 200.0,
            sigma: 0.6,
            min: 8,
            max: 1024,
        },
        output_tokens: LengthDist::LogNormal {
            median: 150.0,
            sigma: 0.6,
            min: 1,
            max: 512,
        },
        slices: one_slice(),
        shared_prefixes: Some(PrefixMix {
            count: prefixes,
            tokens: LengthDist::Constant {
                tokens: prefix_tokens,
            },
            share: 1.0,
        }),
    }
    .generate()
    .unwrap()
}

/// A prefix cache hit skips the cached blocks' prefill: the same prompt, served twice in a
/// row on one replica, takes its whole-block prefix from the cache the second time.
#[test]
fn a_prefix_hit_skips_the_cached_blocks_and_never_the_last_token() {
    let hw = HardwareProfile::preset("a100-80gb").unwrap();
    let model = ModelProfile::preset("llama-3-8b").unwrap();
    let p = policy(Batching::Continuous, 8);
    // Two requests 10 s apart with a 1,000-token prefix in a 1,200-token prompt.
    let mut trace = shared_prompts(2, 1.0, 1, 1000);
    trace.requests[0].arrival_s = 0.0;
    trace.requests[1].arrival_s = 10.0;
    for r in &mut trace.requests {
        r.prompt_tokens = 1200;
        r.output_tokens = 4;
    }
    let cached = Fleet {
        prefix_cache: true,
        ..Fleet::single()
    };
    let off = simulate(&trace, &hw, &model, &p).unwrap();
    let on = simulate_fleet(&trace, &hw, &model, &p, &cached).unwrap();
    // 62 whole blocks of 16 = 992 tokens of the 2,400 admitted.
    assert_eq!(
        (on.prefix_hit_tokens, on.prompt_tokens_admitted),
        (992, 2400)
    );
    assert_eq!(off.prefix_hit_tokens, 0);
    assert_eq!(
        on.ttft_s[0], off.ttft_s[0],
        "the first request finds nothing"
    );
    assert!(
        on.ttft_s[1] < 0.5 * off.ttft_s[1],
        "a 992-token hit in 1,200: {} against {}",
        on.ttft_s[1],
        off.ttft_s[1]
    );
    // A prompt that is all prefix still computes its last token.
    let mut whole = trace.clone();
    for r in &mut whole.requests {
        r.prompt_tokens = 1008;
        r.prefix.as_mut().unwrap().tokens = 1008;
    }
    let out = simulate_fleet(&whole, &hw, &model, &p, &cached).unwrap();
    assert_eq!(
        out.prefix_hit_tokens,
        62 * 16,
        "63 blocks, the last recomputed"
    );
}

/// Hit rate and p99 TTFT of 4 replicas of Llama-3-8B with prefix caches, per router.
fn prefix_routing(hardware: &str, prefixes: u32, rate_per_s: f64) -> Vec<(Router, f64, f64)> {
    let hw = HardwareProfile::preset(hardware).unwrap();
    let model = ModelProfile::preset("llama-3-8b").unwrap();
    let p = policy(Batching::ChunkedPrefill { token_budget: 2048 }, 32);
    let trace = shared_prompts(6000, rate_per_s, prefixes, 1000);
    let slo = Slo {
        ttft_p99_s: 1e9,
        tpot_p99_s: 1e9,
    };
    [Router::RoundRobin, Router::PrefixAffinity, Router::KvAware]
        .into_iter()
        .map(|router| {
            let f = Fleet {
                replicas: 4,
                router,
                prefix_cache: true,
                ..Fleet::single()
            };
            let out = simulate_fleet(&trace, &hw, &model, &p, &f).unwrap();
            let m = Metrics::new(&out, &trace, &p, &hw, &slo);
            eprintln!(
                "{hardware}, {prefixes} prefixes, {rate_per_s}/s, {router}: hit rate {:.3}, p50 TTFT {:.3} s, p99 TTFT {:.3} s",
                out.prefix_cache_hit_rate(),
                m.all.ttft.p50,
                m.all.ttft.p99
            );
            (router, out.prefix_cache_hit_rate(), m.all.ttft.p99)
        })
        .collect()
}

/// SGLang reports up to 1.9x throughput and a 3.8x cache hit rate from cache-aware routing
/// (SGLang v0.4 release notes, Dec 2024), llm-d "57x faster response times" from precise
/// prefix-cache-aware scheduling: on traffic whose shared prefixes do not all fit in every
/// replica's cache. Asserted here, on 1,000-token system prompts and 4 replicas:
/// - where the prefixes do not all fit (64 of them on L4s, 256 on A100s), both
///   cache-aware routers hit the cache more than round-robin;
/// - the tail follows only in part: SGLang's rule lowers p99 TTFT on the A100s (its
///   imbalance thresholds, 64 requests and 1.5x, are never crossed at 4 replicas, so cache
///   wins over load) but raises it on the L4s, and Dynamo's cost, with its default weight,
///   lowers it on the L4s and raises it on the A100s;
/// - with only 8 prefixes, which every replica's cache holds, routing cannot raise the hit
///   rate, and SGLang's rule, which follows the cache until the load is far out of
///   balance, makes the tail far worse than round-robin.
#[test]
fn cache_aware_routing_raises_the_hit_rate_where_prefixes_do_not_fit_everywhere() {
    let [(_, rr_l4, rr_l4_p99), (_, pa_l4, pa_l4_p99), (_, kv_l4, kv_l4_p99)] =
        prefix_routing("l4", 64, 6.0)[..]
    else {
        unreachable!()
    };
    assert!(pa_l4 > rr_l4 + 0.1 && kv_l4 > rr_l4 + 0.05);
    assert!(kv_l4_p99 < rr_l4_p99 && pa_l4_p99 > rr_l4_p99);
    let [(_, rr_a100, rr_a100_p99), (_, pa_a100, pa_a100_p99), (_, kv_a100, kv_a100_p99)] =
        prefix_routing("a100-80gb", 256, 30.0)[..]
    else {
        unreachable!()
    };
    assert!(pa_a100 > rr_a100 + 0.05 && kv_a100 > rr_a100);
    assert!(pa_a100_p99 < 0.5 * rr_a100_p99 && kv_a100_p99 > rr_a100_p99);
    let [(_, rr_8, rr_8_p99), (_, pa_8, pa_8_p99), (_, kv_8, _)] = prefix_routing("l4", 8, 6.0)[..]
    else {
        unreachable!()
    };
    assert!((pa_8 - rr_8).abs() < 0.01 && (kv_8 - rr_8).abs() < 0.01);
    assert!(pa_8_p99 > 10.0 * rr_8_p99);
}

/// A queue cap turns waiting into rejection: rejected requests have no latency and count
/// against goodput.
#[test]
fn a_full_queue_rejects_and_the_rejected_count_against_goodput() {
    let service = 1e-3;
    let (hw, model, p) = md1_machine(service);
    // Twice the fleet's capacity.
    let trace = poisson_one_token(20_000, 2.0 * 2.0 / service, 3);
    let capped = Fleet {
        replicas: 2,
        router: Router::LeastOutstanding,
        queue_cap: Some(4),
        ..Fleet::single()
    };
    let out = simulate_fleet(&trace, &hw, &model, &p, &capped).unwrap();
    let unserved = out.ttft_s.iter().filter(|t| t.is_nan()).count() as u64;
    assert_eq!(unserved, out.rejected);
    // About half is over capacity.
    assert!(
        (0.4..0.6).contains(&(out.rejected as f64 / 20_000.0)),
        "{}",
        out.rejected
    );
    let slo = Slo {
        ttft_p99_s: 1.0,
        tpot_p99_s: 1.0,
    };
    let m = Metrics::new(&out, &trace, &p, &hw, &slo);
    let served = 20_000 - out.rejected;
    assert!((m.all.slo_attainment - served as f64 / 20_000.0).abs() < 1e-12);
    // Nobody waits behind more than the cap (and the one in service).
    assert!(m.all.ttft.p99 <= 6.0 * service, "{}", m.all.ttft.p99);
}

/// A router that sees load late sends a burst of arrivals to the replica that looked
/// idlest at its last refresh: stale least-outstanding routing waits longer than live.
#[test]
fn a_stale_view_herds_requests_and_waits_longer() {
    let service = 1e-3;
    let (hw, model, p) = md1_machine(service);
    let trace = poisson_one_token(100_000, 4.0 * 0.7 / service, 4);
    let wait = |staleness| {
        let f = Fleet {
            replicas: 4,
            router: Router::LeastOutstanding,
            router_staleness_s: staleness,
            ..Fleet::single()
        };
        mean_wait(
            &simulate_fleet(&trace, &hw, &model, &p, &f).unwrap(),
            service,
            None,
        )
    };
    let (live, stale) = (wait(0.0), wait(0.02));
    eprintln!("least-outstanding mean wait: live {live:.3e} s, 20 ms stale {stale:.3e} s");
    assert!(stale > 2.0 * live);
}

/// DistServe (Zhong et al., OSDI 2024) serves 7.4x the requests (4.48x in its first
/// preprint) or a 12.6x (10.2x) tighter SLO by placing prefill and decode on separate
/// GPUs: colocated, every prompt's prefill stalls the decodes batched with it. On a
/// prefill-heavy trace (prompts of median 1,500 tokens, answers of 100) on 4 A100s
/// serving Llama-3-8B, with the same 4 accelerators split 3:1 or not: under a strict time
/// per output token (15 ms p99) the split raises goodput per accelerator many times over;
/// under a loose one (100 ms) it raises nothing, and a split with too few prefill
/// replicas (2:2) falls behind the colocated fleet.
#[test]
fn disaggregation_raises_goodput_per_accelerator_under_a_strict_tpot_slo_only() {
    let hw = HardwareProfile::preset("a100-80gb").unwrap();
    let model = ModelProfile::preset("llama-3-8b").unwrap();
    let p = policy(Batching::ChunkedPrefill { token_budget: 512 }, 64);
    let trace = TraceSpec {
        name: "prefill-heavy".into(),
        requests: 3000,
        seed: 3,
        arrivals: Arrivals::Poisson { rate_per_s: 12.0 },
        prompt_tokens: LengthDist::LogNormal {
            median: 1500.0,
            sigma: 0.5,
            min: 64,
            max: 3500,
        },
        output_tokens: LengthDist::LogNormal {
            median: 100.0,
            sigma: 0.5,
            min: 4,
            max: 500,
        },
        slices: one_slice(),
        shared_prefixes: None,
    }
    .generate()
    .unwrap();
    let goodput_per_accelerator = |prefill_replicas: u32, tpot_p99_s: f64| {
        let f = Fleet {
            replicas: 4,
            router: Router::LeastOutstanding,
            prefill_replicas,
            ..Fleet::single()
        };
        let out = simulate_fleet(&trace, &hw, &model, &p, &f).unwrap();
        let slo = Slo {
            ttft_p99_s: 2.0,
            tpot_p99_s,
        };
        let m = Metrics::new(&out, &trace, &p, &hw, &slo);
        m.all.goodput_per_s / 4.0
    };
    let (strict, loose) = (0.015, 0.1);
    let colocated = (
        goodput_per_accelerator(0, strict),
        goodput_per_accelerator(0, loose),
    );
    let split = (
        goodput_per_accelerator(3, strict),
        goodput_per_accelerator(3, loose),
    );
    let even = goodput_per_accelerator(2, loose);
    eprintln!("goodput per accelerator, strict / loose TPOT: colocated {colocated:?}, 3:1 {split:?}; 2:2 loose {even}");
    assert!(split.0 > 4.0 * colocated.0);
    assert!(split.1 <= colocated.1 * 1.001);
    assert!(even < 0.5 * colocated.1);
}

/// The KV cache's trip costs its bytes over the link: a slower link delays every second
/// token by exactly the difference, and the first token not at all.
#[test]
fn the_kv_transfer_costs_bytes_over_bandwidth() {
    let hw = HardwareProfile::preset("a100-80gb").unwrap();
    let model = ModelProfile::preset("llama-3-8b").unwrap();
    let p = policy(Batching::Continuous, 8);
    let mut trace = poisson_one_token(1, 1.0, 1);
    trace.requests[0].prompt_tokens = 1000;
    trace.requests[0].output_tokens = 2;
    let run = |gbps: f64| {
        let f = Fleet {
            replicas: 2,
            prefill_replicas: 1,
            kv_link_gbps: gbps,
            ..Fleet::single()
        };
        simulate_fleet(&trace, &hw, &model, &p, &f).unwrap()
    };
    let (fast, slow) = (run(400.0), run(100.0));
    assert_eq!(fast.ttft_s, slow.ttft_s);
    // 1,000 tokens of 128 KiB (32 layers · 8 KV heads · 128 · 2 values · 2 bytes).
    let bytes = 1000.0 * model.kv_bytes_per_token();
    assert_eq!(bytes, 1000.0 * 131_072.0);
    let expected = bytes * 8.0 / 100e9 - bytes * 8.0 / 400e9;
    let delay = slow.e2e_s[0] - fast.e2e_s[0];
    assert!(
        (delay / expected - 1.0).abs() < 1e-9,
        "{delay} against {expected}"
    );
    // Served by the prefill replica, then the decode replica.
    assert_eq!(fast.replica, [0]);
}
