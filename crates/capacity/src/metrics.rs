//! Figures from one simulation: per-request latency percentiles, throughput, goodput, cost,
//! the bottleneck split and KV headroom over time, overall and per slice.

use serde::{Deserialize, Serialize};

use crate::profile::HardwareProfile;
use crate::sim::{ServingPolicy, SimOutcome, Slo};
use crate::trace::Trace;

/// Nearest-rank percentiles and the mean of one latency, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Values summarised (0: every figure is 0).
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Over the non-NaN values; reorders `scratch`.
    pub fn of(values: impl Iterator<Item = f64>, scratch: &mut Vec<f64>) -> Percentiles {
        scratch.clear();
        scratch.extend(values.filter(|v| !v.is_nan()));
        let n = scratch.len();
        if n == 0 {
            return Percentiles::default();
        }
        let mean = scratch.iter().sum::<f64>() / n as f64;
        // Select from the top quantile down, each within the part below the previous one.
        let rank = |q: f64| policy::nearest_rank(q, n as u64) as usize - 1;
        let (k99, k90, k50) = (rank(0.99), rank(0.90), rank(0.50));
        let p99 = *scratch.select_nth_unstable_by(k99, f64::total_cmp).1;
        let p90 = *scratch[..=k99]
            .select_nth_unstable_by(k90, f64::total_cmp)
            .1;
        let p50 = *scratch[..=k90]
            .select_nth_unstable_by(k50, f64::total_cmp)
            .1;
        Percentiles {
            count: n as u64,
            mean,
            p50,
            p90,
            p99,
        }
    }
}

/// Latencies, throughput and goodput of one slice (or of all traffic).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceMetrics {
    /// The slice's code, or "all".
    pub slice: String,
    pub requests: u64,
    /// Time to first token.
    pub ttft: Percentiles,
    /// Time per output token after the first, per request.
    pub tpot: Percentiles,
    /// End-to-end latency.
    pub e2e: Percentiles,
    /// Output tokens of the requests served (a rejected request has none).
    pub output_tokens: u64,
    /// Requests refused at a full queue: no latency, and against goodput.
    pub rejected: u64,
    /// Requests that met both SLOs, per second of the run.
    pub goodput_per_s: f64,
    /// Share of requests that met both SLOs.
    pub slo_attainment: f64,
}

/// Where the time went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// Shares of the run's wall time: iterations under the compute roof, under the memory
    /// roof, their fixed overhead, and the engine idle. They sum to 1.
    pub compute_share: f64,
    pub memory_share: f64,
    pub overhead_share: f64,
    pub idle_share: f64,
    /// Share of all requests' end-to-end latency spent queued before admission.
    pub queueing_share_of_latency: f64,
    pub iterations: u64,
    pub preemptions: u64,
    /// Tokens through the model per iteration (prefill, recomputation and decode).
    pub mean_tokens_per_iteration: f64,
    /// The largest of compute, memory and queueing: "compute", "memory" or "queueing".
    pub dominant: String,
}

/// Peak KV-cache use in one window of time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvWindow {
    pub start_s: f64,
    pub end_s: f64,
    pub peak_used_blocks: u64,
    /// Share of blocks free at the window's peak.
    pub headroom: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvReport {
    pub block_size: u32,
    pub blocks: u64,
    pub bytes_per_block: f64,
    pub weight_bytes: f64,
    pub kv_bytes: f64,
    pub peak_used_blocks: u64,
    pub min_headroom: f64,
    /// 100 windows over the arrivals, then one for the drain after the last arrival.
    pub timeline: Vec<KvWindow>,
}

/// Everything one simulation measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub requests: u64,
    /// Replicas that served the trace; throughput, goodput and cost are the fleet's.
    pub replicas: u32,
    /// Share of admitted prompt tokens served from the replicas' prefix caches.
    pub prefix_cache_hit_rate: f64,
    /// From the first arrival to the last token, seconds.
    pub duration_s: f64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub output_tokens_per_s: f64,
    pub total_tokens_per_s: f64,
    /// Time between consecutive tokens of a request, over all tokens (histogram
    /// percentiles, within 1/32): its p99 is the decode stall.
    pub tbt: Percentiles,
    pub queue: Percentiles,
    pub cost_per_million_output_tokens: f64,
    pub all: SliceMetrics,
    pub by_slice: Vec<SliceMetrics>,
    pub bottleneck: Bottleneck,
    pub kv: KvReport,
}

impl Metrics {
    pub fn new(
        outcome: &SimOutcome,
        trace: &Trace,
        policy: &ServingPolicy,
        hardware: &HardwareProfile,
        slo: &Slo,
    ) -> Metrics {
        let duration = (outcome.end_s - outcome.first_arrival_s).max(f64::MIN_POSITIVE);
        let mut scratch = Vec::with_capacity(trace.requests.len());
        let meets = |i: usize| {
            outcome.ttft_s[i] <= slo.ttft_p99_s
                && (outcome.tpot_s[i].is_nan() || outcome.tpot_s[i] <= slo.tpot_p99_s)
        };
        let mut slice_metrics = |name: &str, filter: &dyn Fn(usize) -> bool| {
            let ids = || (0..trace.requests.len()).filter(|&i| filter(i));
            let requests = ids().count() as u64;
            let good = ids().filter(|&i| meets(i)).count() as u64;
            SliceMetrics {
                slice: name.into(),
                requests,
                ttft: Percentiles::of(ids().map(|i| outcome.ttft_s[i]), &mut scratch),
                tpot: Percentiles::of(ids().map(|i| outcome.tpot_s[i]), &mut scratch),
                e2e: Percentiles::of(ids().map(|i| outcome.e2e_s[i]), &mut scratch),
                output_tokens: ids()
                    .filter(|&i| !outcome.e2e_s[i].is_nan())
                    .map(|i| trace.requests[i].output_tokens as u64)
                    .sum(),
                rejected: ids().filter(|&i| outcome.ttft_s[i].is_nan()).count() as u64,
                goodput_per_s: good as f64 / duration,
                slo_attainment: if requests == 0 {
                    0.0
                } else {
                    good as f64 / requests as f64
                },
            }
        };
        let all = slice_metrics("all", &|_| true);
        let by_slice = trace
            .slices
            .iter()
            .enumerate()
            .map(|(s, name)| slice_metrics(name, &|i| trace.requests[i].slice as usize == s))
            .collect();
        let queue = Percentiles::of(outcome.queue_s.iter().copied(), &mut scratch);
        let tbt = Percentiles {
            count: 0,
            mean: 0.0,
            p50: outcome.gaps.quantile(0.5),
            p90: outcome.gaps.quantile(0.9),
            p99: outcome.gaps.quantile(0.99),
        };
        let tbt = if tbt.p50.is_nan() {
            Percentiles::default()
        } else {
            Percentiles {
                count: outcome.gaps_count(),
                ..tbt
            }
        };
        let prompt_tokens: u64 = trace.requests.iter().map(|r| r.prompt_tokens as u64).sum();
        let output_tokens = all.output_tokens;
        let busy = outcome.compute_bound_s + outcome.memory_bound_s + outcome.overhead_s;
        let wall = busy + outcome.idle_s;
        let share = |x: f64| if wall > 0.0 { x / wall } else { 0.0 };
        let latency_total: f64 = outcome.e2e_s.iter().sum();
        let queued_total: f64 = outcome.queue_s.iter().sum();
        let queueing = if latency_total > 0.0 {
            queued_total / latency_total
        } else {
            0.0
        };
        let compute = share(outcome.compute_bound_s);
        let memory = share(outcome.memory_bound_s);
        let dominant = if queueing >= compute.max(memory) {
            "queueing"
        } else if compute >= memory {
            "compute"
        } else {
            "memory"
        };
        let kv = &outcome.kv;
        let timeline: Vec<KvWindow> = outcome
            .kv_peak_blocks
            .iter()
            .enumerate()
            .map(|(w, &peak)| {
                let start = outcome.first_arrival_s + w as f64 * outcome.window_s;
                let last = w + 1 == outcome.kv_peak_blocks.len();
                KvWindow {
                    start_s: start,
                    end_s: if last {
                        outcome.end_s.max(start)
                    } else {
                        start + outcome.window_s
                    },
                    peak_used_blocks: peak,
                    headroom: 1.0 - peak as f64 / kv.blocks as f64,
                }
            })
            .collect();
        let peak_used_blocks = outcome.kv_peak_blocks.iter().copied().max().unwrap_or(0);
        Metrics {
            requests: trace.requests.len() as u64,
            replicas: outcome.replicas,
            prefix_cache_hit_rate: outcome.prefix_cache_hit_rate(),
            duration_s: duration,
            prompt_tokens,
            output_tokens,
            output_tokens_per_s: output_tokens as f64 / duration,
            total_tokens_per_s: (output_tokens + prompt_tokens) as f64 / duration,
            tbt,
            queue,
            cost_per_million_output_tokens: hardware.cost_per_hour
                * outcome.replicas as f64
                * duration
                / 3600.0
                / output_tokens as f64
                * 1e6,
            all,
            by_slice,
            bottleneck: Bottleneck {
                compute_share: compute,
                memory_share: memory,
                overhead_share: share(outcome.overhead_s),
                idle_share: share(outcome.idle_s),
                queueing_share_of_latency: queueing,
                iterations: outcome.iterations,
                preemptions: outcome.preemptions,
                mean_tokens_per_iteration: outcome.processed_tokens as f64
                    / outcome.iterations.max(1) as f64,
                dominant: dominant.into(),
            },
            kv: KvReport {
                block_size: policy.block_size,
                blocks: kv.blocks,
                bytes_per_block: kv.bytes_per_block,
                weight_bytes: kv.weight_bytes,
                kv_bytes: kv.kv_bytes,
                peak_used_blocks,
                min_headroom: 1.0 - peak_used_blocks as f64 / kv.blocks as f64,
                timeline,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_against_a_sort() {
        let values: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64).collect();
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let p = Percentiles::of(values.iter().copied(), &mut Vec::new());
        // Nearest rank: the ceil(q·n)-th smallest.
        assert_eq!(p.p50, sorted[499]);
        assert_eq!(p.p90, sorted[899]);
        assert_eq!(p.p99, sorted[989]);
        assert_eq!(p.mean, 499.5);
        let empty = Percentiles::of([f64::NAN].into_iter(), &mut Vec::new());
        assert_eq!(empty, Percentiles::default());
    }
}
