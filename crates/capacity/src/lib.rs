//! Inference capacity planner: a deterministic serving simulator with quality gates, SLO
//! gates and a release decision that degrades to a named baseline.
//!
//! Inputs are an accelerator ([`HardwareProfile`]), a model's shapes ([`ModelProfile`]),
//! measured quality per language slice ([`QualityProfile`], from `decode-lab eval --json`),
//! a workload trace ([`TraceSpec`] or a CSV/JSONL [`Trace`]) and serving policies
//! ([`ServingPolicy`]). [`Plan::run`] sweeps the policies, gates each on SLOs and quality
//! floors, and picks the highest-goodput configuration that passes, or degrades. Its
//! [`PlanReport`] is written once, as the chapter's parts ([`PlanReport::parts`], data of
//! the `report` crate), which the CLI writes as Markdown and the lab's planner as HTML.
//!
//! ```
//! let mut inputs = capacity::PlanInputs::tiny_lab("poisson").unwrap();
//! if let capacity::TraceSource::Generated { spec } = &mut inputs.trace {
//!     spec.requests = 500;
//! }
//! let report = capacity::Plan::run(&inputs).unwrap();
//! assert!(!report.sweep.is_empty());
//! assert!(report.to_markdown().contains("## 4. Capacity and cost recommendation"));
//! ```
//!
//! The crate is pure: no I/O, no clock, no entropy but the seed in the inputs (drawn with
//! `policy`'s [`policy::SplitMix64`]); it builds for wasm32. Same inputs give a byte-identical report.

#![forbid(unsafe_code)]

mod cost;
mod error;
mod figures;
mod fleet;
mod gates;
mod lengths;
mod measured;
mod metrics;
mod plan;
mod plan_report;
mod prefix_cache;
mod profile;
mod quality;
mod request;
mod rollout;
mod sim;
mod speculation;
mod trace;

pub use cost::{
    Attention, Calibration, CalibrationFit, IterationCost, IterationWork, MeasuredPoint, PathFit,
    Phase, Residual, Roofline,
};
pub use error::{shown, CapacityError};
pub use figures::{figure, percent, seconds, shortest};
pub use fleet::{
    Fleet, Router, DEFAULT_KV_LINK_GBPS, MAX_KV_LINK_GBPS, MAX_REPLICAS, MAX_ROUTER_STALENESS_S,
    MAX_SPECULATIVE_K,
};
pub use gates::{FailedGates, Gate, GateResult};
pub use lengths::{
    LengthInputs, LengthProfile, LengthRun, PolicyLengths, SliceLengthChange, SliceLengths,
    TINY_LENGTHS_JSON,
};
pub use measured::{decoding_name, PolicyMeasure};
pub use metrics::{Bottleneck, KvReport, KvWindow, Metrics, Percentiles, SliceMetrics};
pub use plan::{
    AcceptanceRow, ConfigReport, Contract, Decision, DecisionKind, FleetSweep, LengthsReport,
    NamedPolicy, Plan, PlanInputs, PlanReport, QualityRow, SpeculationReport, Sweep, SweepRow,
    TraceSlice, TraceSource, MAX_LOAD_SCALE, MAX_PLAN_WORK, MAX_SLO_S, MAX_TRACE_RATE_PER_S,
    MIN_LOAD_SCALE, MIN_SLO_S,
};
pub use plan_report::{
    detection_window, elapsed, rollout_table, rollout_words, sweep_table, window_name,
    ROLLOUT_TABLE_ID, SWEEP_TABLE_ID,
};
pub use profile::{HardwareProfile, ModelProfile, WeightPath};
pub use quality::{
    EvalReport, EvalSlice, QualityFloor, QualityProfile, SliceQuality, MAX_BITS_PER_BYTE,
    MIN_BITS_PER_BYTE, TINY_EVAL_JSON,
};
pub use request::{
    list, on_off, split, Knob, KnobKind, PlanRequest, ReadFile, DEFAULT_QUALITY_TOLERANCE, KNOBS,
    MAX_LIST_ENTRIES, MAX_QUALITY_TOLERANCE,
};
pub use rollout::{
    Owners, PlaybookEntry, RolloutInputs, RolloutReport, RolloutWindow, MIN_SAMPLES,
};
pub use sim::{
    simulate, simulate_fleet, simulate_speculative, Batching, DraftModel, KvBudget, ServingPolicy,
    SimOutcome, Slo, VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
};
pub use speculation::{
    expected_tokens_per_step, PolicyAcceptance, SliceAcceptance, SpeculationInputs,
    SpeculationProfile, NGRAM_DRAFT_S_PER_TOKEN, TINY_SPECULATE_JSON,
};
pub use trace::{
    Arrivals, LengthDist, PrefixMix, Request, SharedPrefix, SliceMix, Trace, TraceFormat,
    TraceSpec, MAX_ARRIVAL_S, MAX_PREFIXES, MAX_RATE_PER_S, MAX_REQUESTS, MIN_RATE_PER_S,
};
