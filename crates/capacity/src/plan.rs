//! The release decision: sweep policies and batch limits over one trace, gate each point on
//! the SLOs and the quality floors, and release the highest-goodput point that passes every
//! gate, or degrade to the last known-good plan or the named baseline and say which gate
//! failed, by how much.
//!
//! [`Plan::run_with_progress`] is those steps in order: `validate` the inputs, set up the
//! `Bench` every point is measured on, `sweep` (each point simulated and held to its gates
//! by `Bench::gate`), then `decide` (`release` or `degrade`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cost::{Attention, Calibration, CalibrationFit};
use crate::error::{at_least_one, in_range, positive, CapacityError};
use crate::figures::{figure, shortest};
use crate::fleet::{Fleet, Router, DEFAULT_KV_LINK_GBPS, MAX_REPLICAS};
use crate::gates::{FailedGates, Gate, GateResult};
use crate::lengths::{LengthInputs, SliceLengthChange};
use crate::measured::decoding_name;
use crate::metrics::Metrics;
use crate::profile::{HardwareProfile, ModelProfile, WeightPath};
use crate::quality::{QualityFloor, QualityProfile, MAX_BITS_PER_BYTE, MIN_BITS_PER_BYTE};
use crate::rollout::{playbook, rollout, Owners, PlaybookEntry, RolloutInputs, RolloutReport};
use crate::sim::{
    simulate_fleet, simulate_speculative, Batching, DraftModel, ServingPolicy, SimOutcome, Slo,
};
use crate::speculation::{expected_tokens_per_step, PolicyAcceptance, SpeculationInputs};
use crate::trace::{Trace, TraceSpec};

/// The highest arrival rate of a trace the planner takes, requests per second (a thousand
/// times the generator's highest mean rate, so a generated trace's bursts stay below it):
/// it keeps every rate, scaled rate and goodput of the report a finite number.
pub const MAX_TRACE_RATE_PER_S: f64 = 1e12;

/// The load scales a sweep may use: a millionth to a million times the trace's rate (so a
/// plan needs at most a million replicas, and a scaled trace keeps its clock's precision).
pub const MIN_LOAD_SCALE: f64 = 1e-6;
pub const MAX_LOAD_SCALE: f64 = 1e6;

pub use crate::sim::{MAX_SLO_S, MIN_SLO_S};

/// The most requests one plan simulates over its whole sweep (configurations × requests).
/// A simulated request costs 0.6 to 1.5 µs in a release build on the lab's 2-vCPU EPYC
/// (1.2 to 1.6 µs measured with the machine shared, 120 configurations of 20,000 to
/// 200,000 requests), so a plan at the limit takes one to three minutes; the default sweep
/// of 120 configurations takes up to 833,333 requests.
pub const MAX_PLAN_WORK: u64 = 100_000_000;

/// Where the requests come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TraceSource {
    Generated {
        spec: TraceSpec,
    },
    /// A trace file already read (see [`Trace::parse`]).
    Recorded {
        name: String,
        trace: Trace,
    },
}

impl TraceSource {
    pub fn name(&self) -> &str {
        match self {
            TraceSource::Generated { spec } => &spec.name,
            TraceSource::Recorded { name, .. } => name,
        }
    }

    pub fn trace(&self) -> Result<Trace, CapacityError> {
        match self {
            TraceSource::Generated { spec } => spec.generate(),
            TraceSource::Recorded { trace, .. } => Ok(trace.clone()),
        }
    }
}

/// What the sweep varies; every combination is simulated, loads outermost, in this order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Multiples of the trace's arrival rate offered to one replica: the throughput and
    /// tail-latency curve of each configuration, and the most load it sustains within the
    /// gates.
    pub load_scales: Vec<f64>,
    pub batchings: Vec<Batching>,
    pub max_sequences: Vec<u32>,
    pub weights: Vec<WeightPath>,
    pub block_size: u32,
    /// The fleets each configuration is served on (one replica when absent).
    #[serde(default)]
    pub fleet: FleetSweep,
}

/// Replica counts and routers to sweep, and the settings every fleet of the sweep shares.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetSweep {
    pub replicas: Vec<u32>,
    pub routers: Vec<Router>,
    pub router_staleness_s: f64,
    pub queue_cap: Option<u32>,
    pub prefix_cache: bool,
    /// Prefill and decode replicas (P, D) of a disaggregated fleet, swept beside the
    /// colocated fleet of P + D replicas: the same accelerators, split or not.
    #[serde(default)]
    pub disaggregate: Option<(u32, u32)>,
    #[serde(default = "default_kv_link_gbps")]
    pub kv_link_gbps: f64,
    /// Speculative decoding: every fleet is also served drafting this many tokens per step
    /// (with [`PlanInputs::speculation`]'s measured acceptance).
    #[serde(default)]
    pub speculative_k: Option<u32>,
    /// How attention's memory traffic is priced, for every fleet.
    #[serde(default)]
    pub attention: Attention,
}

fn default_kv_link_gbps() -> f64 {
    DEFAULT_KV_LINK_GBPS
}

impl Default for FleetSweep {
    /// One replica: the single engine.
    fn default() -> FleetSweep {
        let one = Fleet::single();
        FleetSweep {
            replicas: vec![one.replicas],
            routers: vec![one.router],
            router_staleness_s: one.router_staleness_s,
            queue_cap: one.queue_cap,
            prefix_cache: one.prefix_cache,
            disaggregate: None,
            kv_link_gbps: one.kv_link_gbps,
            speculative_k: None,
            attention: one.attention,
        }
    }
}

impl FleetSweep {
    /// Every fleet, replica counts outermost; one replica is routed one way only (every
    /// router sends everything to it).
    pub fn fleets(&self) -> Vec<Fleet> {
        let mut counts = self.replicas.clone();
        if let Some((p, d)) = self.disaggregate {
            let colocated = p.saturating_add(d);
            if !counts.contains(&colocated) {
                counts.push(colocated);
            }
        }
        let mut fleets = Vec::new();
        for replicas in counts {
            for (i, &router) in self.routers.iter().enumerate() {
                if replicas == 1 && i > 0 {
                    break;
                }
                fleets.push(self.fleet(replicas, router, 0));
            }
        }
        if let Some((p, d)) = self.disaggregate {
            for &router in &self.routers {
                fleets.push(self.fleet(p.saturating_add(d), router, p));
            }
        }
        if let Some(k) = self.speculative_k {
            fleets = fleets
                .into_iter()
                .flat_map(|f| {
                    [
                        f,
                        Fleet {
                            speculative_k: k,
                            ..f
                        },
                    ]
                })
                .collect();
        }
        fleets
    }

    fn fleet(&self, replicas: u32, router: Router, prefill_replicas: u32) -> Fleet {
        Fleet {
            replicas,
            router,
            router_staleness_s: self.router_staleness_s,
            queue_cap: self.queue_cap,
            prefix_cache: self.prefix_cache,
            prefill_replicas,
            kv_link_gbps: self.kv_link_gbps,
            speculative_k: 0,
            attention: self.attention,
        }
    }

    /// At least one replica count and router, each fleet valid.
    pub fn validate(&self) -> Result<(), CapacityError> {
        if self.replicas.is_empty() || self.routers.is_empty() {
            return Err(CapacityError::Sweep {
                reason: "needs at least one replica count and one router".into(),
            });
        }
        if self.speculative_k == Some(0) {
            return Err(CapacityError::Speculation {
                reason: "k = 0 drafts nothing; k must be at least 1 (or leave speculation off)"
                    .into(),
            });
        }
        if let Some((p, d)) = self.disaggregate {
            if p == 0 || d == 0 || p as u64 + d as u64 > MAX_REPLICAS as u64 {
                return Err(CapacityError::Sweep {
                    reason: format!(
                        "disaggregation {p}:{d} must have at least one prefill and one decode replica, and at most {MAX_REPLICAS} in all"
                    ),
                });
            }
        }
        for fleet in self.fleets() {
            fleet.validate()?;
        }
        Ok(())
    }

    /// The fleets in words, empty for the single engine.
    fn describe(&self) -> String {
        if *self == FleetSweep::default() {
            return String::new();
        }
        let mut words = format!(
            " × replicas {:?} × routers {}",
            self.replicas,
            self.routers
                .iter()
                .map(|r| r.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if self.prefix_cache {
            words.push_str("; prefix caches");
        }
        if self.router_staleness_s > 0.0 {
            words.push_str(&format!(
                "; the router's view refreshed every {} s",
                shortest(self.router_staleness_s)
            ));
        }
        if let Some(cap) = self.queue_cap {
            words.push_str(&format!("; at most {cap} requests waiting per replica"));
        }
        if let Some(k) = self.speculative_k {
            words.push_str(&format!(
                "; without and with speculative decoding of {k} tokens"
            ));
        }
        if self.attention == Attention::Naive {
            words.push_str("; naive attention (the score matrix in memory)");
        }
        if let Some((p, d)) = self.disaggregate {
            words.push_str(&format!(
                "; disaggregated {p}:{d} prefill:decode against {} colocated replicas, KV over {} Gbit/s",
                p + d,
                shortest(self.kv_link_gbps)
            ));
        }
        words
    }
}

impl Sweep {
    /// Something to sweep, load scales within [`MIN_LOAD_SCALE`, `MAX_LOAD_SCALE`], a KV
    /// block of 1 token up to the model's context, and only policies that can admit a
    /// request (a batch limit or chunked-prefill budget of 0 is an error, not a row).
    pub fn validate(&self, model: &ModelProfile) -> Result<(), CapacityError> {
        if self.batchings.is_empty()
            || self.max_sequences.is_empty()
            || self.weights.is_empty()
            || self.load_scales.is_empty()
        {
            return Err(CapacityError::Sweep {
                reason: "needs at least one batching, batch limit, weight path and load scale"
                    .into(),
            });
        }
        for &load in &self.load_scales {
            in_range(
                "load scale",
                positive("load scale", load)?,
                MIN_LOAD_SCALE,
                MAX_LOAD_SCALE,
            )?;
        }
        self.fleet.validate()?;
        at_least_one("KV block size (tokens)", self.block_size as u64)?;
        if self.block_size > model.context_len {
            return Err(CapacityError::OutOfRange {
                what: format!("KV block size (tokens) for {}", model.name),
                value: self.block_size as f64,
                min: 1.0,
                max: model.context_len as f64,
            });
        }
        for &batching in &self.batchings {
            for &max_sequences in &self.max_sequences {
                ServingPolicy {
                    batching,
                    max_sequences,
                    block_size: self.block_size,
                    weights: WeightPath::Full,
                }
                .validate()?;
            }
        }
        Ok(())
    }

    /// The configurations swept at each load, in words (for the report and the lab), e.g.
    /// "static, continuous × batch limits [1, 4] × weights full; KV blocks of 16 tokens".
    pub fn configurations(&self) -> String {
        format!(
            "{} × batch limits {:?} × weights {}{}; KV blocks of {} tokens",
            self.batchings
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            self.max_sequences,
            self.weights
                .iter()
                .map(|w| w.name())
                .collect::<Vec<_>>()
                .join(", "),
            self.fleet.describe(),
            self.block_size
        )
    }
}

/// A serving configuration with a name the report can use ("baseline", "known-good …").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedPolicy {
    pub name: String,
    pub policy: ServingPolicy,
    /// The fleet it is served on (one replica when absent).
    #[serde(default = "Fleet::single")]
    pub fleet: Fleet,
}

impl NamedPolicy {
    /// The lab's named baseline: continuous batching of 8 sequences on full-precision
    /// weights, KV blocks of 16 tokens.
    pub fn baseline() -> NamedPolicy {
        NamedPolicy {
            name: "baseline: continuous batching, 8 sequences, full-precision weights".into(),
            policy: ServingPolicy {
                batching: Batching::Continuous,
                max_sequences: 8,
                block_size: 16,
                weights: WeightPath::Full,
            },
            fleet: Fleet::single(),
        }
    }
}

impl NamedPolicy {
    /// Reads a known-good plan (the JSON `decode-lab capacity --save-known-good` writes):
    /// a name and a serving policy that can admit requests.
    pub fn from_known_good_json(text: &str) -> Result<NamedPolicy, CapacityError> {
        let known: NamedPolicy =
            serde_json::from_str(text).map_err(|e| CapacityError::KnownGood {
                reason: format!("not the JSON --save-known-good writes: {e}"),
            })?;
        known.validate()?;
        Ok(known)
    }

    /// A name (non-empty) and a policy that can admit requests.
    pub fn validate(&self) -> Result<(), CapacityError> {
        if self.name.trim().is_empty() {
            return Err(CapacityError::KnownGood {
                reason: "the policy has an empty name".into(),
            });
        }
        self.policy
            .validate()
            .and_then(|()| self.fleet.validate())
            .map_err(|e| CapacityError::KnownGood {
                reason: format!("policy {:?}: {e}", self.name),
            })
    }
}

/// Everything a plan reads. Serde, so the lab and the CLI can keep it as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanInputs {
    pub hardware: HardwareProfile,
    pub model: ModelProfile,
    /// When present, the hardware's effective FLOP/s, bandwidth and overhead are replaced
    /// by the fit to these timings.
    pub calibration: Option<Calibration>,
    pub quality: QualityProfile,
    pub quality_floors: Vec<QualityFloor>,
    pub trace: TraceSource,
    pub slo: Slo,
    pub sweep: Sweep,
    /// The named baseline the plan degrades to when nothing passes.
    pub baseline: NamedPolicy,
    /// The last plan that passed (kept as a file by the CLI); preferred over the baseline.
    pub last_known_good: Option<NamedPolicy>,
    /// The decoding policy and measured acceptance that speculative fleets use.
    #[serde(default)]
    pub speculation: Option<SpeculationInputs>,
    /// When present, each request's output length is its trace length cut where a measured
    /// run of the decoding policy stopped ([`crate::LengthProfile::apply`]).
    #[serde(default)]
    pub lengths: Option<LengthInputs>,
    /// Who owns the playbook's detectors.
    #[serde(default)]
    pub owners: Owners,
    /// A canary release of what the plan ships, on `rollout_trace` (the plan's trace when
    /// absent): production traffic need not be the trace it was planned on.
    #[serde(default)]
    pub rollout: Option<RolloutInputs>,
    #[serde(default)]
    pub rollout_trace: Option<TraceSource>,
}

impl PlanInputs {
    /// The lab's tiny model on the lab's CPU, calibrated to its own timings, serving the
    /// named trace preset, with its measured quality, SLOs of 50 ms p99 TTFT and 1 ms p99
    /// time per output token (the tiny model's scale), and floors allowing any slice 0.01 % above its full-precision
    /// bits per byte.
    pub fn tiny_lab(trace_preset: &str) -> Result<PlanInputs, CapacityError> {
        let quality = QualityProfile::tiny();
        let hardware = HardwareProfile::preset("lab-cpu")?;
        let model = ModelProfile::tiny();
        Ok(PlanInputs {
            calibration: Calibration::measured_for(&hardware, &model),
            hardware,
            model,
            quality_floors: quality.floors_within(1e-4),
            quality,
            trace: TraceSource::Generated {
                spec: TraceSpec::preset(trace_preset)?,
            },
            slo: Slo {
                ttft_p99_s: 0.05,
                tpot_p99_s: 0.001,
            },
            sweep: Sweep {
                load_scales: vec![0.5, 1.0, 2.0, 4.0, 8.0],
                batchings: vec![
                    Batching::Static,
                    Batching::Continuous,
                    Batching::ChunkedPrefill { token_budget: 128 },
                ],
                max_sequences: vec![1, 4, 16, 64],
                weights: vec![WeightPath::Full, WeightPath::Int8],
                block_size: 16,
                fleet: FleetSweep::default(),
            },
            baseline: NamedPolicy::baseline(),
            last_known_good: None,
            speculation: None,
            lengths: None,
            owners: Owners::default(),
            rollout: None,
            rollout_trace: None,
        })
    }
}

/// One point of the sweep, as the chart and its table both read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub policy: ServingPolicy,
    pub fleet: Fleet,
    pub replicas: u32,
    pub router: String,
    /// The trace's arrival rate times this (arrivals compressed in time).
    pub load_scale: f64,
    pub offered_rate_per_s: f64,
    pub label: String,
    pub batching: String,
    pub max_sequences: u32,
    pub weights: String,
    pub output_tokens_per_s: f64,
    pub ttft_p99_s: f64,
    pub tpot_p99_s: f64,
    /// p99 of the time between tokens: the decode stall.
    pub tbt_p99_s: f64,
    pub goodput_per_s: f64,
    pub cost_per_million_output_tokens: f64,
    pub kv_min_headroom: f64,
    pub prefix_cache_hit_rate: f64,
    /// Requests refused at a full queue.
    pub rejected: u64,
    pub passes_gates: bool,
    pub failed_gates: FailedGates,
    /// Why the point could not run (weights too large, …); its figures are then 0.
    pub error: Option<String>,
}

/// What the plan ships.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecisionKind {
    /// The best configuration passed every gate.
    Release,
    /// Nothing passed: the last known-good plan.
    DegradeToLastKnownGood,
    /// Nothing passed: the named baseline.
    DegradeToBaseline,
}

impl DecisionKind {
    /// `release`, `degrade-to-last-known-good` or `degrade-to-baseline`: the JSON's names.
    pub fn name(&self) -> &'static str {
        match self {
            DecisionKind::Release => "release",
            DecisionKind::DegradeToLastKnownGood => "degrade-to-last-known-good",
            DecisionKind::DegradeToBaseline => "degrade-to-baseline",
        }
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub kind: DecisionKind,
    pub name: String,
    pub policy: ServingPolicy,
    pub fleet: Fleet,
    /// Load the simulated fleet holds: the sustained multiple of the trace's rate (1 for a
    /// fallback, which is judged on the trace as given), and that rate.
    pub load_scale: f64,
    pub sustained_rate_per_s: f64,
    /// Replicas that serve the whole trace (the fleet's, divided by its load scale), and
    /// what they cost per hour.
    pub replicas: u64,
    pub cost_per_hour: f64,
    /// In words: why this configuration.
    pub reason: String,
    /// When degraded: the gates the best-goodput candidate failed, with their excess.
    pub failed_gates: FailedGates,
    /// The highest-throughput point and whether it passed: where maximising tokens/s
    /// breaks the tail.
    pub max_throughput: Option<SweepRow>,
}

/// A configuration's full figures and gates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigReport {
    pub name: String,
    pub policy: ServingPolicy,
    pub fleet: Fleet,
    pub metrics: Metrics,
    pub gates: Vec<GateResult>,
}

/// Per slice and weight path: measured bits per byte against the floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QualityRow {
    pub slice: String,
    pub name: String,
    pub weights: String,
    pub bits_per_byte: f64,
    pub max_bits_per_byte: f64,
    pub passed: bool,
}

/// The benchmark contract: what was simulated, under which assumptions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    /// The hardware as simulated for the full-precision path (calibrated when a calibration
    /// was given; the int8 path's calibrated rates are in `calibration`).
    pub hardware: HardwareProfile,
    pub model: ModelProfile,
    pub calibration: Option<CalibrationFit>,
    pub trace_name: String,
    pub trace_seed: Option<u64>,
    pub requests: u64,
    pub slices: Vec<TraceSlice>,
    pub offered_rate_per_s: f64,
    pub mean_prompt_tokens: f64,
    pub mean_output_tokens: f64,
    pub slo: Slo,
    pub quality_floors: Vec<QualityFloor>,
    pub sweep: Sweep,
    /// When the sweep speculates: α per policy and slice, the plan's policy first.
    pub speculation: Option<SpeculationReport>,
    /// When output lengths come from the decoding policy: how they changed each slice
    /// (the means above are as served).
    #[serde(default)]
    pub lengths: Option<LengthsReport>,
}

/// Output lengths from the decoding policy, as the plan applied them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LengthsReport {
    pub decoding: String,
    /// The most tokens a measured run could generate.
    pub max_new_tokens: u32,
    pub slices: Vec<SliceLengthChange>,
}

/// What speculative decoding was planned with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeculationReport {
    pub k: u32,
    pub decoding: String,
    pub draft: String,
    pub draft_s_per_token: f64,
    /// Every measured policy and slice, with E at the plan's k: how the decoding policy
    /// moves α, and how the rare slice's differs.
    pub acceptance: Vec<AcceptanceRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceRow {
    pub policy: String,
    pub slice: String,
    pub acceptance_rate: f64,
    pub expected_tokens_per_step: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSlice {
    pub slice: String,
    pub requests: u64,
    pub mean_prompt_tokens: f64,
}

/// The plan: the chapter's four parts (benchmark contract, profiler and bottleneck report,
/// quality gates, capacity and cost recommendation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub contract: Contract,
    /// The shipped configuration's figures: the profiler and bottleneck report.
    pub chosen: ConfigReport,
    pub quality: Vec<QualityRow>,
    pub sweep: Vec<SweepRow>,
    pub decision: Decision,
    /// A detector, owner, mitigation and stop condition for every gate of what ships.
    pub playbook: Vec<PlaybookEntry>,
    /// The canary release, when asked for and the plan releases.
    pub rollout: Option<RolloutReport>,
}

/// The planner.
pub struct Plan;

impl Plan {
    /// Runs the sweep and decides. Same inputs, same report, byte for byte.
    pub fn run(inputs: &PlanInputs) -> Result<PlanReport, CapacityError> {
        Plan::run_with_progress(inputs, &mut |_, _| {})
    }

    /// [`Plan::run`], calling `progress(done, total)` after each simulated configuration
    /// of the sweep (the CLI shows it on standard error for long sweeps; the crate has no
    /// clock, so when to show it is the caller's choice). The report does not depend on it.
    ///
    /// A plan is four steps: validate every input before any work; set up the bench that
    /// every point is measured on; sweep every configuration at every load, each point
    /// simulated and held to its gates; decide what ships.
    pub fn run_with_progress(
        inputs: &PlanInputs,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<PlanReport, CapacityError> {
        let points = validate(inputs)?;
        let bench = Bench::new(inputs)?;
        let rows = sweep(&bench, points, progress)?;
        let (decision, chosen) = decide(&bench, &rows)?;
        let (playbook, rollout) = operate(&bench, &decision, &chosen)?;
        let mut report = bench.into_report(rows, decision, chosen);
        report.playbook = playbook;
        report.rollout = rollout;
        report.check_finite()?;
        Ok(report)
    }
}

/// Every input within its stated range, and the sweep within [`MAX_PLAN_WORK`], before any
/// work. Returns the number of points the sweep simulates.
fn validate(inputs: &PlanInputs) -> Result<usize, CapacityError> {
    inputs.hardware.validate()?;
    inputs.model.validate()?;
    inputs.slo.validate()?;
    let sweep = &inputs.sweep;
    sweep.validate(&inputs.model)?;
    inputs.baseline.policy.validate()?;
    inputs.owners.validate()?;
    if let Some(known) = &inputs.last_known_good {
        known.validate()?;
    }
    if let Some(s) = &inputs.speculation {
        in_range(
            "the draft's seconds per token",
            s.draft_s_per_token,
            0.0,
            1.0,
        )?;
    }
    if let Some(r) = &inputs.rollout {
        r.validate()?;
    }
    if sweep.fleet.speculative_k.is_some() && inputs.speculation.is_none() {
        return Err(CapacityError::Speculation {
            reason:
                "the sweep speculates, but no decoding policy and measured acceptance were given"
                    .into(),
        });
    }
    for (i, floor) in inputs.quality_floors.iter().enumerate() {
        let what = format!("quality floor of slice {:?} (bits/byte)", floor.slice);
        in_range(
            &what,
            positive(&what, floor.max_bits_per_byte)?,
            MIN_BITS_PER_BYTE,
            MAX_BITS_PER_BYTE,
        )?;
        if inputs.quality.slice(&floor.slice).is_none() {
            return Err(CapacityError::Quality {
                reason: format!(
                    "a floor names slice {:?}, which the quality profile does not measure",
                    floor.slice
                ),
            });
        }
        if inputs.quality_floors[..i]
            .iter()
            .any(|f| f.slice == floor.slice)
        {
            return Err(CapacityError::Quality {
                reason: format!("two floors name slice {:?}", floor.slice),
            });
        }
    }
    let points = [
        sweep.load_scales.len(),
        sweep.batchings.len(),
        sweep.max_sequences.len(),
        sweep.weights.len(),
        sweep.fleet.fleets().len(),
    ]
    .iter()
    .fold(1usize, |p, &n| p.saturating_mul(n));
    let requests = match &inputs.trace {
        TraceSource::Generated { spec } => spec.requests.min(usize::MAX as u64) as usize,
        TraceSource::Recorded { trace, .. } => trace.requests.len(),
    };
    if points as u128 * requests as u128 > MAX_PLAN_WORK as u128 {
        return Err(CapacityError::TooMuchWork {
            points,
            requests,
            limit: MAX_PLAN_WORK,
        });
    }
    Ok(points)
}

/// What every point of the sweep is measured on: the hardware of each weight path
/// (calibrated when a calibration was given), the trace with times from its first arrival,
/// the rate it offers, and the measured quality of each slice and weight path.
struct Bench<'a> {
    inputs: &'a PlanInputs,
    calibration: Option<CalibrationFit>,
    /// Times from the first arrival: a trace of Unix times keeps the clock's precision, and
    /// a load scale compresses the gaps, not the first arrival's distance from 0.
    trace: Trace,
    offered_rate_per_s: f64,
    quality: Vec<QualityRow>,
    /// The measured α of each of the trace's slices under the plan's decoding policy.
    draft: Option<DraftModel>,
    /// How the decoding policy's lengths changed the trace, when they were asked for.
    lengths: Option<LengthsReport>,
}

impl<'a> Bench<'a> {
    /// Fits the calibration and reads the trace, which must have an arrival rate and only
    /// slices that are gated on quality.
    fn new(inputs: &'a PlanInputs) -> Result<Bench<'a>, CapacityError> {
        let calibration = match &inputs.calibration {
            Some(c) => Some(c.fit(&inputs.model)?),
            None => None,
        };
        let mut trace = inputs.trace.trace()?;
        let offered_rate_per_s = offered_rate(&trace)?;
        // Every slice of the traffic is gated on quality, the rare one included: a slice
        // without measured quality or a floor would pass its gate by having none.
        for slice in &trace.slices {
            let reason = if inputs.quality.slice(slice).is_none() {
                Some(format!(
                    "the quality profile (of {:?}) measures only {}",
                    inputs.quality.model,
                    inputs
                        .quality
                        .slices
                        .iter()
                        .map(|s| format!("{:?}", s.slice))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            } else if !inputs.quality_floors.iter().any(|f| f.slice == *slice) {
                Some("no quality floor names it".into())
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(CapacityError::UngatedSlice {
                    slice: slice.clone(),
                    reason,
                });
            }
        }
        let origin = trace.requests[0].arrival_s;
        for r in &mut trace.requests {
            r.arrival_s -= origin;
        }
        let lengths = match &inputs.lengths {
            Some(l) => Some(LengthsReport {
                decoding: decoding_name(l.decoding.trim()),
                max_new_tokens: l.profile.max_new_tokens,
                slices: l.profile.apply(&l.decoding, &mut trace)?,
            }),
            None => None,
        };
        let draft = match &inputs.speculation {
            Some(s) => Some(DraftModel {
                acceptance: s.profile.acceptance(&s.decoding, &trace.slices)?,
                draft_s_per_token: s.draft_s_per_token,
            }),
            None => None,
        };
        Ok(Bench {
            inputs,
            calibration,
            trace,
            offered_rate_per_s,
            quality: quality_rows(inputs),
            draft,
            lengths,
        })
    }

    /// The hardware as simulated for a weight path.
    fn hardware(&self, weights: WeightPath) -> HardwareProfile {
        match &self.calibration {
            Some(fit) => fit.apply(&self.inputs.hardware, weights),
            None => self.inputs.hardware.clone(),
        }
    }

    /// The trace offered at `load` times its rate: the arrivals compressed in time.
    fn at_load(&self, load: f64) -> Trace {
        let mut scaled = self.trace.clone();
        for r in &mut scaled.requests {
            r.arrival_s /= load;
        }
        scaled
    }

    /// One configuration on `trace`: simulated, measured, and held to its gates.
    fn evaluate(
        &self,
        trace: &Trace,
        policy: &ServingPolicy,
        fleet: &Fleet,
    ) -> Result<(Metrics, Vec<GateResult>), CapacityError> {
        let hardware = self.hardware(policy.weights);
        let outcome = self.outcome(trace, policy, fleet)?;
        let metrics = Metrics::new(&outcome, trace, policy, &hardware, &self.inputs.slo);
        let gates = self.gate(&metrics, policy);
        Ok((metrics, gates))
    }

    /// One configuration simulated on `trace`.
    fn outcome(
        &self,
        trace: &Trace,
        policy: &ServingPolicy,
        fleet: &Fleet,
    ) -> Result<SimOutcome, CapacityError> {
        let hardware = self.hardware(policy.weights);
        match &self.draft {
            Some(draft) if fleet.speculative_k > 0 => {
                simulate_speculative(trace, &hardware, &self.inputs.model, policy, fleet, draft)
            }
            _ => simulate_fleet(trace, &hardware, &self.inputs.model, policy, fleet),
        }
    }

    /// The gates of one point: the SLOs on all traffic and on every slice, then the
    /// quality floor of every slice on the policy's weight path.
    fn gate(&self, metrics: &Metrics, policy: &ServingPolicy) -> Vec<GateResult> {
        let slo = &self.inputs.slo;
        let mut gates = Vec::new();
        for m in std::iter::once(&metrics.all).chain(&metrics.by_slice) {
            if m.requests == 0 {
                continue;
            }
            gates.push(GateResult::new(
                Gate::TtftP99,
                &m.slice,
                m.ttft.p99,
                slo.ttft_p99_s,
            ));
            if m.tpot.count > 0 {
                gates.push(GateResult::new(
                    Gate::TpotP99,
                    &m.slice,
                    m.tpot.p99,
                    slo.tpot_p99_s,
                ));
            }
        }
        let path = self.inputs.model.precision(policy.weights);
        for q in self.quality.iter().filter(|q| q.weights == path) {
            gates.push(GateResult::new(
                Gate::Quality,
                &q.slice,
                q.bits_per_byte,
                q.max_bits_per_byte,
            ));
        }
        gates
    }

    /// The full figures and gates of the configuration that ships, on `trace`.
    fn profile(
        &self,
        name: &str,
        policy: &ServingPolicy,
        fleet: &Fleet,
        trace: &Trace,
    ) -> Result<ConfigReport, CapacityError> {
        let (metrics, gates) = self.evaluate(trace, policy, fleet)?;
        Ok(ConfigReport {
            name: name.into(),
            policy: policy.clone(),
            fleet: *fleet,
            metrics,
            gates,
        })
    }

    /// The report: the benchmark contract of this bench, then what the sweep and the
    /// decision found.
    fn into_report(
        self,
        sweep: Vec<SweepRow>,
        decision: Decision,
        chosen: ConfigReport,
    ) -> PlanReport {
        let inputs = self.inputs;
        let trace = &self.trace;
        let n = trace.requests.len() as f64;
        let mean = |tokens: fn(&crate::trace::Request) -> u32| {
            trace.requests.iter().map(|r| tokens(r) as f64).sum::<f64>() / n
        };
        let contract = Contract {
            hardware: self.hardware(WeightPath::Full),
            model: inputs.model.clone(),
            calibration: self.calibration,
            trace_name: inputs.trace.name().into(),
            trace_seed: match &inputs.trace {
                TraceSource::Generated { spec } => Some(spec.seed),
                TraceSource::Recorded { .. } => None,
            },
            requests: trace.requests.len() as u64,
            slices: trace
                .slices
                .iter()
                .enumerate()
                .map(|(s, name)| {
                    let of: Vec<_> = trace
                        .requests
                        .iter()
                        .filter(|r| r.slice as usize == s)
                        .collect();
                    TraceSlice {
                        slice: name.clone(),
                        requests: of.len() as u64,
                        mean_prompt_tokens: of.iter().map(|r| r.prompt_tokens as f64).sum::<f64>()
                            / of.len().max(1) as f64,
                    }
                })
                .collect(),
            offered_rate_per_s: self.offered_rate_per_s,
            mean_prompt_tokens: mean(|r| r.prompt_tokens),
            mean_output_tokens: mean(|r| r.output_tokens),
            slo: inputs.slo,
            quality_floors: inputs.quality_floors.clone(),
            sweep: inputs.sweep.clone(),
            speculation: inputs
                .speculation
                .as_ref()
                .zip(inputs.sweep.fleet.speculative_k)
                .map(|(s, k)| speculation_report(s, k)),
            lengths: self.lengths,
        };
        PlanReport {
            contract,
            chosen,
            quality: self.quality,
            sweep,
            decision,
            playbook: Vec::new(),
            rollout: None,
        }
    }
}

/// The playbook of what ships, and (asked for, and the plan releases) its canary against
/// the fallback on the rollout trace at the released load.
fn operate(
    bench: &Bench,
    decision: &Decision,
    chosen: &ConfigReport,
) -> Result<(Vec<PlaybookEntry>, Option<RolloutReport>), CapacityError> {
    let inputs = bench.inputs;
    let fallback = inputs.last_known_good.as_ref().unwrap_or(&inputs.baseline);
    let rollout_inputs = inputs.rollout.clone().unwrap_or(RolloutInputs::canary(0.1));
    let trace = match &inputs.rollout_trace {
        Some(source) => {
            let mut t = source.trace()?;
            if let Some(l) = &inputs.lengths {
                l.profile.apply(&l.decoding, &mut t)?;
            }
            let origin = t.requests.first().map_or(0.0, |r| r.arrival_s);
            for r in &mut t.requests {
                r.arrival_s = (r.arrival_s - origin) / decision.load_scale;
            }
            t
        }
        None => bench.at_load(decision.load_scale),
    };
    let span = trace.requests.last().map_or(0.0, |r| r.arrival_s)
        - trace.requests.first().map_or(0.0, |r| r.arrival_s);
    let window_s = span / rollout_inputs.windows as f64;
    let book = playbook(
        &chosen.gates,
        &trace,
        window_s,
        &inputs.owners,
        &fallback.name,
    );
    let rollout = match (&inputs.rollout, &decision.kind) {
        (Some(r), DecisionKind::Release) => {
            let candidate = bench.outcome(&trace, &decision.policy, &decision.fleet)?;
            let back = bench.outcome(&trace, &fallback.policy, &fallback.fleet)?;
            Some(rollout(
                r,
                &trace,
                &inputs.slo,
                (&decision.name, &candidate),
                (&fallback.name, &back),
            )?)
        }
        _ => None,
    };
    Ok((book, rollout))
}

/// α and E of every measured policy and slice at `k`, the plan's decoding policy first.
fn speculation_report(s: &SpeculationInputs, k: u32) -> SpeculationReport {
    let wanted = decoding_name(s.decoding.trim());
    let mut policies: Vec<&PolicyAcceptance> = s.profile.policies.iter().collect();
    policies.sort_by_key(|p| p.policy != wanted);
    SpeculationReport {
        k,
        decoding: wanted.clone(),
        draft: s.profile.draft.clone(),
        draft_s_per_token: s.draft_s_per_token,
        acceptance: policies
            .into_iter()
            .flat_map(|p| {
                p.slices.iter().map(|sl| AcceptanceRow {
                    policy: p.policy.clone(),
                    slice: sl.slice.clone(),
                    acceptance_rate: sl.acceptance_rate,
                    expected_tokens_per_step: expected_tokens_per_step(sl.acceptance_rate, k),
                })
            })
            .collect(),
    }
}

/// Every configuration at every load, loads outermost, each simulated and gated, in the
/// order of [`Sweep`]. A point that cannot run on this machine (weights too large, a KV
/// cache too small) is a row saying why, not the end of the plan.
fn sweep(
    bench: &Bench,
    points: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<SweepRow>, CapacityError> {
    let sweep = &bench.inputs.sweep;
    let fleets = sweep.fleet.fleets();
    let mut rows = Vec::new();
    for &load in &sweep.load_scales {
        let scaled = bench.at_load(load);
        for &batching in &sweep.batchings {
            for &max_sequences in &sweep.max_sequences {
                for &weights in &sweep.weights {
                    for fleet in &fleets {
                        let policy = ServingPolicy {
                            batching,
                            max_sequences,
                            block_size: sweep.block_size,
                            weights,
                        };
                        let row =
                            SweepRow::new(&policy, fleet, load, bench.offered_rate_per_s * load);
                        match bench.evaluate(&scaled, &policy, fleet) {
                        Ok((metrics, gates)) => rows.push(row.measured(&metrics, &gates)),
                        Err(
                            e @ (CapacityError::WeightsTooLarge { .. }
                            | CapacityError::KvTooSmall { .. }
                            | CapacityError::NeverAdmits { .. }),
                        ) => rows.push(SweepRow {
                            error: Some(e.to_string()),
                            ..row
                        }),
                        Err(CapacityError::ClockResolution {
                            time_s,
                            iteration_s,
                            ..
                        }) if load < 1.0 => {
                            return Err(CapacityError::ClockResolution {
                                time_s,
                                iteration_s,
                                hint: format!(
                                    "load scale {} stretches the trace's {} s of arrivals that far; use a load scale closer to 1 or a shorter trace",
                                    shortest(load),
                                    shortest(bench.trace.requests.last().map_or(0.0, |r| r.arrival_s))
                                ),
                            })
                        }
                        Err(e) => return Err(e),
                    }
                        progress(rows.len(), points);
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// What ships: the passing point of highest goodput, with the replicas the trace needs;
/// or, when no point passes, the last known-good plan or the baseline, with the gates the
/// best candidate failed and by how much. Also the highest-throughput point, to show where
/// maximising tokens/s breaks the tail.
fn decide(bench: &Bench, rows: &[SweepRow]) -> Result<(Decision, ConfigReport), CapacityError> {
    let max_throughput = rows
        .iter()
        .filter(|r| r.error.is_none())
        .fold(None::<&SweepRow>, |m, r| match m {
            Some(m) if m.output_tokens_per_s >= r.output_tokens_per_s => Some(m),
            _ => Some(r),
        })
        .cloned();
    match best(rows, true) {
        Some(row) => release(bench, rows, row, max_throughput),
        None => degrade(bench, best(rows, false), max_throughput),
    }
}

/// The best row that runs and passes every gate (`passing`) or fails one, by [`better`].
fn best(rows: &[SweepRow], passing: bool) -> Option<&SweepRow> {
    rows.iter()
        .filter(|r| r.error.is_none() && r.passes_gates == passing)
        .fold(None, |best, r| match best {
            Some(b) if !better(r, b) => Some(b),
            _ => Some(r),
        })
}

/// Ships `row`: one replica sustains its load, so the trace needs `1 / load` of them.
fn release(
    bench: &Bench,
    rows: &[SweepRow],
    row: &SweepRow,
    max_throughput: Option<SweepRow>,
) -> Result<(Decision, ConfigReport), CapacityError> {
    let cost_per_hour = bench.inputs.hardware.cost_per_hour;
    let mut reason = format!(
        "{} has the highest goodput ({} requests/s) of the {} configurations that pass every gate",
        row.label,
        figure(row.goodput_per_s),
        rows.iter().filter(|r| r.passes_gates).count()
    );
    if let Some(m) = &max_throughput {
        if !m.passes_gates {
            reason.push_str(&format!(
                "; the highest-throughput configuration, {} ({} tokens/s), fails {}",
                m.label,
                figure(m.output_tokens_per_s),
                m.failed_gates.in_brief()
            ));
        }
    }
    let fleet = row.fleet;
    let replicas = ((fleet.replicas as f64 / row.load_scale) - 1e-9)
        .ceil()
        .max(1.0) as u64;
    let serving = if fleet.replicas == 1 {
        "one replica sustains".to_string()
    } else {
        format!(
            "{} replicas behind {} routing sustain",
            fleet.replicas, fleet.router
        )
    };
    reason.push_str(&format!(
        "; {serving} {} requests/s ({}x the trace) within the gates, so the trace's {} requests/s need {replicas} replica{} at {} per hour",
        figure(row.offered_rate_per_s),
        figure(row.load_scale),
        figure(bench.offered_rate_per_s),
        if replicas == 1 { "" } else { "s" },
        figure(replicas as f64 * cost_per_hour)
    ));
    // The sweep kept each point's row, not its full figures: the one that ships is
    // measured again (the simulation is deterministic, so these are the row's figures).
    let chosen = bench.profile(
        &row.label,
        &row.policy,
        &fleet,
        &bench.at_load(row.load_scale),
    )?;
    let decision = Decision {
        kind: DecisionKind::Release,
        name: row.label.clone(),
        policy: row.policy.clone(),
        fleet,
        load_scale: row.load_scale,
        sustained_rate_per_s: row.offered_rate_per_s,
        replicas,
        cost_per_hour: replicas as f64 * cost_per_hour,
        reason,
        failed_gates: FailedGates::default(),
        max_throughput,
    };
    Ok((decision, chosen))
}

/// Ships the last known-good plan, else the baseline, on the trace as given; says what the
/// best failing candidate (if any ran) failed, and what the fallback fails itself.
fn degrade(
    bench: &Bench,
    best_failing: Option<&SweepRow>,
    max_throughput: Option<SweepRow>,
) -> Result<(Decision, ConfigReport), CapacityError> {
    let inputs = bench.inputs;
    let (kind, fallback) = match &inputs.last_known_good {
        Some(k) => (DecisionKind::DegradeToLastKnownGood, k),
        None => (DecisionKind::DegradeToBaseline, &inputs.baseline),
    };
    let (failed_gates, why) = match best_failing {
        Some(row) => (
            row.failed_gates.clone(),
            format!(
                "no configuration passes every gate; the best candidate, {}, fails: {}",
                row.label, row.failed_gates
            ),
        ),
        None => (
            FailedGates::default(),
            "no configuration of the sweep can run on this machine".into(),
        ),
    };
    let chosen = bench.profile(
        &fallback.name,
        &fallback.policy,
        &fallback.fleet,
        &bench.trace,
    )?;
    let mut reason = format!("{why}; degrading to {}", fallback.name);
    if !chosen.gates.iter().all(|g| g.passed) {
        reason.push_str(&format!(
            " (which fails too: {})",
            FailedGates::of(&chosen.gates)
        ));
    }
    let decision = Decision {
        kind,
        name: fallback.name.clone(),
        policy: fallback.policy.clone(),
        fleet: fallback.fleet,
        load_scale: 1.0,
        sustained_rate_per_s: bench.offered_rate_per_s,
        replicas: fallback.fleet.replicas as u64,
        cost_per_hour: fallback.fleet.replicas as f64 * inputs.hardware.cost_per_hour,
        reason,
        failed_gates,
        max_throughput,
    };
    Ok((decision, chosen))
}

impl PlanReport {
    /// Every figure is a finite number. The checks on the inputs are meant to make this
    /// always hold; should one miss, the plan is an error naming the figure, never a report
    /// that prints `inf` or a JSON `null` where a number belongs.
    fn check_finite(&self) -> Result<(), CapacityError> {
        // The only nulls a report may hold: its optional parts, absent.
        const OPTIONAL: [&str; 13] = [
            "rollout",
            "detected_at_s",
            "detector",
            "stopped_at_s",
            "calibration",
            "trace_seed",
            "error",
            "max_throughput",
            "queue_cap",
            "disaggregate",
            "speculative_k",
            "speculation",
            "lengths",
        ];
        fn walk(value: &serde_json::Value, path: &mut String) -> Result<(), CapacityError> {
            match value {
                serde_json::Value::Object(map) => {
                    for (key, v) in map {
                        if v.is_null() && OPTIONAL.contains(&key.as_str()) {
                            continue;
                        }
                        let len = path.len();
                        path.push('.');
                        path.push_str(key);
                        walk(v, path)?;
                        path.truncate(len);
                    }
                }
                serde_json::Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        let len = path.len();
                        path.push_str(&format!("[{i}]"));
                        walk(v, path)?;
                        path.truncate(len);
                    }
                }
                // serde_json writes an infinite or NaN f64 as null.
                serde_json::Value::Null => {
                    return Err(CapacityError::NotFinite {
                        figure: path.trim_start_matches('.').to_string(),
                    })
                }
                serde_json::Value::Number(n) if n.as_f64().is_some_and(|x| !x.is_finite()) => {
                    return Err(CapacityError::NotFinite {
                        figure: path.trim_start_matches('.').to_string(),
                    })
                }
                _ => {}
            }
            Ok(())
        }
        // The report as it is written ([`PlanReport::to_json`]), read back: what is checked is
        // exactly what a reader gets. (It also keeps the browser's page small: the lab
        // already writes the report this way, and reads JSON into a `Value` elsewhere.)
        let value: serde_json::Value =
            serde_json::from_str(&self.to_json()).map_err(|_| CapacityError::NotFinite {
                figure: "the report".into(),
            })?;
        walk(&value, &mut String::new())
    }
}

/// Requests per second the trace offers: its requests over the span of their arrivals.
/// (Not (n - 1) over the span: a run lasts at least that span and completes at most n
/// requests, so with this rate no goodput can exceed the rate the plan says a replica
/// sustains.) A trace whose arrivals span no time has no rate.
fn offered_rate(trace: &Trace) -> Result<f64, CapacityError> {
    let (Some(first), Some(last)) = (trace.requests.first(), trace.requests.last()) else {
        return Err(CapacityError::EmptyTrace);
    };
    let n = trace.requests.len();
    let span = last.arrival_s - first.arrival_s;
    if span.is_nan() || span <= 0.0 {
        return Err(CapacityError::NoArrivalRate {
            requests: n,
            arrival_s: first.arrival_s,
        });
    }
    let rate = n as f64 / span;
    if !rate.is_finite() || rate > MAX_TRACE_RATE_PER_S {
        return Err(CapacityError::RateTooHigh {
            what: format!(
                "the trace's arrival rate ({n} requests within {} s)",
                shortest(span)
            ),
            rate,
            limit: MAX_TRACE_RATE_PER_S,
        });
    }
    Ok(rate)
}

/// Higher goodput per replica, then higher throughput per replica, then lower cost;
/// earlier rows win ties. (Per replica: a larger fleet has more goodput, not a better
/// configuration.)
fn better(a: &SweepRow, b: &SweepRow) -> bool {
    let per = |r: &SweepRow, x: f64| x / r.replicas as f64;
    (
        per(a, a.goodput_per_s),
        per(a, a.output_tokens_per_s),
        -a.cost_per_million_output_tokens,
    )
        .partial_cmp(&(
            per(b, b.goodput_per_s),
            per(b, b.output_tokens_per_s),
            -b.cost_per_million_output_tokens,
        ))
        == Some(std::cmp::Ordering::Greater)
}

fn quality_rows(inputs: &PlanInputs) -> Vec<QualityRow> {
    let mut rows = Vec::new();
    for floor in &inputs.quality_floors {
        let Some(s) = inputs.quality.slice(&floor.slice) else {
            continue;
        };
        for weights in [WeightPath::Full, WeightPath::Int8] {
            let bpb = s.bits_per_byte(weights);
            rows.push(QualityRow {
                slice: s.slice.clone(),
                name: s.name.clone(),
                weights: inputs.model.precision(weights).into(),
                bits_per_byte: bpb,
                max_bits_per_byte: floor.max_bits_per_byte,
                passed: bpb <= floor.max_bits_per_byte,
            });
        }
    }
    rows
}

impl SweepRow {
    /// A policy at a load, offered `rate` requests/s, before it is measured: every figure 0,
    /// no gate passed.
    fn new(policy: &ServingPolicy, fleet: &Fleet, load: f64, rate: f64) -> SweepRow {
        let fleet_label = fleet.label();
        SweepRow {
            policy: policy.clone(),
            fleet: *fleet,
            replicas: fleet.replicas,
            router: fleet.router.name().into(),
            load_scale: load,
            offered_rate_per_s: rate,
            label: if fleet_label.is_empty() {
                format!("{} at {}x load", policy.label(), shortest(load))
            } else {
                format!(
                    "{}, {fleet_label} at {}x load",
                    policy.label(),
                    shortest(load)
                )
            },
            batching: policy.batching.to_string(),
            max_sequences: policy.max_sequences,
            weights: policy.weights.name().into(),
            output_tokens_per_s: 0.0,
            ttft_p99_s: 0.0,
            tpot_p99_s: 0.0,
            tbt_p99_s: 0.0,
            goodput_per_s: 0.0,
            cost_per_million_output_tokens: 0.0,
            kv_min_headroom: 0.0,
            prefix_cache_hit_rate: 0.0,
            rejected: 0,
            passes_gates: false,
            failed_gates: FailedGates::default(),
            error: None,
        }
    }

    /// The row's figures and verdict from its measurement.
    fn measured(self, metrics: &Metrics, gates: &[GateResult]) -> SweepRow {
        SweepRow {
            output_tokens_per_s: metrics.output_tokens_per_s,
            ttft_p99_s: metrics.all.ttft.p99,
            tpot_p99_s: metrics.all.tpot.p99,
            tbt_p99_s: metrics.tbt.p99,
            goodput_per_s: metrics.all.goodput_per_s,
            cost_per_million_output_tokens: metrics.cost_per_million_output_tokens,
            kv_min_headroom: metrics.kv.min_headroom,
            prefix_cache_hit_rate: metrics.prefix_cache_hit_rate,
            rejected: metrics.all.rejected,
            passes_gates: gates.iter().all(|g| g.passed),
            failed_gates: FailedGates::of(gates),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_finite_figure_is_named_not_printed() {
        let mut inputs = PlanInputs::tiny_lab("poisson").unwrap();
        if let TraceSource::Generated { spec } = &mut inputs.trace {
            spec.requests = 50;
        }
        inputs.sweep.load_scales = vec![1.0];
        let mut report = Plan::run(&inputs).unwrap();
        report.check_finite().unwrap();
        report.sweep[2].goodput_per_s = f64::NAN;
        assert_eq!(
            report.check_finite().unwrap_err(),
            CapacityError::NotFinite {
                figure: "sweep[2].goodput_per_s".into()
            }
        );
        report.sweep[2].goodput_per_s = 1.0;
        report.chosen.metrics.kv.timeline[7].headroom = f64::INFINITY;
        assert!(report
            .check_finite()
            .unwrap_err()
            .to_string()
            .contains("chosen.metrics.kv.timeline[7].headroom"));
    }

    #[test]
    fn decision_kinds_print_their_json_names() {
        for kind in [
            DecisionKind::Release,
            DecisionKind::DegradeToLastKnownGood,
            DecisionKind::DegradeToBaseline,
        ] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{kind}\""));
        }
    }
}
