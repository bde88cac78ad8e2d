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

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::cost::{IterationWork, Roofline};
use crate::error::{at_least_one, in_range, positive, CapacityError};
use crate::figures::shortest;
use crate::profile::{HardwareProfile, ModelProfile, WeightPath};
use crate::trace::Trace;

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

    /// The report's name: `static`, `continuous`, `chunked-prefill/128`. (`Display` is the
    /// name a user types, `chunked:128`.)
    pub fn label(&self) -> String {
        match self {
            Batching::Static => "static".into(),
            Batching::Continuous => "continuous".into(),
            Batching::ChunkedPrefill { token_budget } => format!("chunked-prefill/{token_budget}"),
        }
    }
}

/// `static`, `continuous` or `chunked:BUDGET`, as `decode-lab capacity --policy` takes them.
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
            self.batching.label(),
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

impl Slo {
    /// Both targets a number of seconds within [`crate::MIN_SLO_S`, `crate::MAX_SLO_S`].
    pub fn validate(&self) -> Result<(), CapacityError> {
        for (what, slo) in [
            ("p99 TTFT SLO (s)", self.ttft_p99_s),
            ("p99 time-per-token SLO (s)", self.tpot_p99_s),
        ] {
            in_range(
                what,
                positive(what, slo)?,
                crate::plan::MIN_SLO_S,
                crate::plan::MAX_SLO_S,
            )?;
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
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
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
                    },
                )
                .collect(),
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
        let mut sim = Simulator::new(trace, model, policy, kv, roofline);
        sim.drive().unwrap();
        assert_eq!(
            (sim.out.iterations, sim.out.preemptions, sim.now),
            (checked.iterations, checked.preemptions, checked.end_s)
        );
        (sim.out, sim.steps)
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
}

/// What one simulation measured, per request and in total; `report` turns it into figures.
#[derive(Clone, Debug)]
pub struct SimOutcome {
    /// Per request, by trace index: time to first token, end-to-end latency, time per
    /// output token (NaN for one-token outputs), time queued before first admission.
    pub ttft_s: Vec<f64>,
    pub e2e_s: Vec<f64>,
    pub tpot_s: Vec<f64>,
    pub queue_s: Vec<f64>,
    pub(crate) gaps: GapHistogram,
    pub first_arrival_s: f64,
    pub end_s: f64,
    pub iterations: u64,
    pub preemptions: u64,
    /// Seconds of iterations under each roof, of fixed overhead, and idle.
    pub compute_bound_s: f64,
    pub memory_bound_s: f64,
    pub overhead_s: f64,
    pub idle_s: f64,
    /// Tokens run through the model (prefill, recomputation and decode) and emitted.
    pub processed_tokens: u64,
    pub kv: KvBudget,
    /// Peak KV blocks in use in each of 100 equal windows of the arrival span, then one
    /// window for the drain after the last arrival.
    pub kv_peak_blocks: Vec<u64>,
    pub window_s: f64,
}

/// One running sequence, kept in admission order.
#[derive(Clone, Copy, Debug)]
struct Running {
    request: u32,
    /// Tokens to have cached before the next emission while prefilling (the prompt, plus
    /// the tokens emitted before a preemption when recomputing).
    prefill_target: u32,
    cached: u32,
    generated: u32,
    blocks: u32,
    /// Emits a token at the end of the current iteration.
    emits: bool,
    /// Static batching: the row's output is complete (it still occupies its slot).
    finished: bool,
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    request: u32,
    /// Tokens emitted before a preemption (0 for a fresh request).
    generated: u32,
}

const KV_WINDOWS: usize = 100;

/// Simulates `trace` served by `policy`. Checks every input first; same inputs, same outcome.
pub fn simulate(
    trace: &Trace,
    hardware: &HardwareProfile,
    model: &ModelProfile,
    policy: &ServingPolicy,
) -> Result<SimOutcome, CapacityError> {
    hardware.validate()?;
    model.validate()?;
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
    let roofline = Roofline::new(hardware, model, policy.weights);
    let clock_limit_s = clock_limit(&roofline)?;
    let last = previous;
    if last > clock_limit_s {
        return Err(CapacityError::ClockResolution {
            time_s: last,
            iteration_s: shortest_iteration(&roofline),
            hint: "the trace's last arrival is too late; shift or shorten its arrival times (or use a load scale that stretches them less)".into(),
        });
    }
    let outcome = Simulator::new(trace, model, policy, kv, roofline).run()?;
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

struct Simulator<'a> {
    trace: &'a Trace,
    policy: &'a ServingPolicy,
    /// Tokens one continuous-batching iteration may run ([`Batching::token_budget`]).
    token_budget: u64,
    roofline: Roofline,
    out: SimOutcome,
    running: Vec<Running>,
    waiting: VecDeque<Waiting>,
    next_arrival: usize,
    free_blocks: u64,
    now: f64,
    /// When each request last emitted a token.
    last_token_s: Vec<f64>,
    iteration_limit: u64,
    /// Blocks a static-batching row reserves: the whole context.
    static_reserve: u64,
    /// What each iteration scheduled, for the tests that pin the scheduler's rules.
    #[cfg(test)]
    steps: Vec<Step>,
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
        Simulator {
            trace,
            policy,
            token_budget: policy
                .batching
                .token_budget(model.context_len)
                .unwrap_or(u32::MAX) as u64,
            roofline,
            out: SimOutcome {
                ttft_s: vec![f64::NAN; n],
                e2e_s: vec![f64::NAN; n],
                tpot_s: vec![f64::NAN; n],
                queue_s: vec![f64::NAN; n],
                gaps: GapHistogram::new(),
                first_arrival_s: first,
                end_s: first,
                iterations: 0,
                preemptions: 0,
                compute_bound_s: 0.0,
                memory_bound_s: 0.0,
                overhead_s: 0.0,
                idle_s: 0.0,
                processed_tokens: 0,
                kv,
                kv_peak_blocks: vec![0; KV_WINDOWS + 1],
                window_s: ((last - first) / KV_WINDOWS as f64).max(f64::MIN_POSITIVE),
            },
            running: Vec::with_capacity(policy.max_sequences.min(1 << 16) as usize),
            waiting: VecDeque::new(),
            next_arrival: 0,
            free_blocks: kv.blocks,
            now: first,
            last_token_s: vec![f64::NAN; n],
            // Every iteration emits a token or prefills at least one prompt token; a
            // preemption repeats at most a sequence's own tokens, and the oldest sequence
            // is never preempted, so 8x the trace's tokens is far above any real run.
            iteration_limit: 8 * tokens + 16 * n as u64 + 1024,
            static_reserve: (model.context_len as u64).div_ceil(policy.block_size as u64),
            #[cfg(test)]
            steps: Vec::new(),
        }
    }

    fn run(mut self) -> Result<SimOutcome, CapacityError> {
        self.drive()?;
        Ok(self.out)
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

    fn drive(&mut self) -> Result<(), CapacityError> {
        let n = self.trace.requests.len();
        let mut finished = 0usize;
        while finished < n {
            self.arrive();
            if self.running.is_empty() && self.waiting.is_empty() {
                // Idle: jump to the next arrival.
                let next = self.trace.requests[self.next_arrival].arrival_s;
                self.out.idle_s += next - self.now;
                self.now = next;
                continue;
            }
            self.out.iterations += 1;
            if self.out.iterations > self.iteration_limit {
                return Err(CapacityError::IterationLimit {
                    limit: self.iteration_limit,
                });
            }
            self.begin_step();
            finished += match self.policy.batching {
                Batching::Static => self.static_iteration()?,
                Batching::Continuous => self.continuous_iteration(false)?,
                Batching::ChunkedPrefill { .. } => self.continuous_iteration(true)?,
            };
        }
        self.out.end_s = self.now;
        Ok(())
    }

    fn arrive(&mut self) {
        let requests = &self.trace.requests;
        while self.next_arrival < requests.len()
            && requests[self.next_arrival].arrival_s <= self.now
        {
            self.waiting.push_back(Waiting {
                request: self.next_arrival as u32,
                generated: 0,
            });
            self.next_arrival += 1;
        }
    }

    fn blocks_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.policy.block_size as u64)
    }

    fn record_kv(&mut self) {
        let used = self.out.kv.blocks - self.free_blocks;
        let offset = (self.now - self.out.first_arrival_s) / self.out.window_s;
        let w = if offset < KV_WINDOWS as f64 {
            offset.max(0.0) as usize
        } else {
            KV_WINDOWS
        };
        let peak = &mut self.out.kv_peak_blocks[w];
        *peak = (*peak).max(used);
    }

    /// Prices `work`, advances the clock, and books the time under its roof.
    fn advance(&mut self, work: &IterationWork) {
        let cost = self.roofline.cost(work);
        if cost.compute_s >= cost.memory_s {
            self.out.compute_bound_s += cost.compute_s;
        } else {
            self.out.memory_bound_s += cost.memory_s;
        }
        self.out.overhead_s += cost.overhead_s;
        self.out.processed_tokens += work.tokens as u64;
        self.now += cost.time_s();
    }

    /// Books one token of `seq` emitted now; true when it was the request's last. Gaps of
    /// sequences that also emitted at `iteration_start` all equal the iteration's length
    /// and are only counted in `steady` (one histogram update per iteration).
    fn emit(&mut self, seq: &mut Running, iteration_start: f64, steady: &mut u64) -> bool {
        let r = seq.request as usize;
        let request = self.trace.requests[r];
        if seq.generated == 0 {
            self.out.ttft_s[r] = self.now - request.arrival_s;
        } else {
            let last = self.last_token_s[r];
            if last == iteration_start {
                *steady += 1;
            } else {
                self.out.gaps.add(self.now - last, 1);
            }
        }
        self.last_token_s[r] = self.now;
        seq.generated += 1;
        if seq.generated < request.output_tokens {
            return false;
        }
        let e2e = self.now - request.arrival_s;
        self.out.e2e_s[r] = e2e;
        if request.output_tokens > 1 {
            self.out.tpot_s[r] = (e2e - self.out.ttft_s[r]) / (request.output_tokens - 1) as f64;
        }
        true
    }

    /// One iteration of continuous batching, by vLLM v1's rules (the module's notes): the
    /// running sequences first, in admission order, within the token budget, each growing
    /// its KV by a block when its next token starts one and preempting from the back of the
    /// running queue when none is free; then, unless one was preempted, the waiting
    /// requests in order. `chunked`: a prompt may take what remains of the budget (else it
    /// waits until it fits whole). Returns the requests that finished.
    fn continuous_iteration(&mut self, chunked: bool) -> Result<usize, CapacityError> {
        let bs = self.policy.block_size;
        let mut left = self.token_budget;
        let mut preempted = false;
        let mut work = IterationWork::default();
        // The running sequences. Only the sequence at `i` or a later one is ever preempted,
        // so the work booked for the ones before it stands. The oldest sequence always fits
        // alone, so the engine never deadlocks.
        let mut i = 0;
        while i < self.running.len() && left > 0 {
            let s = self.running[i];
            if s.cached >= s.prefill_target {
                if s.cached + 1 > s.blocks * bs {
                    if self.free_blocks == 0 {
                        // vLLM's `self.running.pop()`: the most recently admitted; when it
                        // is `s` itself, the loop ends with it.
                        let Some(v) = self.running.pop() else { break };
                        self.free_blocks += v.blocks as u64;
                        self.waiting.push_front(Waiting {
                            request: v.request,
                            generated: v.generated,
                        });
                        self.out.preemptions += 1;
                        preempted = true;
                        self.note(Event::Preempt(v.request));
                        continue;
                    }
                    self.free_blocks -= 1;
                    self.running[i].blocks += 1;
                }
                work.add(IterationWork::decode(s.cached as f64));
                let r = &mut self.running[i];
                r.cached += 1;
                r.emits = true;
                left -= 1;
                self.note(Event::Decode(s.request));
            } else {
                // The next chunk of a prompt (chunked prefill only: without it a prompt
                // runs whole when admitted); its blocks were taken at admission.
                let chunk = ((s.prefill_target - s.cached) as u64).min(left) as u32;
                work.add(IterationWork::prefill(s.cached as f64, chunk as f64));
                let r = &mut self.running[i];
                r.cached += chunk;
                // The last chunk of a prompt yields the next token.
                r.emits = r.cached == r.prefill_target;
                left -= chunk as u64;
                self.note(Event::Prefill(s.request, chunk));
            }
            i += 1;
        }
        // The waiting requests, oldest first, while a slot, the budget and the prompt's
        // blocks remain; none in an iteration that preempted (vLLM: `if not
        // preempted_reqs:`).
        while !preempted
            && left > 0
            && (self.running.len() as u64) < self.policy.max_sequences as u64
        {
            let Some(&w) = self.waiting.front() else {
                break;
            };
            let request = self.trace.requests[w.request as usize];
            let target = request.prompt_tokens + w.generated;
            if !chunked && target as u64 > left {
                break;
            }
            let need = self.blocks_for(target as u64);
            if need > self.free_blocks {
                break;
            }
            self.waiting.pop_front();
            self.free_blocks -= need;
            let queued = &mut self.out.queue_s[w.request as usize];
            if queued.is_nan() {
                *queued = self.now - request.arrival_s;
            }
            let chunk = (target as u64).min(left) as u32;
            left -= chunk as u64;
            work.add(IterationWork::prefill(0.0, chunk as f64));
            self.running.push(Running {
                request: w.request,
                prefill_target: target,
                cached: chunk,
                generated: w.generated,
                blocks: need as u32,
                // The last chunk of a prompt yields the next token.
                emits: chunk == target,
                finished: false,
            });
            self.note(Event::Admit(w.request, chunk));
        }
        if left == self.token_budget {
            return Err(CapacityError::NeverAdmits {
                reason: "no waiting request fits in an empty engine".into(),
            });
        }
        self.record_kv();
        let start = self.now;
        self.advance(&work);
        // Emissions, and finished sequences leave (compacted in place, order kept).
        let mut running = std::mem::take(&mut self.running);
        let mut finished = 0;
        let mut steady = 0;
        let mut kept = 0;
        for r in 0..running.len() {
            let mut s = running[r];
            if s.emits {
                s.emits = false;
                if self.emit(&mut s, start, &mut steady) {
                    self.free_blocks += s.blocks as u64;
                    finished += 1;
                    continue;
                }
            }
            running[kept] = s;
            kept += 1;
        }
        running.truncate(kept);
        self.running = running;
        if steady > 0 {
            self.out.gaps.add(self.now - start, steady);
        }
        Ok(finished)
    }

    /// One iteration of static batching: when idle, form and prefill a batch (padded to its
    /// longest prompt); else run one decode step of every row, finished or not.
    fn static_iteration(&mut self) -> Result<usize, CapacityError> {
        let forming = self.running.is_empty();
        if forming {
            let reserve = self.static_reserve;
            while (self.running.len() as u64) < self.policy.max_sequences as u64
                && self.free_blocks >= reserve
            {
                let Some(w) = self.waiting.pop_front() else {
                    break;
                };
                let request = self.trace.requests[w.request as usize];
                self.out.queue_s[w.request as usize] = self.now - request.arrival_s;
                self.free_blocks -= reserve;
                self.running.push(Running {
                    request: w.request,
                    prefill_target: request.prompt_tokens,
                    cached: 0,
                    generated: 0,
                    blocks: reserve as u32,
                    emits: true,
                    finished: false,
                });
            }
            if self.running.is_empty() {
                return Err(CapacityError::NeverAdmits {
                    reason: "no waiting request fits in an empty engine".into(),
                });
            }
        }
        self.record_kv();
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
        self.advance(&work);
        let mut batch = std::mem::take(&mut self.running);
        let mut finished = 0;
        let mut steady = 0;
        for s in batch.iter_mut() {
            if !s.finished && self.emit(s, start, &mut steady) {
                s.finished = true;
                finished += 1;
            }
        }
        if steady > 0 {
            self.out.gaps.add(self.now - start, steady);
        }
        if batch.iter().all(|s| s.finished) {
            self.free_blocks += batch.iter().map(|s| s.blocks as u64).sum::<u64>();
            batch.clear();
        }
        self.running = batch;
        Ok(finished)
    }
}
