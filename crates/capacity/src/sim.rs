//! The serving simulator: iteration-level, discrete in time. Each iteration the scheduler
//! gives the running sequences their next tokens under the paged KV cache, admits waiting
//! requests under the policy's limits, runs one batch (prefill chunks and decode steps),
//! prices it with the roofline, and moves the clock.
//!
//! Continuous batching (with or without chunked prefill) follows vLLM v1's scheduler,
//! `Scheduler.schedule` in `vllm/v1/core/sched/scheduler.py` as of vllm-project/vllm commit
//! 00024d314514900f361ad072af6931e403b7f589, with FCFS order and no prefix cache:
//! - One token budget per iteration (`max_num_batched_tokens`) that decodes and prompt tokens
//!   share. The RUNNING sequences are scheduled first, in admission order, while budget
//!   remains: a decode takes 1 token, a prompt still being prefilled takes what it needs up
//!   to what remains.
//! - A running sequence whose next token starts a KV block gets one; when none is free, the
//!   most recently admitted running sequence is preempted (`self.running.pop()`), its
//!   blocks freed, and it goes back to the FRONT of the waiting queue (`prepend_request`),
//!   to be recomputed from its prompt and the tokens it has emitted. When the sequence that
//!   needs the block is itself the last, it is the one preempted and no further running
//!   sequence is scheduled in that iteration.
//! - WAITING requests are admitted only if no sequence was preempted in the iteration
//!   (`if not preempted_reqs:`), in queue order, while a slot (`max_num_seqs`), budget and
//!   the blocks remain; the first that does not fit stops admission (FCFS). With chunked
//!   prefill a prompt takes what remains of the budget; without it, a prompt longer than
//!   what remains waits (`if not enable_chunked_prefill and num_new_tokens > token_budget:
//!   break`).
//! - Without chunked prefill the budget is vLLM's default for that case,
//!   max(`max_model_len`, 2048) (`SchedulerConfig`, whose `verify_max_model_len` refuses a
//!   smaller one, in `vllm/config/scheduler.py`); see [`Batching::token_budget`].
//!
//! Two simplifications remain: a prompt's KV blocks are all taken when it is admitted
//! (vLLM allocates them chunk by chunk), and a budget smaller than the batch limit, which
//! vLLM refuses, is run as vLLM's loop would run it (the youngest decodes wait).
//!
//! Work per iteration is O(running sequences) with no allocation; the clock jumps over idle
//! gaps; the number of iterations is bounded by the trace (an error, never a hang).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::cost::{IterationWork, Roofline};
use crate::error::{at_least_one, in_range, positive, CapacityError};
use crate::figures::shortest;
use crate::fleet::{Fleet, ReplicaView, Routing};
use crate::prefix_cache::PrefixCache;
use crate::profile::{HardwareProfile, ModelProfile, WeightPath};
use crate::trace::Trace;
use policy::SplitMix64;

/// How the scheduler forms batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Batching {
    /// Request-level batching (FasterTransformer): a batch is formed when the engine is
    /// idle, prefilled padded to its longest prompt, decoded until its longest output ends
    /// (finished rows still occupy their slots), and each row reserves KV for the whole
    /// context.
    Static,
    /// Iteration-level batching (Orca) on a paged KV cache (vLLM): sequences join and leave
    /// between iterations; a joining prompt is prefilled whole in one iteration, stalling the
    /// decodes batched with it. The iteration's tokens are capped by vLLM's default budget
    /// without chunked prefill ([`Batching::token_budget`]); a prompt that does not fit in
    /// what the decodes leave of it waits.
    Continuous,
    /// Continuous batching with chunked prefill (Sarathi-Serve, vLLM's default): every
    /// iteration runs the decodes, then fills the rest of `token_budget` with prompt chunks.
    ChunkedPrefill { token_budget: u32 },
}

/// vLLM's `SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS` (vllm/config/scheduler.py).
pub const VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS: u32 = 2048;

impl Batching {
    /// The names [`Batching::from_str`] reads, for messages.
    pub const EXPECTED: &'static str = "static, continuous or chunked:BUDGET";

    /// The most tokens one iteration runs (vLLM's `max_num_batched_tokens`) for a model of
    /// `context_len` tokens: the chunked-prefill budget, or for `continuous` vLLM's default
    /// when chunked prefill is off, max(`context_len`, 2048), so that any request fits in
    /// an iteration of its own; none for static batching, which prefills a whole batch.
    pub fn token_budget(&self, context_len: u32) -> Option<u32> {
        match self {
            Batching::Static => None,
            Batching::Continuous => Some(context_len.max(VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS)),
            Batching::ChunkedPrefill { token_budget } => Some(*token_budget),
        }
    }
}

/// `static`, `continuous` or `chunked:BUDGET`: the one spelling, which `decode-lab capacity
/// --policy` takes, the report writes and the lab's batching ticks make.
impl fmt::Display for Batching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Batching::Static => f.write_str("static"),
            Batching::Continuous => f.write_str("continuous"),
            Batching::ChunkedPrefill { token_budget } => write!(f, "chunked:{token_budget}"),
        }
    }
}

/// Reads what `Display` writes; the budget is any whole number a u32 holds (a budget of 0
/// is read, and refused by [`ServingPolicy::validate`], which says why).
impl FromStr for Batching {
    type Err = CapacityError;

    fn from_str(text: &str) -> Result<Batching, CapacityError> {
        match text {
            "static" => Ok(Batching::Static),
            "continuous" => Ok(Batching::Continuous),
            _ => text
                .strip_prefix("chunked:")
                .and_then(|budget| budget.parse().ok())
                .map(|token_budget| Batching::ChunkedPrefill { token_budget })
                .ok_or_else(|| CapacityError::UnknownName {
                    kind: "batching".into(),
                    name: text.into(),
                    expected: Batching::EXPECTED.into(),
                }),
        }
    }
}

/// One serving configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServingPolicy {
    pub batching: Batching,
    /// Most sequences running at once (the batch limit).
    pub max_sequences: u32,
    /// Tokens per KV-cache block.
    pub block_size: u32,
    pub weights: WeightPath,
}

impl ServingPolicy {
    /// A batch limit and a token budget of at least 1 (else no request is ever admitted)
    /// and a KV block of at least one token.
    pub fn validate(&self) -> Result<(), CapacityError> {
        if self.max_sequences == 0 {
            return Err(CapacityError::NeverAdmits {
                reason: "its batch limit (max_sequences) is 0, so no sequence can run; a batch limit must be at least 1".into(),
            });
        }
        if let Batching::ChunkedPrefill { token_budget: 0 } = self.batching {
            return Err(CapacityError::NeverAdmits {
                reason: "its chunked-prefill token budget is 0, so no prompt token can run; the budget must be at least 1".into(),
            });
        }
        at_least_one("KV block size (tokens)", self.block_size as u64)?;
        Ok(())
    }

    /// `continuous, 32 seqs, full` and the like.
    pub fn label(&self) -> String {
        format!(
            "{}, {} seqs, {}",
            self.batching,
            self.max_sequences,
            self.weights.name()
        )
    }
}

/// Latency targets. A request meets them when its TTFT and its time per output token are
/// within them; the gates hold them to the 99th percentiles.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_p99_s: f64,
    pub tpot_p99_s: f64,
}

/// The p99 SLOs a plan may set, seconds: a nanosecond to about 31 years.
pub const MIN_SLO_S: f64 = 1e-9;
pub const MAX_SLO_S: f64 = 1e9;

impl Slo {
    /// Both targets a number of seconds within [`MIN_SLO_S`, `MAX_SLO_S`].
    pub fn validate(&self) -> Result<(), CapacityError> {
        for (what, slo) in [
            ("p99 TTFT SLO (s)", self.ttft_p99_s),
            ("p99 time-per-token SLO (s)", self.tpot_p99_s),
        ] {
            in_range(what, positive(what, slo)?, MIN_SLO_S, MAX_SLO_S)?;
        }
        Ok(())
    }
}

/// The KV cache a policy gets on a machine.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvBudget {
    pub weight_bytes: f64,
    /// Memory left for the cache after the reserve and the weights.
    pub kv_bytes: f64,
    pub bytes_per_block: f64,
    pub blocks: u64,
}

impl KvBudget {
    pub fn new(
        hardware: &HardwareProfile,
        model: &ModelProfile,
        policy: &ServingPolicy,
    ) -> Result<KvBudget, CapacityError> {
        at_least_one("KV block size (tokens)", policy.block_size as u64)?;
        let usable = hardware.memory_bytes * (1.0 - hardware.memory_reserve);
        let weight_bytes = model.weight_bytes(policy.weights);
        if weight_bytes >= usable {
            return Err(CapacityError::WeightsTooLarge {
                weights: format!("{} {}", model.name, policy.weights.name()),
                weight_bytes,
                usable_bytes: usable,
            });
        }
        let kv_bytes = usable - weight_bytes;
        let bytes_per_block = model.kv_cache_bytes(1, policy.block_size as u64);
        let blocks = (kv_bytes / bytes_per_block).floor().min(u32::MAX as f64) as u64;
        Ok(KvBudget {
            weight_bytes,
            kv_bytes,
            bytes_per_block,
            blocks,
        })
    }
}

/// Histogram of token gaps keyed by the top bits of the f64 itself (exponent and five
/// mantissa bits): 32 buckets per octave, each at most 1/32 of its value wide (±1.6 %), from
/// 2^-30 s (1 ns) to 2^12 s; a key is a shift, not a logarithm, so the hot loop stays cheap.
#[derive(Clone, Debug)]
pub(crate) struct GapHistogram {
    counts: Vec<u64>,
    total: u64,
}

const GAP_MANTISSA_BITS: u32 = 5;
const GAP_SHIFT: u32 = 52 - GAP_MANTISSA_BITS;
/// Key of 2^-30: biased exponent 1023 - 30, times 32 buckets per octave.
const GAP_LOW_KEY: u64 = (1023 - 30) << GAP_MANTISSA_BITS;
const GAP_BUCKETS: usize = 42 << GAP_MANTISSA_BITS;

impl GapHistogram {
    fn new() -> GapHistogram {
        GapHistogram {
            counts: vec![0; GAP_BUCKETS],
            total: 0,
        }
    }

    fn add(&mut self, gap_s: f64, count: u64) {
        // Gaps are positive; anything else lands in the lowest bucket.
        let key = (gap_s.max(0.0).to_bits() >> GAP_SHIFT).saturating_sub(GAP_LOW_KEY);
        let i = (key as usize).min(GAP_BUCKETS - 1);
        self.counts[i] += count;
        self.total += count;
    }

    /// The nearest-rank quantile, as the middle of its bucket; NaN when empty.
    pub(crate) fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return f64::NAN;
        }
        let rank = policy::nearest_rank(q, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let key = i as u64 + GAP_LOW_KEY;
                return f64::from_bits((key << GAP_SHIFT) | (1 << (GAP_SHIFT - 1)));
            }
        }
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_quantiles_are_within_a_bucket_of_the_exact_ones() {
        let mut h = GapHistogram::new();
        let gaps: Vec<f64> = (1..=10_000)
            .map(|i| 1e-4 * (1.0 + (i as f64).sqrt()))
            .collect();
        for &g in &gaps {
            h.add(g, 1);
        }
        for q in [0.5, 0.9, 0.99] {
            let exact = gaps[(q * gaps.len() as f64).ceil() as usize - 1];
            let approx = h.quantile(q);
            assert!(
                (approx / exact - 1.0).abs() <= 1.0 / 32.0,
                "{q}: {approx} vs {exact}"
            );
        }
        assert!(GapHistogram::new().quantile(0.5).is_nan());
    }

    /// The tiny model on a machine whose KV cache holds exactly `blocks` blocks of
    /// `block_size` tokens.
    fn machine(blocks: u64, block_size: u32) -> (HardwareProfile, ModelProfile) {
        let model = ModelProfile::tiny();
        let mut hw = HardwareProfile::preset("lab-cpu").unwrap();
        hw.memory_reserve = 0.0;
        hw.memory_bytes = model.weight_bytes(WeightPath::Full)
            + (blocks as f64 + 0.5) * model.kv_cache_bytes(1, block_size as u64);
        (hw, model)
    }

    /// Requests of (arrival s, prompt tokens, output tokens), in one slice.
    fn trace(requests: &[(f64, u32, u32)]) -> Trace {
        Trace {
            slices: vec!["en".into()],
            requests: requests
                .iter()
                .map(
                    |&(arrival_s, prompt_tokens, output_tokens)| crate::trace::Request {
                        arrival_s,
                        prompt_tokens,
                        output_tokens,
                        slice: 0,
                        prefix: None,
                    },
                )
                .collect(),
            prefixes: Vec::new(),
        }
    }

    fn policy(batching: Batching, max_sequences: u32, block_size: u32) -> ServingPolicy {
        ServingPolicy {
            batching,
            max_sequences,
            block_size,
            weights: WeightPath::Full,
        }
    }

    /// `simulate`'s outcome, with what each iteration scheduled.
    fn run_logged(
        trace: &Trace,
        hw: &HardwareProfile,
        model: &ModelProfile,
        policy: &ServingPolicy,
    ) -> (SimOutcome, Vec<Step>) {
        let checked = simulate(trace, hw, model, policy).unwrap();
        let kv = KvBudget::new(hw, model, policy).unwrap();
        let roofline = Roofline::new(hw, model, policy.weights);
        let fleet = Fleet::single();
        let none = DraftModel {
            acceptance: Vec::new(),
            draft_s_per_token: 0.0,
        };
        let mut sim = Simulator::new(trace, model, policy, &fleet, &none, kv, roofline);
        sim.drive().unwrap();
        let steps = std::mem::take(&mut sim.replicas[0].steps);
        let out = sim.run().unwrap();
        assert_eq!(
            (out.iterations, out.preemptions, out.end_s),
            (checked.iterations, checked.preemptions, checked.end_s)
        );
        (out, steps)
    }

    fn events(steps: &[Step]) -> Vec<Vec<Event>> {
        steps.iter().map(|s| s.events.clone()).collect()
    }

    /// vLLM v1's rules, checked on every iteration: the tokens scheduled fit in the budget;
    /// decodes come before any prompt tokens; nothing is admitted in an iteration that
    /// preempted (so nothing is admitted and preempted in the same one).
    fn assert_vllm_rules(steps: &[Step], budget: u64) {
        for (n, step) in steps.iter().enumerate() {
            let mut tokens = 0u64;
            let mut prompt_seen = false;
            for e in &step.events {
                match *e {
                    Event::Decode(_) => {
                        assert!(
                            !prompt_seen,
                            "iteration {n}: a decode after a prompt: {step:?}"
                        );
                        tokens += 1;
                    }
                    Event::Prefill(_, chunk) | Event::Admit(_, chunk) => {
                        prompt_seen = true;
                        tokens += chunk as u64;
                    }
                    Event::Preempt(_) => {}
                }
            }
            assert!(tokens <= budget, "iteration {n}: {tokens} tokens: {step:?}");
            let preempts = step.events.iter().any(|e| matches!(e, Event::Preempt(_)));
            let admits = step.events.iter().any(|e| matches!(e, Event::Admit(..)));
            assert!(
                !(preempts && admits),
                "iteration {n} preempted and admitted: {step:?}"
            );
        }
    }

    use Event::{Admit, Decode, Preempt, Prefill};

    /// Three KV blocks of 4 tokens. Requests 0 and 1 fill two; request 2 arrives while they
    /// run. In iteration 2 both running sequences need a block for their next token and one
    /// is free: request 0 takes it, request 1 (the last admitted) is preempted, and request 2
    /// is not admitted. (Admitting first, as the simulator used to, took the free block for
    /// request 2 and preempted it in the same iteration, before it computed anything, and
    /// booked its queueing time as ending there.)
    #[test]
    fn running_sequences_get_their_blocks_before_admission_and_a_preempting_iteration_admits_nothing(
    ) {
        let (hw, model) = machine(3, 4);
        let t = trace(&[(0.0, 4, 3), (0.0, 4, 3), (1e-9, 4, 3)]);
        let p = policy(Batching::Continuous, 8, 4);
        assert_eq!(KvBudget::new(&hw, &model, &p).unwrap().blocks, 3);
        let (out, steps) = run_logged(&t, &hw, &model, &p);
        assert_eq!(
            events(&steps),
            vec![
                vec![Admit(0, 4), Admit(1, 4)],
                // Request 1 goes back to the front of the queue, before request 2.
                vec![Decode(0), Preempt(1)],
                // Request 1 needs 2 blocks again (its prompt and its token); 1 is free.
                vec![Decode(0)],
                vec![Admit(1, 5), Admit(2, 4)],
                // Request 2 is now the last admitted: it preempts itself.
                vec![Decode(1), Preempt(2)],
                vec![Admit(2, 5)],
                vec![Decode(2)],
            ]
        );
        assert_eq!(out.preemptions, 2);
        assert_vllm_rules(&steps, 2048);
        // Request 2 queued until its real admission, in iteration 4.
        assert_eq!(out.queue_s[2], steps[3].start_s - 1e-9);
        assert!(steps[3].start_s > steps[1].start_s);
        assert_eq!(out.ttft_s[2], steps[4].start_s - 1e-9);
    }

    /// Four KV blocks of 4 tokens, five requests at once. In iteration 2 the four running
    /// sequences each need a block and none is free: request 0 preempts request 3, request 1
    /// preempts request 2 (vLLM's `self.running.pop()`, the most recently admitted), and
    /// both go back to the FRONT of the waiting queue, in their order, ahead of request 4.
    #[test]
    fn preemption_takes_the_most_recently_admitted_and_requeues_it_at_the_front() {
        let (hw, model) = machine(4, 4);
        let t = trace(&[(0.0, 4, 2); 5]);
        let p = policy(Batching::Continuous, 8, 4);
        let (out, steps) = run_logged(&t, &hw, &model, &p);
        assert_eq!(
            events(&steps),
            vec![
                vec![Admit(0, 4), Admit(1, 4), Admit(2, 4), Admit(3, 4)],
                vec![Preempt(3), Decode(0), Preempt(2), Decode(1)],
                // Recomputed: the prompt and the token each emitted.
                vec![Admit(2, 5), Admit(3, 5)],
                vec![Admit(4, 4)],
                vec![Decode(4)],
            ]
        );
        assert_eq!(out.preemptions, 2);
        assert_vllm_rules(&steps, 2048);
    }

    /// Without chunked prefill the budget is max(context, 2048) = 2048 tokens for the tiny
    /// model (context 256). Twelve prompts of 200 tokens at once: ten fit (2,000 tokens);
    /// the eleventh waits for the next iteration, where the ten decodes go first.
    #[test]
    fn continuous_batching_keeps_to_vllms_token_budget() {
        let (hw, model) = machine(1_000, 16);
        assert_eq!(
            Batching::Continuous.token_budget(model.context_len),
            Some(2048)
        );
        let t = trace(&[(0.0, 200, 2); 12]);
        let (out, steps) = run_logged(&t, &hw, &model, &policy(Batching::Continuous, 64, 16));
        let mut second: Vec<Event> = (0..10).map(Decode).collect();
        second.extend([Admit(10, 200), Admit(11, 200)]);
        assert_eq!(
            events(&steps),
            vec![
                (0..10).map(|r| Admit(r, 200)).collect(),
                second,
                vec![Decode(10), Decode(11)],
            ]
        );
        assert_eq!(out.queue_s[10], steps[1].start_s);
        assert_vllm_rules(&steps, 2048);
    }

    /// Chunked prefill with a budget of 8 tokens: a prompt is admitted with what remains of
    /// the budget and chunked; the decodes run before the prompt chunks.
    #[test]
    fn chunked_prefill_admits_into_what_remains_of_the_budget_and_runs_decodes_first() {
        let (hw, model) = machine(1_000, 16);
        let t = trace(&[(0.0, 10, 3), (0.0, 10, 3)]);
        let p = policy(Batching::ChunkedPrefill { token_budget: 8 }, 4, 16);
        let (_, steps) = run_logged(&t, &hw, &model, &p);
        assert_eq!(
            events(&steps),
            vec![
                vec![Admit(0, 8)],
                vec![Prefill(0, 2), Admit(1, 6)],
                vec![Decode(0), Prefill(1, 4)],
                vec![Decode(0), Decode(1)],
                vec![Decode(1)],
            ]
        );
        assert_vllm_rules(&steps, 8);
    }

    /// The rules hold on a generated trace under KV pressure, in both batchings.
    #[test]
    fn vllms_rules_hold_under_kv_pressure() {
        let (hw, model) = machine(48, 16);
        // The preset's lengths (about 64 tokens a request), arriving faster than served.
        let spec = crate::trace::TraceSpec {
            requests: 400,
            arrivals: crate::trace::Arrivals::Poisson { rate_per_s: 1e5 },
            ..crate::trace::TraceSpec::preset("poisson").unwrap()
        };
        let t = spec.generate().unwrap();
        for (batching, budget) in [
            (Batching::Continuous, 2048),
            (Batching::ChunkedPrefill { token_budget: 64 }, 64),
            (Batching::ChunkedPrefill { token_budget: 24 }, 24),
        ] {
            let (out, steps) = run_logged(&t, &hw, &model, &policy(batching, 32, 16));
            assert!(
                out.preemptions > 20,
                "{batching}: {} preemptions",
                out.preemptions
            );
            assert_vllm_rules(&steps, budget);
        }
    }

    #[test]
    fn batchings_read_back_what_they_print() {
        for b in [
            Batching::Static,
            Batching::Continuous,
            Batching::ChunkedPrefill { token_budget: 128 },
            Batching::ChunkedPrefill { token_budget: 0 },
        ] {
            assert_eq!(b.to_string().parse::<Batching>(), Ok(b));
        }
        assert_eq!(
            Batching::ChunkedPrefill { token_budget: 64 }.to_string(),
            "chunked:64"
        );
        for bad in [
            "greedy",
            "chunked:",
            "chunked:-5",
            "chunked:1e3",
            "chunked-prefill/128",
        ] {
            assert_eq!(
                bad.parse::<Batching>().unwrap_err().to_string(),
                format!("unknown batching {bad:?}; expected static, continuous or chunked:BUDGET")
            );
        }
    }
}

impl SimOutcome {
    /// Token gaps measured (every emitted token but each request's first).
    pub fn gaps_count(&self) -> u64 {
        self.gaps.total
    }

    /// Share of the prompt tokens of admitted requests (at their first admission) that
    /// the prefix cache served; 0 without a cache.
    pub fn prefix_cache_hit_rate(&self) -> f64 {
        if self.prompt_tokens_admitted == 0 {
            0.0
        } else {
            self.prefix_hit_tokens as f64 / self.prompt_tokens_admitted as f64
        }
    }
}

/// What one simulation measured, per request and in total; `report` turns it into figures.
/// With several replicas the times are summed over replicas (shares of replica time) and
/// the KV figures are those of the fullest replica in each window.
#[derive(Clone, Debug)]
pub struct SimOutcome {
    /// Per request, by trace index: time to first token, end-to-end latency, time per
    /// output token (NaN for one-token outputs), time queued before first admission. All
    /// NaN for a rejected request.
    pub ttft_s: Vec<f64>,
    pub e2e_s: Vec<f64>,
    pub tpot_s: Vec<f64>,
    pub queue_s: Vec<f64>,
    /// Per request, the replica the router sent it to (its prefill replica when the fleet
    /// is disaggregated).
    pub replica: Vec<u32>,
    pub(crate) gaps: GapHistogram,
    pub first_arrival_s: f64,
    pub end_s: f64,
    pub replicas: u32,
    /// Requests refused at a full queue ([`Fleet::queue_cap`]).
    pub rejected: u64,
    /// Prompt tokens served from the prefix cache, and prompt tokens of admitted requests,
    /// both counted at each request's first admission.
    pub prefix_hit_tokens: u64,
    pub prompt_tokens_admitted: u64,
    pub iterations: u64,
    pub preemptions: u64,
    /// Seconds of iterations under each roof, of fixed overhead, and idle.
    pub compute_bound_s: f64,
    pub memory_bound_s: f64,
    pub overhead_s: f64,
    pub idle_s: f64,
    /// Tokens run through the model (prefill, recomputation and decode) and emitted.
    pub processed_tokens: u64,
    /// One replica's KV cache.
    pub kv: KvBudget,
    /// Peak KV blocks in use (by running requests and pinned prefixes) in each of 100 equal
    /// windows of the arrival span, then one window for the drain after the last arrival.
    pub kv_peak_blocks: Vec<u64>,
    pub window_s: f64,
}

/// One running sequence, kept in admission order.
#[derive(Clone, Copy, Debug)]
struct Running {
    /// It pinned its prefix in the replica's cache (released when it leaves).
    pinned: bool,
    request: u32,
    /// Tokens to have cached before the next emission while prefilling (the prompt, plus
    /// the tokens emitted before a preemption when recomputing).
    prefill_target: u32,
    cached: u32,
    generated: u32,
    /// KV blocks the sequence holds itself, and cached prefix blocks it shares: its
    /// context fits in the two together.
    blocks: u32,
    shared: u32,
    /// Tokens it emits at the end of the current iteration (more than one when a
    /// speculative step accepts drafted tokens).
    emits: u32,
    /// Static batching: the row's output is complete (it still occupies its slot).
    finished: bool,
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    request: u32,
    /// Tokens emitted before a preemption (0 for a fresh request).
    generated: u32,
    /// Its prompt's KV cache arrived from a prefill replica: it only decodes.
    prefilled: bool,
}

/// What a replica of a fleet does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Prefill and decode (colocated).
    Both,
    /// Prefill only: at its first token a request leaves for a decode replica.
    Prefill,
    /// Decode only: requests arrive with their prompt's KV cache.
    Decode,
}

const KV_WINDOWS: usize = 100;

/// Simulates `trace` served by `policy` on one replica. Checks every input first; same
/// inputs, same outcome.
pub fn simulate(
    trace: &Trace,
    hardware: &HardwareProfile,
    model: &ModelProfile,
    policy: &ServingPolicy,
) -> Result<SimOutcome, CapacityError> {
    simulate_fleet(trace, hardware, model, policy, &Fleet::single())
}

/// Simulates `trace` served by `fleet.replicas` replicas of `policy` behind its router.
/// Checks every input first; same inputs, same outcome. One replica with round-robin
/// routing, no cap and no prefix cache is exactly [`simulate`]. A fleet that speculates
/// needs [`simulate_speculative`].
pub fn simulate_fleet(
    trace: &Trace,
    hardware: &HardwareProfile,
    model: &ModelProfile,
    policy: &ServingPolicy,
    fleet: &Fleet,
) -> Result<SimOutcome, CapacityError> {
    let none = DraftModel {
        acceptance: Vec::new(),
        draft_s_per_token: 0.0,
    };
    simulate_speculative(trace, hardware, model, policy, fleet, &none)
}

/// The draft model of speculative decoding, as the simulator sees it: per slice of the
/// trace, the probability that a drafted token is accepted (α, measured under the plan's
/// decoding policy by `decode-lab speculate`), and the draft's seconds per token.
#[derive(Clone, Debug, PartialEq)]
pub struct DraftModel {
    pub acceptance: Vec<f64>,
    pub draft_s_per_token: f64,
}

/// [`simulate_fleet`] with speculative decoding when `fleet.speculative_k` > 0: every
/// decode step drafts up to k tokens (never past the request's last), verifies them and
/// the next position in one pass of the target (priced as a prefill chunk of k + 1
/// tokens), and emits the accepted tokens and one more; the draft's time is added to the
/// iteration.
pub fn simulate_speculative(
    trace: &Trace,
    hardware: &HardwareProfile,
    model: &ModelProfile,
    policy: &ServingPolicy,
    fleet: &Fleet,
    draft: &DraftModel,
) -> Result<SimOutcome, CapacityError> {
    hardware.validate()?;
    model.validate()?;
    fleet.validate()?;
    if fleet.speculative_k > 0 {
        if draft.acceptance.len() != trace.slices.len() {
            return Err(CapacityError::Speculation {
                reason: format!(
                    "{} acceptance rates for the trace's {} slices",
                    draft.acceptance.len(),
                    trace.slices.len()
                ),
            });
        }
        for (slice, &alpha) in trace.slices.iter().zip(&draft.acceptance) {
            in_range(
                &format!("acceptance rate of slice {slice:?}"),
                alpha,
                0.0,
                1.0,
            )?;
        }
        in_range(
            "the draft's seconds per token",
            draft.draft_s_per_token,
            0.0,
            1.0,
        )?;
        if policy.batching == Batching::Static {
            return Err(CapacityError::NeverAdmits {
                reason: "static batching decodes every row in lockstep and cannot verify a different number of drafted tokens per row; speculative decoding needs continuous batching".into(),
            });
        }
    }
    if trace.requests.is_empty() {
        return Err(CapacityError::EmptyTrace);
    }
    if trace.requests.len() > crate::trace::MAX_REQUESTS {
        return Err(CapacityError::TooManyRequests {
            requests: trace.requests.len(),
            limit: crate::trace::MAX_REQUESTS,
        });
    }
    policy.validate()?;
    if fleet.disaggregated() && policy.batching == Batching::Static {
        return Err(CapacityError::NeverAdmits {
            reason: "static batching cannot hand a request from a prefill replica to a decode replica; disaggregation needs continuous batching".into(),
        });
    }
    let kv = KvBudget::new(hardware, model, policy)?;
    let bs = policy.block_size as u64;
    let mut longest = 0u64;
    let mut previous = 0.0;
    for (i, r) in trace.requests.iter().enumerate() {
        let bad = |reason: String| CapacityError::BadRequest {
            request: i + 1,
            reason,
        };
        let tokens = r.prompt_tokens as u64 + r.output_tokens as u64;
        if r.prompt_tokens == 0 || r.output_tokens == 0 {
            return Err(bad(format!(
                "prompt_tokens {} and output_tokens {} must both be at least 1",
                r.prompt_tokens, r.output_tokens
            )));
        }
        if !(r.arrival_s.is_finite() && r.arrival_s >= previous) {
            return Err(bad(format!(
                "arrival {} s is not a time at or after the previous request's {} s",
                shortest(r.arrival_s),
                shortest(previous)
            )));
        }
        previous = r.arrival_s;
        if r.slice as usize >= trace.slices.len() {
            return Err(bad(format!(
                "slice index {} names none of the trace's {} slices",
                r.slice,
                trace.slices.len()
            )));
        }
        if let Some(p) = r.prefix {
            if p.id as usize >= trace.prefixes.len() {
                return Err(bad(format!(
                    "prefix index {} names none of the trace's {} prefixes",
                    p.id,
                    trace.prefixes.len()
                )));
            }
            if p.tokens == 0 || p.tokens > r.prompt_tokens {
                return Err(bad(format!(
                    "its shared prefix of {} tokens is not 1 to its prompt's {} tokens",
                    p.tokens, r.prompt_tokens
                )));
            }
        }
        if tokens > model.context_len as u64 {
            return Err(CapacityError::RequestTooLong {
                request: i,
                tokens,
                context_len: model.context_len as u64,
            });
        }
        longest = longest.max(tokens);
    }
    let needed_blocks = longest.div_ceil(bs);
    if needed_blocks > kv.blocks {
        return Err(CapacityError::KvTooSmall {
            needed_blocks,
            available_blocks: kv.blocks,
        });
    }
    if policy.batching == Batching::Static {
        let reserve = (model.context_len as u64).div_ceil(bs);
        if reserve > kv.blocks {
            return Err(CapacityError::NeverAdmits {
                reason: format!(
                    "static batching reserves {reserve} KV blocks per sequence (the whole context of {}), but the cache holds {}",
                    model.context_len, kv.blocks
                ),
            });
        }
    }
    let roofline = Roofline::new(hardware, model, policy.weights).with_attention(fleet.attention);
    let clock_limit_s = clock_limit(&roofline)?;
    let last = previous;
    if last > clock_limit_s {
        return Err(CapacityError::ClockResolution {
            time_s: last,
            iteration_s: shortest_iteration(&roofline),
            hint: "the trace's last arrival is too late; shift or shorten its arrival times (or use a load scale that stretches them less)".into(),
        });
    }
    let outcome = Simulator::new(trace, model, policy, fleet, draft, kv, roofline).run()?;
    if outcome.end_s.is_nan() || outcome.end_s > clock_limit_s {
        return Err(CapacityError::ClockResolution {
            time_s: outcome.end_s,
            iteration_s: shortest_iteration(&roofline),
            hint: "the run drains for too long after the last arrival; serve fewer or shorter requests, or a faster configuration".into(),
        });
    }
    Ok(outcome)
}

/// The shortest iteration the roofline prices: one token, nothing cached.
fn shortest_iteration(roofline: &Roofline) -> f64 {
    roofline.cost(&IterationWork::decode(0.0)).time_s()
}

/// The latest time at which the clock still resolves the shortest iteration to 1/1024 of
/// its length (one f64 ulp there): beyond it, adding an iteration to the clock rounds it
/// away and every latency would read 0. An iteration outside [1 ps, 10^6 s] is a profile
/// that cannot describe a machine.
fn clock_limit(roofline: &Roofline) -> Result<f64, CapacityError> {
    let iteration = shortest_iteration(roofline);
    in_range(
        "the shortest iteration's time on this hardware and model (s)",
        iteration,
        1e-12,
        1e6,
    )?;
    Ok(iteration / (1024.0 * f64::EPSILON))
}

/// What every replica reads: the trace, the policy and its prices.
struct Engine<'a> {
    trace: &'a Trace,
    policy: &'a ServingPolicy,
    /// Tokens one continuous-batching iteration may run ([`Batching::token_budget`]).
    token_budget: u64,
    roofline: Roofline,
    /// Blocks a static-batching row reserves: the whole context.
    static_reserve: u64,
    kv_blocks: u64,
    first_arrival_s: f64,
    window_s: f64,
    /// Seconds to move one token's KV cache from a prefill to a decode replica.
    transfer_s_per_token: f64,
    /// Speculative decoding: tokens drafted per step, the draft's seconds per token, and
    /// the acceptance rate of each slice of the trace.
    speculative_k: u32,
    draft_s_per_token: f64,
    acceptance: Vec<f64>,
}

/// Mixed with the replica's index to seed its speculative draws.
const SPECULATION_SEED: u64 = 0x5BEC_0DE5;

impl Engine<'_> {
    fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.policy.block_size as u64)
    }
}

/// What each request met, whichever replica served it.
struct Books {
    ttft_s: Vec<f64>,
    e2e_s: Vec<f64>,
    tpot_s: Vec<f64>,
    queue_s: Vec<f64>,
    replica: Vec<u32>,
    /// When each request last emitted a token.
    last_token_s: Vec<f64>,
    gaps: GapHistogram,
    prefix_hit_tokens: u64,
    prompt_tokens_admitted: u64,
}

/// One replica: its queues, its KV cache, its clock and what it spent.
#[derive(Clone)]
struct Replica {
    role: Role,
    /// Draws speculative acceptances (seeded per replica: the same inputs, the same run).
    rng: SplitMix64,
    /// Requests whose prefill finished here, to move to a decode replica: (request, when
    /// their KV cache arrives there).
    handoffs: Vec<(u32, f64)>,
    running: Vec<Running>,
    waiting: VecDeque<Waiting>,
    free_blocks: u64,
    cache: Option<PrefixCache>,
    now: f64,
    iterations: u64,
    preemptions: u64,
    compute_bound_s: f64,
    memory_bound_s: f64,
    overhead_s: f64,
    idle_s: f64,
    processed_tokens: u64,
    kv_peak_blocks: Vec<u64>,
    /// Requests that finished at the end of the current iteration (at `now`), and the
    /// blocks they freed: until `now` the router must still see them.
    finishing: u64,
    finishing_blocks: u64,
    /// What each iteration scheduled, for the tests that pin the scheduler's rules.
    #[cfg(test)]
    steps: Vec<Step>,
}

/// The fleet: the replicas, the router, and the requests' books.
struct Simulator<'a> {
    engine: Engine<'a>,
    fleet: &'a Fleet,
    replicas: Vec<Replica>,
    /// The router of arriving requests, and (disaggregated) of the decode pool.
    routing: Routing,
    decode_routing: Routing,
    books: Books,
    next_arrival: usize,
    rejected: u64,
    /// When the router's view was last refreshed (stale routing only).
    refreshed_s: f64,
    views: Vec<ReplicaView>,
    /// KV caches on their way to decode replicas: (arrival time's bits, request), earliest
    /// first (times are at or above 0, so their bits order as they do).
    transfers: BinaryHeap<Reverse<(u64, u32)>>,
    kv: KvBudget,
    iterations: u64,
    iteration_limit: u64,
}

/// One thing the scheduler did in an iteration (recorded by the unit tests only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
enum Event {
    /// A running sequence's decode step (1 token), by request.
    Decode(u32),
    /// A chunk of a running sequence's prompt: request, tokens.
    Prefill(u32, u32),
    /// A waiting request admitted, with the prompt tokens it runs now: request, tokens.
    Admit(u32, u32),
    /// A running sequence preempted back to the waiting queue, by request.
    Preempt(u32),
}

/// One iteration's events, in the order the scheduler made them.
#[cfg(test)]
#[derive(Clone, Debug, PartialEq)]
struct Step {
    start_s: f64,
    events: Vec<Event>,
}

impl<'a> Simulator<'a> {
    fn new(
        trace: &'a Trace,
        model: &ModelProfile,
        policy: &'a ServingPolicy,
        fleet: &'a Fleet,
        draft: &DraftModel,
        kv: KvBudget,
        roofline: Roofline,
    ) -> Simulator<'a> {
        let n = trace.requests.len();
        let first = trace.requests[0].arrival_s;
        let last = trace.requests[n - 1].arrival_s;
        let tokens: u64 = trace
            .requests
            .iter()
            .map(|r| r.prompt_tokens as u64 + r.output_tokens as u64)
            .sum();
        let replica = Replica {
            role: Role::Both,
            rng: SplitMix64::new(0),
            handoffs: Vec::new(),
            running: Vec::with_capacity(policy.max_sequences.min(1 << 16) as usize),
            waiting: VecDeque::new(),
            free_blocks: kv.blocks,
            cache: fleet
                .prefix_cache
                .then(|| PrefixCache::new(trace.prefixes.len())),
            now: first,
            iterations: 0,
            preemptions: 0,
            compute_bound_s: 0.0,
            memory_bound_s: 0.0,
            overhead_s: 0.0,
            idle_s: 0.0,
            processed_tokens: 0,
            kv_peak_blocks: vec![0; KV_WINDOWS + 1],
            finishing: 0,
            finishing_blocks: 0,
            #[cfg(test)]
            steps: Vec::new(),
        };
        Simulator {
            engine: Engine {
                trace,
                policy,
                token_budget: policy
                    .batching
                    .token_budget(model.context_len)
                    .unwrap_or(u32::MAX) as u64,
                roofline,
                static_reserve: (model.context_len as u64).div_ceil(policy.block_size as u64),
                kv_blocks: kv.blocks,
                first_arrival_s: first,
                window_s: ((last - first) / KV_WINDOWS as f64).max(f64::MIN_POSITIVE),
                transfer_s_per_token: roofline.kv_bytes_per_token
                    / (fleet.kv_link_gbps * 1e9 / 8.0),
                speculative_k: fleet.speculative_k,
                draft_s_per_token: draft.draft_s_per_token,
                acceptance: draft.acceptance.clone(),
            },
            fleet,
            replicas: (0..fleet.replicas)
                .map(|i| Replica {
                    rng: SplitMix64::new(SPECULATION_SEED ^ i as u64),
                    role: match (fleet.disaggregated(), i < fleet.prefill_replicas) {
                        (false, _) => Role::Both,
                        (true, true) => Role::Prefill,
                        (true, false) => Role::Decode,
                    },
                    ..replica.clone()
                })
                .collect(),
            transfers: BinaryHeap::new(),
            routing: Routing::new(fleet.router),
            decode_routing: Routing::new(fleet.router),
            books: Books {
                ttft_s: vec![f64::NAN; n],
                e2e_s: vec![f64::NAN; n],
                tpot_s: vec![f64::NAN; n],
                queue_s: vec![f64::NAN; n],
                replica: vec![0; n],
                last_token_s: vec![f64::NAN; n],
                gaps: GapHistogram::new(),
                prefix_hit_tokens: 0,
                prompt_tokens_admitted: 0,
            },
            next_arrival: 0,
            rejected: 0,
            refreshed_s: f64::NEG_INFINITY,
            views: vec![ReplicaView::default(); fleet.replicas as usize],
            kv,
            iterations: 0,
            // Every iteration emits a token or prefills at least one prompt token; a
            // preemption repeats at most a sequence's own tokens, and the oldest sequence
            // is never preempted, so 8x the trace's tokens is far above any real run.
            iteration_limit: 8 * tokens + 16 * n as u64 + 1024,
        }
    }

    fn run(mut self) -> Result<SimOutcome, CapacityError> {
        self.drive()?;
        let end_s = self
            .replicas
            .iter()
            .map(|r| r.now)
            .fold(self.engine.first_arrival_s, f64::max);
        let mut kv_peak_blocks = vec![0; KV_WINDOWS + 1];
        let sum = |f: &dyn Fn(&Replica) -> f64| self.replicas.iter().map(f).sum::<f64>();
        let compute_bound_s = sum(&|r| r.compute_bound_s);
        let memory_bound_s = sum(&|r| r.memory_bound_s);
        let overhead_s = sum(&|r| r.overhead_s);
        // A replica that finished early idles until the last one does.
        let idle_s = sum(&|r| r.idle_s + (end_s - r.now));
        for r in &self.replicas {
            for (peak, &p) in kv_peak_blocks.iter_mut().zip(&r.kv_peak_blocks) {
                *peak = (*peak).max(p);
            }
        }
        let books = self.books;
        Ok(SimOutcome {
            ttft_s: books.ttft_s,
            e2e_s: books.e2e_s,
            tpot_s: books.tpot_s,
            queue_s: books.queue_s,
            replica: books.replica,
            gaps: books.gaps,
            first_arrival_s: self.engine.first_arrival_s,
            end_s,
            replicas: self.fleet.replicas,
            rejected: self.rejected,
            prefix_hit_tokens: books.prefix_hit_tokens,
            prompt_tokens_admitted: books.prompt_tokens_admitted,
            iterations: self.replicas.iter().map(|r| r.iterations).sum(),
            preemptions: self.replicas.iter().map(|r| r.preemptions).sum(),
            compute_bound_s,
            memory_bound_s,
            overhead_s,
            idle_s,
            processed_tokens: self.replicas.iter().map(|r| r.processed_tokens).sum(),
            kv: self.kv,
            kv_peak_blocks,
            window_s: self.engine.window_s,
        })
    }

    /// Events in time order: an arrival is routed when no busy replica's next iteration
    /// starts before it (an arrival at the instant an iteration starts joins it, as in a
    /// single engine's `arrive`), else the busy replica whose next iteration starts first
    /// (the lowest index on a tie) runs it. Idle replicas wait for their next arrival.
    fn drive(&mut self) -> Result<(), CapacityError> {
        let n = self.engine.trace.requests.len();
        loop {
            let busy = self
                .replicas
                .iter()
                .enumerate()
                .filter(|(_, r)| !(r.running.is_empty() && r.waiting.is_empty()))
                .fold(None::<(usize, f64)>, |m, (i, r)| match m {
                    Some((_, t)) if t <= r.now => m,
                    _ => Some((i, r.now)),
                });
            let arrival = (self.next_arrival < n)
                .then(|| self.engine.trace.requests[self.next_arrival].arrival_s);
            // A KV cache reaching the decode pool, when one is due before the next request.
            let handoff = self
                .transfers
                .peek()
                .map(|Reverse((bits, _))| f64::from_bits(*bits))
                .filter(|&t| arrival.is_none_or(|a| t < a));
            match (handoff.or(arrival), busy) {
                (Some(t), Some((_, start))) if t <= start => self.route(t, handoff.is_some()),
                (Some(t), None) => self.route(t, handoff.is_some()),
                (_, Some((r, _))) => {
                    self.iterations += 1;
                    if self.iterations > self.iteration_limit {
                        return Err(CapacityError::IterationLimit {
                            limit: self.iteration_limit,
                        });
                    }
                    let replica = &mut self.replicas[r];
                    replica.iterations += 1;
                    replica.begin_step();
                    match self.engine.policy.batching {
                        Batching::Static => {
                            replica.static_iteration(&self.engine, &mut self.books)?
                        }
                        Batching::Continuous => {
                            replica.continuous_iteration(&self.engine, &mut self.books, false)?
                        }
                        Batching::ChunkedPrefill { .. } => {
                            replica.continuous_iteration(&self.engine, &mut self.books, true)?
                        }
                    }
                    for (request, at) in replica.handoffs.drain(..) {
                        self.transfers.push(Reverse((at.to_bits(), request)));
                    }
                }
                (None, None) => return Ok(()),
            }
        }
    }

    /// Routes the next arrival at `t` to a replica, or rejects it at a full queue: a
    /// request of the trace (to a prefill replica when disaggregated), or with `handoff`
    /// the next KV cache due at the decode pool.
    fn route(&mut self, t: f64, handoff: bool) {
        let (i, pool) = if handoff {
            let Some(Reverse((_, i))) = self.transfers.pop() else {
                return;
            };
            (
                i as usize,
                self.fleet.prefill_replicas as usize..self.replicas.len(),
            )
        } else {
            self.next_arrival += 1;
            let prefill = if self.fleet.disaggregated() {
                self.fleet.prefill_replicas as usize
            } else {
                self.replicas.len()
            };
            (self.next_arrival - 1, 0..prefill)
        };
        let request = self.engine.trace.requests[i];
        let r = if pool.len() == 1 {
            pool.start
        } else {
            let stale = self.fleet.router_staleness_s > 0.0;
            if !stale || t >= self.refreshed_s + self.fleet.router_staleness_s {
                for (view, replica) in self.views.iter_mut().zip(&mut self.replicas) {
                    *view = replica.view(&self.engine, t);
                    if stale {
                        if let Some(cache) = &mut replica.cache {
                            cache.refresh();
                        }
                    }
                }
                self.refreshed_s = t;
            }
            let bs = self.engine.policy.block_size;
            let replicas = &self.replicas[pool.clone()];
            let hit = |r: usize| -> u64 {
                if handoff {
                    return 0;
                }
                match (request.prefix, &replicas[r].cache) {
                    (Some(p), Some(cache)) => {
                        let blocks = if stale {
                            cache.seen_blocks(p.id)
                        } else {
                            cache.blocks(p.id)
                        };
                        (blocks.min(p.tokens / bs)) as u64
                    }
                    _ => 0,
                }
            };
            let prompt_blocks = self.engine.blocks_for(request.prompt_tokens as u64);
            let routing = if handoff {
                &mut self.decode_routing
            } else {
                &mut self.routing
            };
            pool.start + routing.pick(&self.views[pool.clone()], prompt_blocks, &hit)
        };
        let replica = &mut self.replicas[r];
        if !handoff {
            self.books.replica[i] = r as u32;
            if let Some(cap) = self.fleet.queue_cap {
                if replica.waiting.len() as u64 >= cap as u64 {
                    self.rejected += 1;
                    return;
                }
            }
        }
        if replica.running.is_empty() && replica.waiting.is_empty() && t > replica.now {
            // Idle until this arrival.
            replica.idle_s += t - replica.now;
            replica.now = t;
        }
        replica.waiting.push_back(Waiting {
            request: i as u32,
            generated: handoff as u32,
            prefilled: handoff,
        });
    }
}

impl Replica {
    /// What the router reads of this replica at time `t`: while its current iteration
    /// runs (`t` before its end, `now`), the requests that iteration finishes are still
    /// outstanding and hold their blocks.
    fn view(&self, e: &Engine, t: f64) -> ReplicaView {
        let (finishing, blocks) = if t < self.now {
            (self.finishing, self.finishing_blocks)
        } else {
            (0, 0)
        };
        ReplicaView {
            outstanding: (self.running.len() + self.waiting.len()) as u64 + finishing,
            kv_used_blocks: self.used_blocks(e) + blocks,
        }
    }

    /// Blocks held by running requests and pinned prefixes (idle cached blocks are free
    /// for reuse, so they are not "in use").
    fn used_blocks(&self, e: &Engine) -> u64 {
        let idle = self.cache.as_ref().map_or(0, PrefixCache::idle_blocks);
        e.kv_blocks - self.free_blocks - idle
    }

    #[cfg(test)]
    fn note(&mut self, event: Event) {
        if let Some(step) = self.steps.last_mut() {
            step.events.push(event);
        }
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn note(&mut self, _event: Event) {}

    #[cfg(test)]
    fn begin_step(&mut self) {
        self.steps.push(Step {
            start_s: self.now,
            events: Vec::new(),
        });
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn begin_step(&mut self) {}

    fn record_kv(&mut self, e: &Engine) {
        let used = self.used_blocks(e);
        let offset = (self.now - e.first_arrival_s) / e.window_s;
        let w = if offset < KV_WINDOWS as f64 {
            offset.max(0.0) as usize
        } else {
            KV_WINDOWS
        };
        let peak = &mut self.kv_peak_blocks[w];
        *peak = (*peak).max(used);
    }

    /// Takes `n` free blocks, evicting idle cached prefix blocks when the free ones do not
    /// suffice; false (and nothing taken) when even that is not enough. A prefix about to
    /// be used must be pinned first, so that its blocks are not the ones evicted.
    fn take_blocks(&mut self, n: u64) -> bool {
        if n > self.free_blocks {
            let Some(cache) = &mut self.cache else {
                return false;
            };
            let short = n - self.free_blocks;
            if cache.idle_blocks() < short {
                return false;
            }
            self.free_blocks += cache.evict(short);
        }
        self.free_blocks -= n;
        true
    }

    /// A sequence leaves the engine (finished or preempted): its own blocks are free, and
    /// its prefix is no longer pinned by it.
    fn release(&mut self, e: &Engine, s: &Running) {
        self.free_blocks += s.blocks as u64;
        if !s.pinned {
            return;
        }
        if let (Some(cache), Some(p)) =
            (&mut self.cache, e.trace.requests[s.request as usize].prefix)
        {
            cache.unpin(p.id);
        }
    }

    /// A sequence's prefill is complete: the full blocks of its shared prefix that it
    /// computed pass to the prefix cache.
    fn prefilled(&mut self, e: &Engine, i: usize) {
        let Some(cache) = &mut self.cache else {
            return;
        };
        let s = &mut self.running[i];
        if !s.pinned {
            return;
        }
        if let Some(p) = e.trace.requests[s.request as usize].prefix {
            let adopted = cache.adopt(p.id, p.tokens / e.policy.block_size);
            s.blocks -= adopted;
            s.shared += adopted;
        }
    }

    /// Prices `work`, advances the clock, and books the time under its roof.
    fn advance(&mut self, e: &Engine, work: &IterationWork) {
        let cost = e.roofline.cost(work);
        if cost.compute_s >= cost.memory_s {
            self.compute_bound_s += cost.compute_s;
        } else {
            self.memory_bound_s += cost.memory_s;
        }
        self.overhead_s += cost.overhead_s;
        self.processed_tokens += work.tokens as u64;
        self.now += cost.time_s();
    }
}

impl Books {
    /// Books one token of `seq` emitted at `now`; true when it was the request's last. Gaps
    /// of sequences that also emitted at `iteration_start` all equal the iteration's length
    /// and are only counted in `steady` (one histogram update per iteration).
    fn emit(
        &mut self,
        e: &Engine,
        seq: &mut Running,
        now: f64,
        iteration_start: f64,
        steady: &mut u64,
    ) -> bool {
        let r = seq.request as usize;
        let request = e.trace.requests[r];
        if seq.generated == 0 {
            self.ttft_s[r] = now - request.arrival_s;
        } else {
            let last = self.last_token_s[r];
            if last == iteration_start {
                *steady += 1;
            } else {
                self.gaps.add(now - last, 1);
            }
        }
        self.last_token_s[r] = now;
        seq.generated += 1;
        if seq.generated < request.output_tokens {
            return false;
        }
        let e2e = now - request.arrival_s;
        self.e2e_s[r] = e2e;
        if request.output_tokens > 1 {
            self.tpot_s[r] = (e2e - self.ttft_s[r]) / (request.output_tokens - 1) as f64;
        }
        true
    }
}

impl Replica {
    /// One iteration of continuous batching, by vLLM v1's rules (the module's notes): the
    /// running sequences first, in admission order, within the token budget, each growing
    /// its KV by a block when its next token starts one and preempting from the back of the
    /// running queue when none is free; then, unless one was preempted, the waiting
    /// requests in order. `chunked`: a prompt may take what remains of the budget (else it
    /// waits until it fits whole).
    fn continuous_iteration(
        &mut self,
        e: &Engine,
        books: &mut Books,
        chunked: bool,
    ) -> Result<(), CapacityError> {
        let bs = e.policy.block_size;
        let mut left = e.token_budget;
        let mut preempted = false;
        let mut work = IterationWork::default();
        // The draft model's time for this iteration's speculative steps.
        let mut draft_s = 0.0;
        // The running sequences. Only the sequence at `i` or a later one is ever preempted,
        // so the work booked for the ones before it stands. The oldest sequence always fits
        // alone, so the engine never deadlocks.
        let mut i = 0;
        while i < self.running.len() && left > 0 {
            let s = self.running[i];
            if s.cached >= s.prefill_target {
                // A speculative step verifies its drafted tokens and the next one in one
                // pass over `positions`; a plain decode step is one position.
                let request = e.trace.requests[s.request as usize];
                let drafted = e
                    .speculative_k
                    .min(request.output_tokens - s.generated - 1)
                    .min(left as u32 - 1);
                let positions = drafted + 1;
                let short = (s.cached + positions)
                    .div_ceil(bs)
                    .saturating_sub(s.blocks + s.shared);
                if short > 0 {
                    if !self.take_blocks(short as u64) {
                        // vLLM's `self.running.pop()`: the most recently admitted; when it
                        // is `s` itself, the loop ends with it.
                        let Some(v) = self.running.pop() else { break };
                        self.release(e, &v);
                        self.waiting.push_front(Waiting {
                            request: v.request,
                            generated: v.generated,
                            // Recomputed here, from its prompt and what it emitted.
                            prefilled: false,
                        });
                        self.preemptions += 1;
                        preempted = true;
                        self.note(Event::Preempt(v.request));
                        continue;
                    }
                    self.running[i].blocks += short;
                }
                let emitted = if drafted == 0 {
                    work.add(IterationWork::decode(s.cached as f64));
                    1
                } else {
                    work.add(IterationWork::prefill(s.cached as f64, positions as f64));
                    draft_s += drafted as f64 * e.draft_s_per_token;
                    // Each drafted token is accepted with probability α given the ones
                    // before it were; the first rejection ends the step, which emits the
                    // accepted tokens and one more (the correction, or the bonus token).
                    let alpha = e.acceptance[request.slice as usize];
                    1 + (0..drafted)
                        .take_while(|_| self.rng.uniform() < alpha)
                        .count() as u32
                };
                let r = &mut self.running[i];
                r.cached += emitted;
                r.emits = emitted;
                left -= positions as u64;
                self.note(Event::Decode(s.request));
            } else {
                // The next chunk of a prompt (chunked prefill only: without it a prompt
                // runs whole when admitted); its blocks were taken at admission.
                let chunk = ((s.prefill_target - s.cached) as u64).min(left) as u32;
                work.add(IterationWork::prefill(s.cached as f64, chunk as f64));
                let r = &mut self.running[i];
                r.cached += chunk;
                // The last chunk of a prompt yields the next token.
                r.emits = (r.cached == r.prefill_target) as u32;
                left -= chunk as u64;
                if r.emits > 0 {
                    self.prefilled(e, i);
                }
                self.note(Event::Prefill(s.request, chunk));
            }
            i += 1;
        }
        // The waiting requests, oldest first, while a slot, the budget and the prompt's
        // blocks remain; none in an iteration that preempted (vLLM: `if not
        // preempted_reqs:`).
        while !preempted && left > 0 && (self.running.len() as u64) < e.policy.max_sequences as u64
        {
            let Some(&w) = self.waiting.front() else {
                break;
            };
            let request = e.trace.requests[w.request as usize];
            if w.prefilled {
                // Its prompt's KV cache arrived: it joins with its first decode step
                // (vLLM schedules one new token for such a request).
                let prompt = request.prompt_tokens;
                let need = e.blocks_for(prompt as u64 + 1);
                if !self.take_blocks(need) {
                    break;
                }
                self.waiting.pop_front();
                work.add(IterationWork::decode(prompt as f64));
                left -= 1;
                self.running.push(Running {
                    pinned: false,
                    request: w.request,
                    prefill_target: prompt,
                    cached: prompt + 1,
                    generated: w.generated,
                    blocks: need as u32,
                    shared: 0,
                    emits: 1,
                    finished: false,
                });
                self.note(Event::Admit(w.request, 1));
                continue;
            }
            let target = request.prompt_tokens + w.generated;
            // The prefix cache's hit: whole blocks, and never the prompt's last token.
            let prefix = self.cache.as_ref().zip(request.prefix);
            let hit_blocks = prefix.map_or(0, |(cache, p)| {
                cache.blocks(p.id).min(p.tokens / bs).min((target - 1) / bs)
            });
            let hit = hit_blocks * bs;
            if !chunked && (target - hit) as u64 > left {
                break;
            }
            let need = e.blocks_for(target as u64) - hit_blocks as u64;
            let available = self.free_blocks
                + prefix.map_or(0, |(cache, p)| cache.evictable_besides(Some(p.id)));
            if need > available {
                break;
            }
            let pinned = prefix.is_some();
            if let (Some(cache), Some(p)) = (&mut self.cache, request.prefix) {
                cache.pin(p.id);
            }
            let took = self.take_blocks(need);
            debug_assert!(took, "the blocks were counted as available");
            self.waiting.pop_front();
            let queued = &mut books.queue_s[w.request as usize];
            if queued.is_nan() {
                *queued = self.now - request.arrival_s;
                books.prompt_tokens_admitted += request.prompt_tokens as u64;
                books.prefix_hit_tokens += hit as u64;
            }
            let chunk = ((target - hit) as u64).min(left) as u32;
            left -= chunk as u64;
            work.add(IterationWork::prefill(hit as f64, chunk as f64));
            self.running.push(Running {
                pinned,
                request: w.request,
                prefill_target: target,
                cached: hit + chunk,
                generated: w.generated,
                blocks: need as u32,
                shared: hit_blocks,
                // The last chunk of a prompt yields the next token.
                emits: (hit + chunk == target) as u32,
                finished: false,
            });
            if hit + chunk == target {
                self.prefilled(e, self.running.len() - 1);
            }
            self.note(Event::Admit(w.request, chunk));
        }
        if left == e.token_budget {
            return Err(CapacityError::NeverAdmits {
                reason: "no waiting request fits in an empty engine".into(),
            });
        }
        self.record_kv(e);
        let start = self.now;
        self.advance(e, &work);
        self.overhead_s += draft_s;
        self.now += draft_s;
        // Emissions, and finished sequences leave (compacted in place, order kept).
        let mut running = std::mem::take(&mut self.running);
        let mut steady = 0;
        let mut kept = 0;
        let free_before = self.free_blocks;
        self.finishing = 0;
        for r in 0..running.len() {
            let mut s = running[r];
            if s.emits > 0 {
                let tokens = std::mem::take(&mut s.emits);
                if (0..tokens).any(|_| books.emit(e, &mut s, self.now, start, &mut steady)) {
                    self.release(e, &s);
                    self.finishing += 1;
                    continue;
                }
                if self.role == Role::Prefill {
                    // Its first token is out: its KV cache leaves for the decode pool.
                    self.release(e, &s);
                    self.finishing += 1;
                    let prompt = e.trace.requests[s.request as usize].prompt_tokens;
                    self.handoffs
                        .push((s.request, self.now + prompt as f64 * e.transfer_s_per_token));
                    continue;
                }
            }
            running[kept] = s;
            kept += 1;
        }
        running.truncate(kept);
        self.running = running;
        self.finishing_blocks = self.free_blocks - free_before;
        if steady > 0 {
            books.gaps.add(self.now - start, steady);
        }
        Ok(())
    }

    /// One iteration of static batching: when idle, form and prefill a batch (padded to its
    /// longest prompt); else run one decode step of every row, finished or not. Static
    /// batching reserves each row's whole context and shares no prefix.
    fn static_iteration(&mut self, e: &Engine, books: &mut Books) -> Result<(), CapacityError> {
        let forming = self.running.is_empty();
        if forming {
            let reserve = e.static_reserve;
            while (self.running.len() as u64) < e.policy.max_sequences as u64
                && self.free_blocks >= reserve
            {
                let Some(w) = self.waiting.pop_front() else {
                    break;
                };
                let request = e.trace.requests[w.request as usize];
                books.queue_s[w.request as usize] = self.now - request.arrival_s;
                books.prompt_tokens_admitted += request.prompt_tokens as u64;
                self.free_blocks -= reserve;
                self.running.push(Running {
                    pinned: false,
                    request: w.request,
                    prefill_target: request.prompt_tokens,
                    cached: 0,
                    generated: 0,
                    blocks: reserve as u32,
                    shared: 0,
                    emits: 1,
                    finished: false,
                });
            }
            if self.running.is_empty() {
                return Err(CapacityError::NeverAdmits {
                    reason: "no waiting request fits in an empty engine".into(),
                });
            }
        }
        self.record_kv(e);
        let rows = self.running.len() as f64;
        let mut work = if forming {
            let longest = self
                .running
                .iter()
                .map(|s| s.prefill_target)
                .max()
                .unwrap_or(1);
            for s in self.running.iter_mut() {
                s.cached = longest;
            }
            IterationWork::prefill(0.0, longest as f64)
        } else {
            // Rows share the padded position.
            let position = self.running[0].cached;
            for s in self.running.iter_mut() {
                s.cached += 1;
            }
            IterationWork::decode(position as f64)
        };
        work.tokens *= rows;
        work.attention_context *= rows;
        work.kv_read *= rows;
        work.kv_written *= rows;
        let start = self.now;
        self.advance(e, &work);
        let mut batch = std::mem::take(&mut self.running);
        let mut steady = 0;
        for s in batch.iter_mut() {
            if !s.finished && books.emit(e, s, self.now, start, &mut steady) {
                s.finished = true;
            }
        }
        if steady > 0 {
            books.gaps.add(self.now - start, steady);
        }
        (self.finishing, self.finishing_blocks) = (0, 0);
        if batch.iter().all(|s| s.finished) {
            self.finishing = batch.len() as u64;
            self.finishing_blocks = batch.iter().map(|s| s.blocks as u64).sum::<u64>();
            self.free_blocks += self.finishing_blocks;
            batch.clear();
        }
        self.running = batch;
        Ok(())
    }
}
