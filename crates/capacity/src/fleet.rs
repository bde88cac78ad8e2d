//! Replicas behind a router: how many identical replicas serve the trace, which one each
//! request goes to, how fresh the router's view of them is, and whether a full queue
//! rejects. The simulator ([`crate::sim`]) serves every replica; this module holds the
//! configuration and the routers' rules.
//!
//! Each router reads, per replica, what the replica would report: its requests waiting
//! and running, its KV blocks in use, and the blocks of the request's prefix it has
//! cached. With `router_staleness_s` = S > 0 the router refreshes that view at the first
//! arrival at least S seconds after its previous refresh, as a router that scrapes its
//! engines' metrics does, and routes on it in between (so it also does not see the
//! requests it routed since: the herding a stale view causes is part of what S shows).
//! At S = 0 it reads each replica as of the end of the replica's current iteration (at
//! most one iteration ahead of the arrival). Ties go to the lowest replica index.

use std::fmt;
use std::str::FromStr;

use policy::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::cost::Attention;
use crate::error::{at_least_one, in_range, CapacityError};

/// The most replicas one fleet simulates.
pub const MAX_REPLICAS: u32 = 4096;

/// The longest staleness of the router's view, seconds.
pub const MAX_ROUTER_STALENESS_S: f64 = 1e6;

/// How a request picks its replica. Ties go to the replica with the fewest outstanding
/// requests, then the lowest index: the peers break ties at random (Dynamo), by hash-map
/// order (SGLang's tree) or by index (Vidur); a plan must be reproducible, and a fixed
/// order alone would send every tie (say, a prefix cached on every replica) to replica 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Router {
    /// Request k goes to replica k mod N: Vidur's default global scheduler
    /// (`vidur/scheduler/global_scheduler/round_robin_global_scheduler.py`), and the
    /// round-robin of inference-lab and vLLM production-stack.
    RoundRobin,
    /// A uniformly random replica: Vidur's `random_global_scheduler.py` (which draws from
    /// Python's global generator, shared with its request generator; here the router has
    /// its own seeded stream).
    Random,
    /// The replica with the fewest requests waiting or running: inference-lab's
    /// least-loaded router (`src/router/mod.rs`: running + waiting) and SGLang's load (its
    /// in-flight requests). Vidur's `lor_global_scheduler.py`, despite its name, counts
    /// only the replica's waiting queue (`num_pending_requests`).
    LeastOutstanding,
    /// The replica with the fewest KV blocks in use by running requests and pinned
    /// prefixes: vLLM's KV-cache usage, which scraping routers read.
    LeastKv,
    /// SGLang's cache-aware router (`cache_aware.rs` of sgl-model-gateway): when the load
    /// is imbalanced (the most outstanding requests exceed the fewest by more than 64 and
    /// are more than 1.5 times them), the least-loaded replica; otherwise, when a replica
    /// has cached more than 30 % of the prompt, the one with the longest cached prefix;
    /// otherwise the least-loaded. SGLang matches characters in its own approximate tree;
    /// here the share is of the prompt's KV blocks, from the replicas' caches.
    PrefixAffinity,
    /// Dynamo's KV router (`lib/llm/src/kv_router/scheduler.rs`, and its documentation):
    /// the lowest `w · (prompt blocks − cached prefix blocks) + active blocks`, the prefill
    /// the replica would do plus its decode load (here its KV blocks in use), with the
    /// default overlap weight w = 1 and router temperature 0 (the minimum, no sampling).
    KvAware,
}

impl Router {
    pub const ALL: [Router; 6] = [
        Router::RoundRobin,
        Router::Random,
        Router::LeastOutstanding,
        Router::LeastKv,
        Router::PrefixAffinity,
        Router::KvAware,
    ];

    /// The names [`Router::from_str`] reads, for messages.
    pub const EXPECTED: &'static str =
        "round-robin, random, least-outstanding, least-kv, prefix-affinity or kv-aware";

    pub fn name(self) -> &'static str {
        match self {
            Router::RoundRobin => "round-robin",
            Router::Random => "random",
            Router::LeastOutstanding => "least-outstanding",
            Router::LeastKv => "least-kv",
            Router::PrefixAffinity => "prefix-affinity",
            Router::KvAware => "kv-aware",
        }
    }
}

impl fmt::Display for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Router {
    type Err = CapacityError;

    fn from_str(s: &str) -> Result<Router, CapacityError> {
        let name = s.trim().to_ascii_lowercase().replace('_', "-");
        Router::ALL
            .into_iter()
            .find(|r| r.name() == name)
            .ok_or_else(|| CapacityError::UnknownName {
                kind: "router".into(),
                name: s.into(),
                expected: Router::EXPECTED.into(),
            })
    }
}

/// SGLang's cache-aware defaults (`cache_threshold`, `balance_abs_threshold`,
/// `balance_rel_threshold`).
const CACHE_THRESHOLD: f64 = 0.3;
const BALANCE_ABS_THRESHOLD: u64 = 64;
const BALANCE_REL_THRESHOLD: f64 = 1.5;

/// Dynamo's default `overlap_score_weight`.
const KV_OVERLAP_WEIGHT: f64 = 1.0;

/// The replicas serving a trace and how requests reach them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    pub replicas: u32,
    pub router: Router,
    /// Seconds between refreshes of the router's view of replica load and caches; 0 is
    /// live.
    pub router_staleness_s: f64,
    /// The most requests that may wait at a replica; a request routed to a full queue is
    /// rejected (it counts against goodput). None: queues are unbounded.
    pub queue_cap: Option<u32>,
    /// Whether each replica keeps a prefix cache ([`crate::prefix_cache`]).
    pub prefix_cache: bool,
    /// Prefill/decode disaggregation (DistServe, Splitwise): the first `prefill_replicas`
    /// of the replicas only prefill, the rest only decode, and each request's KV cache
    /// moves between them over a link of `kv_link_gbps`. 0: every replica does both.
    #[serde(default)]
    pub prefill_replicas: u32,
    #[serde(default = "default_kv_link_gbps")]
    pub kv_link_gbps: f64,
    /// Speculative decoding: each decode step drafts this many tokens and verifies them in
    /// one target pass ([`crate::speculation`]); 0 is off.
    #[serde(default)]
    pub speculative_k: u32,
    /// How attention's memory traffic is priced ([`Attention`]).
    #[serde(default)]
    pub attention: Attention,
}

/// The most tokens a speculative step may draft.
pub const MAX_SPECULATIVE_K: u32 = 16;

/// The KV link's default bandwidth, Gbit/s: one 400 Gb/s NIC per replica (an InfiniBand
/// NDR port), as on DGX H100 systems.
pub const DEFAULT_KV_LINK_GBPS: f64 = 400.0;

/// The highest KV link bandwidth a fleet may set, Gbit/s.
pub const MAX_KV_LINK_GBPS: f64 = 1e6;

fn default_kv_link_gbps() -> f64 {
    DEFAULT_KV_LINK_GBPS
}

impl Fleet {
    /// One replica, no prefix cache, no queue cap: the single engine.
    pub fn single() -> Fleet {
        Fleet {
            replicas: 1,
            router: Router::RoundRobin,
            router_staleness_s: 0.0,
            queue_cap: None,
            prefix_cache: false,
            prefill_replicas: 0,
            kv_link_gbps: DEFAULT_KV_LINK_GBPS,
            speculative_k: 0,
            attention: Attention::Fused,
        }
    }

    /// Whether prefill and decode run on separate replicas.
    pub fn disaggregated(&self) -> bool {
        self.prefill_replicas > 0
    }

    /// 1 to [`MAX_REPLICAS`] replicas, a staleness of 0 to [`MAX_ROUTER_STALENESS_S`]
    /// seconds, and a queue cap of at least 1.
    pub fn validate(&self) -> Result<(), CapacityError> {
        at_least_one("replicas", self.replicas as u64)?;
        in_range("replicas", self.replicas as f64, 1.0, MAX_REPLICAS as f64)?;
        in_range(
            "router staleness (s)",
            self.router_staleness_s,
            0.0,
            MAX_ROUTER_STALENESS_S,
        )?;
        if let Some(cap) = self.queue_cap {
            at_least_one("queue cap (requests waiting per replica)", cap as u64)?;
        }
        in_range(
            "speculative tokens per step (k)",
            self.speculative_k as f64,
            0.0,
            MAX_SPECULATIVE_K as f64,
        )?;
        if self.disaggregated() {
            if self.prefill_replicas >= self.replicas {
                return Err(CapacityError::Sweep {
                    reason: format!(
                        "a disaggregated fleet of {} replicas with {} prefill replicas leaves no decode replica; P:D needs at least one of each",
                        self.replicas, self.prefill_replicas
                    ),
                });
            }
            in_range(
                "KV link bandwidth (Gbit/s)",
                crate::error::positive("KV link bandwidth (Gbit/s)", self.kv_link_gbps)?,
                1e-3,
                MAX_KV_LINK_GBPS,
            )?;
        }
        Ok(())
    }

    /// `4 replicas, kv-aware` and the like; empty for the single engine.
    pub fn label(&self) -> String {
        if *self == Fleet::single() {
            return String::new();
        }
        // One replica is routed no way in particular.
        let mut label = if self.disaggregated() {
            format!(
                "{}:{} prefill:decode replicas, {}",
                self.prefill_replicas,
                self.replicas - self.prefill_replicas,
                self.router
            )
        } else if self.replicas == 1 {
            "1 replica".to_string()
        } else {
            format!("{} replicas, {}", self.replicas, self.router)
        };
        if self.prefix_cache {
            label.push_str(", prefix cache");
        }
        if self.router_staleness_s > 0.0 {
            label.push_str(&format!(
                ", view {} s old",
                crate::figures::shortest(self.router_staleness_s)
            ));
        }
        if let Some(cap) = self.queue_cap {
            label.push_str(&format!(", queue cap {cap}"));
        }
        if self.speculative_k > 0 {
            label.push_str(&format!(", speculative k={}", self.speculative_k));
        }
        if self.attention == Attention::Naive {
            label.push_str(", naive attention");
        }
        label
    }
}

/// What the router knows of one replica.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ReplicaView {
    pub outstanding: u64,
    pub kv_used_blocks: u64,
}

/// The router's running state: the round-robin cursor and the random generator.
pub(crate) struct Routing {
    router: Router,
    next: u64,
    rng: SplitMix64,
}

/// The seed of the random router (the crate draws no entropy; a fixed seed keeps the
/// report byte-identical).
const RANDOM_ROUTER_SEED: u64 = 0x5EED_F1EE;

impl Routing {
    pub(crate) fn new(router: Router) -> Routing {
        Routing {
            router,
            next: 0,
            rng: SplitMix64::new(RANDOM_ROUTER_SEED),
        }
    }

    /// The replica for a request of `prompt_blocks` KV blocks, given each replica's view
    /// and `hit(r)`, the blocks of the request's prefix replica `r` has cached (as the
    /// router sees them).
    pub(crate) fn pick(
        &mut self,
        views: &[ReplicaView],
        prompt_blocks: u64,
        hit: &dyn Fn(usize) -> u64,
    ) -> usize {
        let n = views.len();
        // The lowest key; ties to the fewest outstanding requests, then the lowest index.
        let argmin = |key: &dyn Fn(usize) -> f64| {
            (1..n).fold(0, |best, r| {
                let (a, b) = (key(r), key(best));
                if a < b || (a == b && views[r].outstanding < views[best].outstanding) {
                    r
                } else {
                    best
                }
            })
        };
        match self.router {
            Router::RoundRobin => {
                let r = (self.next % n as u64) as usize;
                self.next += 1;
                r
            }
            Router::Random => self.rng.below(n as u64) as usize,
            Router::LeastOutstanding => argmin(&|r| views[r].outstanding as f64),
            Router::LeastKv => argmin(&|r| views[r].kv_used_blocks as f64),
            Router::PrefixAffinity => {
                let most = views.iter().map(|v| v.outstanding).max().unwrap_or(0);
                let fewest = views.iter().map(|v| v.outstanding).min().unwrap_or(0);
                let imbalanced = most - fewest > BALANCE_ABS_THRESHOLD
                    && most as f64 > BALANCE_REL_THRESHOLD * fewest as f64;
                if imbalanced {
                    return argmin(&|r| views[r].outstanding as f64);
                }
                let best = argmin(&|r| -(hit(r) as f64));
                let rate = hit(best) as f64 / prompt_blocks.max(1) as f64;
                if rate > CACHE_THRESHOLD {
                    best
                } else {
                    argmin(&|r| views[r].outstanding as f64)
                }
            }
            Router::KvAware => argmin(&|r| {
                let prefill = prompt_blocks.saturating_sub(hit(r)) as f64;
                KV_OVERLAP_WEIGHT * prefill + views[r].kv_used_blocks as f64
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(outstanding: u64, kv_used_blocks: u64) -> ReplicaView {
        ReplicaView {
            outstanding,
            kv_used_blocks,
        }
    }

    #[test]
    fn names_round_trip_and_an_unknown_one_lists_the_known() {
        for r in Router::ALL {
            assert_eq!(r.name().parse::<Router>().unwrap(), r);
            assert_eq!(r.to_string().to_uppercase().parse::<Router>().unwrap(), r);
        }
        assert_eq!(
            "least_kv".parse::<Router>().unwrap(),
            Router::LeastKv,
            "`_` reads as `-`"
        );
        assert_eq!(
            "fastest".parse::<Router>().unwrap_err().to_string(),
            format!("unknown router \"fastest\"; expected {}", Router::EXPECTED)
        );
    }

    #[test]
    fn each_router_follows_its_formula() {
        let views = [view(3, 40), view(1, 90), view(2, 20)];
        // The request's prefix: 8 of its 10 blocks cached on replica 1, 2 on replica 0.
        let hit = |r: usize| [2, 8, 0][r];
        let pick = |router| Routing::new(router).pick(&views, 10, &hit);
        assert_eq!(pick(Router::LeastOutstanding), 1);
        assert_eq!(pick(Router::LeastKv), 2);
        // 8/10 cached > 0.3, loads balanced: the longest match.
        assert_eq!(pick(Router::PrefixAffinity), 1);
        // Costs: 1·8 + 40 = 48, 1·2 + 90 = 92, 1·10 + 20 = 30.
        assert_eq!(pick(Router::KvAware), 2);
        let mut rr = Routing::new(Router::RoundRobin);
        let order: Vec<usize> = (0..7).map(|_| rr.pick(&views, 10, &hit)).collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0]);
        let mut random = Routing::new(Router::Random);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[random.pick(&views, 10, &hit)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn prefix_affinity_balances_load_past_sglangs_thresholds_and_spreads_new_prefixes() {
        let hit = |r: usize| [0, 9, 0][r];
        // 100 against 30 outstanding: 70 > 64 and 100 > 1.5 · 30, so load wins.
        let imbalanced = [view(50, 0), view(100, 0), view(30, 0)];
        assert_eq!(
            Routing::new(Router::PrefixAffinity).pick(&imbalanced, 10, &hit),
            2
        );
        // 100 against 40: 60 is within 64, so the cache still wins.
        let within = [view(50, 0), view(100, 0), view(40, 0)];
        assert_eq!(
            Routing::new(Router::PrefixAffinity).pick(&within, 10, &hit),
            1
        );
        // A match of 3 in 10 blocks is not above 0.3: the least loaded takes it.
        let weak = |r: usize| [0, 3, 0][r];
        let loads = [view(3, 0), view(2, 0), view(1, 0)];
        assert_eq!(
            Routing::new(Router::PrefixAffinity).pick(&loads, 10, &weak),
            2
        );
    }

    #[test]
    fn fleets_are_checked() {
        assert_eq!(Fleet::single().validate(), Ok(()));
        assert_eq!(Fleet::single().label(), "");
        let zero = Fleet {
            replicas: 0,
            ..Fleet::single()
        };
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "replicas must be at least 1, got 0"
        );
        let stale = Fleet {
            router_staleness_s: -1.0,
            ..Fleet::single()
        };
        assert!(stale
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("router staleness (s) must lie in [0, 1e6], got -1"));
        let capped = Fleet {
            replicas: 4,
            router: Router::KvAware,
            queue_cap: Some(0),
            prefix_cache: true,
            ..Fleet::single()
        };
        assert!(capped.validate().is_err());
        assert_eq!(
            Fleet {
                queue_cap: Some(8),
                ..capped
            }
            .label(),
            "4 replicas, kv-aware, prefix cache, queue cap 8"
        );
    }
}
