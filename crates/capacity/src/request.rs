//! A plan request as its knobs: the one table of every input a capacity plan takes
//! ([`KNOBS`]: its name, which is `decode-lab capacity`'s flag, the lab's URL key where the
//! Capacity panel offers it, a label, a hint, the value's form and its default), and the one
//! parser that turns a request's key/value pairs into [`PlanInputs`] ([`PlanRequest`]).
//!
//! The CLI builds its arguments from the table and hands its flags over as pairs; the lab's
//! planner worker hands over its form's. Each knob is read as it is applied, so an error
//! names the knob that caused it, and the value as it was typed: a
//! [`CapacityError::Knob`] or [`CapacityError::KnobRule`]. Files (a trace, a quality
//! profile, measured runs) are read by the caller, which is given the knob and the path.
//!
//! One list rule ([`list`]): comma-separated entries, none empty (`4,,8` and a trailing
//! comma are refused), none twice, at most [`MAX_LIST_ENTRIES`].
//!
//! ```
//! use capacity::PlanRequest;
//! let inputs = PlanRequest::new([("batch-limits", "4,16"), ("requests", "500")])
//!     .inputs(&mut |_, _| unreachable!("no file is named"))
//!     .unwrap();
//! assert_eq!(inputs.sweep.max_sequences, [4, 16]);
//! let refused = PlanRequest::new([("batch-limits", "4,,8")]).inputs(&mut |_, _| unreachable!());
//! assert!(refused.unwrap_err().to_string().starts_with("--batch-limits 4,,8: an empty entry"));
//! ```

use crate::error::CapacityError;
use crate::figures::shortest;
use crate::{
    Batching, Calibration, HardwareProfile, LengthInputs, LengthProfile, ModelProfile, NamedPolicy,
    Owners, PlanInputs, QualityProfile, RolloutInputs, SpeculationInputs, SpeculationProfile,
    Trace, TraceFormat, TraceSource, TraceSpec, WeightPath,
};

/// Most entries in one comma list (load scales, batch limits, replicas, ...): a sweep is a
/// product of its lists, so each stays short enough to read as a table.
pub const MAX_LIST_ENTRIES: usize = 16;

/// Floors allow each slice this share above its full-precision bits per byte by default
/// (0.01 %), and at most [`MAX_QUALITY_TOLERANCE`] (1,000 %).
pub const DEFAULT_QUALITY_TOLERANCE: f64 = 1e-4;
pub const MAX_QUALITY_TOLERANCE: f64 = 10.0;

/// What a knob's value is, which tells a command line how to take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// A word or a list, read by [`PlanRequest`].
    Text,
    /// A whole number a u64 holds.
    Whole64,
    /// A whole number a u32 holds.
    Whole32,
    /// A number.
    Number,
    /// Present or not: no value.
    Switch,
    /// A file's path, read by the caller.
    File,
    /// Given any number of times, each a value.
    Repeated,
}

/// One input of a plan.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// The name: `decode-lab capacity --NAME`, and the key of a request's pair.
    pub name: &'static str,
    /// The lab's URL key, where the Capacity panel's field takes this knob's values as
    /// written here.
    pub url: Option<&'static str>,
    /// What a form calls it.
    pub label: &'static str,
    /// One or two sentences on what it does (the CLI's help).
    pub hint: &'static str,
    /// The value's form in a usage line (`LIST`, `P:D`); empty for a switch.
    pub value_name: &'static str,
    /// The value when it is not given, where the plan names one here.
    pub default: Option<&'static str>,
    pub kind: KnobKind,
}

const fn knob(
    name: &'static str,
    url: Option<&'static str>,
    label: &'static str,
    value_name: &'static str,
    kind: KnobKind,
    hint: &'static str,
) -> Knob {
    Knob {
        name,
        url,
        label,
        hint,
        value_name,
        default: None,
        kind,
    }
}

const fn with_default(knob: Knob, default: &'static str) -> Knob {
    Knob {
        default: Some(default),
        ..knob
    }
}

use KnobKind::*;

/// Every knob of a plan request, in the order a request applies them.
pub const KNOBS: [Knob; 37] = [
    with_default(knob("trace", Some("cap_trace"), "Trace", "PRESET|FILE", Text,
        "A trace preset (poisson, bursty, diurnal, chat-prefix) or a trace file (.csv or .jsonl; schema in the README)."), "poisson"),
    knob("requests", None, "Requests", "REQUESTS", Whole64, "Requests drawn from a trace preset."),
    knob("seed", Some("cap_seed"), "Seed", "SEED", Whole64, "Seed of a trace preset."),
    knob("rate", Some("cap_rate"), "Arrival rate (requests/s)", "RATE", Number,
        "Mean arrival rate of a trace preset, requests per second."),
    with_default(knob("hardware", Some("cap_hw"), "Hardware", "HARDWARE", Text,
        "Accelerator preset: lab-cpu, a100-80gb, h100-sxm, h200, l4."), "lab-cpu"),
    with_default(knob("model", Some("cap_model"), "Model", "MODEL", Text,
        "Model preset: decode-lab-tiny-v1, llama-2-7b, llama-2-13b, llama-3-8b, mistral-7b."), "decode-lab-tiny-v1"),
    knob("no-calibration", Some("cap_datasheet"), "Datasheet figures", "", Switch,
        "Use the hardware preset's datasheet figures, not the fit to the lab's own timings (the fit applies only to the tiny model on lab-cpu)."),
    knob("policy", None, "Batching policies", "LIST", Text,
        "Batching policies to sweep, comma-separated: static, continuous, chunked:BUDGET."),
    knob("batch-limits", Some("cap_seqs"), "Batch limits (sequences)", "LIST", Text,
        "Batch limits (most concurrent sequences) to sweep, comma-separated."),
    knob("weights", None, "Weight paths", "LIST", Text, "Weight paths to sweep, comma-separated: full, int8."),
    knob("load-scales", Some("cap_loads"), "Load scales", "LIST", Text,
        "Multiples of the trace's arrival rate offered to one replica, comma-separated."),
    knob("replicas", Some("cap_replicas"), "Replicas", "LIST", Text,
        "Replica counts to sweep, comma-separated: the trace served on N identical replicas behind a router."),
    knob("router", Some("cap_router"), "Routers", "LIST", Text,
        "Routers to sweep, comma-separated: round-robin, random, least-outstanding, least-kv, prefix-affinity, kv-aware (formulas in the README)."),
    knob("router-staleness", Some("cap_staleness"), "Router staleness (s)", "S", Number,
        "The router sees replica load and cache state refreshed every S seconds (0: live)."),
    knob("queue-cap", Some("cap_queue"), "Queue cap", "N", Whole32,
        "Admission control: at most this many requests wait per replica; the rest are rejected and count against goodput."),
    knob("prefix-cache", Some("cap_prefix"), "Prefix cache", "on|off", Text, "A prefix cache on each replica (`on` or `off`)."),
    knob("attention", Some("cap_attention"), "Attention", "fused|naive", Text,
        "How attention's memory traffic is priced: fused (FlashAttention: the scores stay on chip) or naive (the score matrix written and read) [default: fused]."),
    knob("disaggregate", Some("cap_pd"), "Prefill:decode replicas", "P:D", Text,
        "Prefill/decode disaggregation: P prefill and D decode replicas, swept beside P + D colocated ones."),
    with_default(knob("decoding", Some("cap_decoding"), "Decoding policy", "POLICY", Text,
        "The decoding policy the plan serves, whose measured acceptance rate (with --speculative) and output lengths (with --lengths-from-policy) apply: greedy, temperature-0.7 or temperature-1.5 (those the `--planner` files measure)."), "temperature-0.7"),
    knob("speculative", Some("cap_k"), "Speculative tokens per step", "K", Whole32,
        "Speculative decoding: sweep every configuration also drafting K tokens per step, with the acceptance measured per slice under --decoding."),
    knob("speculation", None, "Measured acceptance", "FILE", File,
        "The measured acceptance: the JSON of `decode-lab speculate --planner` (default: the committed models/decode-lab-tiny-v1/speculate.json)."),
    knob("lengths-from-policy", None, "Lengths from the policy", "", Switch,
        "Cut each request's output where a measured run of --decoding stopped: the trace's length is the request's budget, and the policy decides how much of it is used."),
    knob("lengths", None, "Measured lengths", "FILE", File,
        "The measured runs: the JSON of `decode-lab lengths --planner` (default: the committed models/decode-lab-tiny-v1/lengths.json)."),
    knob("kv-link-gbps", Some("cap_kv_link"), "KV link (Gbit/s)", "GBPS", Number,
        "Bandwidth of the link a request's KV cache crosses from its prefill to its decode replica, Gbit/s [default: 400]."),
    with_default(knob("owner-latency", Some("cap_owner_latency"), "Latency owner", "ROLE", Text,
        "The role that owns the latency detectors of the playbook."), "serving on-call"),
    with_default(knob("owner-quality", Some("cap_owner_quality"), "Quality owner", "ROLE", Text,
        "The role that owns the quality detectors of the playbook."), "model quality owner"),
    knob("rollout", None, "Rollout", "canary:FRACTION", Text,
        "Simulate the release as a canary taking this share of the requests (`canary:FRACTION`); a detector stops it at the first breached gate."),
    knob("rollout-trace", None, "Canary's trace", "PRESET|FILE", Text,
        "The traffic the canary meets (a preset or a trace file, at the plan's rate unless --rate is given) [default: the plan's trace]."),
    knob("mitigation-delay", Some("cap_mitigation"), "Mitigation delay (s)", "S", Number,
        "Seconds from a detection to the canary's traffic back on the fallback [default: one detector window]."),
    knob("detector-windows", Some("cap_windows"), "Detector windows", "N", Whole32,
        "How many tumbling windows the detector judges over the rollout trace's span [default: 20]; fewer, longer windows hold enough of a rare slice's requests to judge it."),
    knob("block-size", Some("cap_block"), "KV block size (tokens)", "BLOCK_SIZE", Whole32, "Tokens per KV-cache block."),
    knob("slo-ttft-p99", None, "p99 TTFT SLO (s)", "SLO_TTFT_P99", Number, "SLO: p99 time to first token, seconds."),
    knob("slo-tpot-p99", None, "p99 time-per-token SLO (s)", "SLO_TPOT_P99", Number, "SLO: p99 time per output token, seconds."),
    knob("quality", None, "Quality profile", "FILE", File,
        "The quality profile: the JSON of `decode-lab eval --json` (default: the committed models/decode-lab-tiny-v1/eval.json)."),
    knob("quality-tolerance", None, "Quality tolerance", "QUALITY_TOLERANCE", Number,
        "Floors: every slice at most this share above its full-precision bits per byte (default 0.0001, that is 0.01 %)."),
    knob("floor", Some("cap_floors"), "Slice floor", "SLICE=MAX", Repeated,
        "A slice's floor in bits per byte, `SLICE=MAX`, in place of the tolerance's floor for that slice (several slices: repeat the flag; in the lab, separate them with commas)."),
    knob("last-known-good", None, "Last known-good plan", "FILE", File,
        "The last known-good plan (a file `--save-known-good` wrote); degraded to before the baseline."),
];

impl Knob {
    /// The knob named `name`.
    pub fn named(name: &str) -> Option<&'static Knob> {
        KNOBS.iter().find(|k| k.name == name)
    }

    /// The knob whose lab URL key is `key`.
    pub fn at_url(key: &str) -> Option<&'static Knob> {
        KNOBS.iter().find(|k| k.url == Some(key))
    }
}

fn knob_error(knob: &'static str, value: &str, why: impl Into<String>) -> CapacityError {
    CapacityError::Knob {
        knob,
        value: value.into(),
        why: why.into(),
    }
}

fn rule<'a>(
    knob: &'static str,
    value: &'a str,
) -> impl FnOnce(CapacityError) -> CapacityError + 'a {
    move |source| CapacityError::KnobRule {
        knob,
        value: value.into(),
        source: Box::new(source),
    }
}

/// The one list rule: `text`'s comma-separated entries, each read by `parse`; an empty
/// entry, an entry twice or more than [`MAX_LIST_ENTRIES`] entries is an error naming
/// `knob` and saying what was `expected`.
pub fn list<T: PartialEq>(
    knob: &'static str,
    text: &str,
    expected: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, CapacityError> {
    let mut items = Vec::new();
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    if entries.len() > MAX_LIST_ENTRIES {
        return Err(knob_error(
            knob,
            text,
            format!(
                "{} entries; a list holds at most {MAX_LIST_ENTRIES}",
                entries.len()
            ),
        ));
    }
    for entry in entries {
        if entry.is_empty() {
            return Err(knob_error(
                knob,
                text,
                format!("an empty entry; expected a comma-separated list of {expected}"),
            ));
        }
        let item = parse(entry).ok_or_else(|| {
            knob_error(
                knob,
                text,
                format!("{entry:?} is not valid; expected {expected}"),
            )
        })?;
        if items.contains(&item) {
            return Err(knob_error(knob, text, format!("{entry:?} is listed twice")));
        }
        items.push(item);
    }
    Ok(items)
}

/// `P:D`, the prefill and decode replicas of a disaggregated fleet.
pub fn split(text: &str) -> Result<(u32, u32), CapacityError> {
    text.split_once(':')
        .and_then(|(p, d)| Some((p.trim().parse().ok()?, d.trim().parse().ok()?)))
        .ok_or_else(|| {
            knob_error(
                "disaggregate",
                text,
                "expected P:D, the prefill and decode replicas as whole numbers, e.g. 3:1",
            )
        })
}

/// `on` or `off`.
pub fn on_off(knob: &'static str, text: &str) -> Result<bool, CapacityError> {
    match text.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(knob_error(knob, text, "expected on or off")),
    }
}

/// A file's text, read by the caller: given the knob and the path as typed.
pub type ReadFile<'a> = dyn FnMut(&'static str, &str) -> Result<String, CapacityError> + 'a;

/// A plan request: its knobs' values as key/value pairs (a knob's name, the value as
/// typed; a switch's value is ignored, a repeated knob is given once per value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlanRequest {
    pairs: Vec<(String, String)>,
}

impl PlanRequest {
    pub fn new<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> PlanRequest {
        PlanRequest {
            pairs: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The last value given for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value given for `name`, or the knob's default.
    fn value(&self, name: &str) -> Option<&str> {
        self.get(name)
            .or_else(|| Knob::named(name).and_then(|k| k.default))
    }

    fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` read as a `T`, when given.
    fn parsed<T: std::str::FromStr>(
        &self,
        name: &'static str,
        expected: &str,
    ) -> Result<Option<T>, CapacityError> {
        self.get(name)
            .map(|text| {
                text.trim()
                    .parse()
                    .map_err(|_| knob_error(name, text, format!("expected {expected}")))
            })
            .transpose()
    }

    fn number(&self, name: &'static str) -> Result<Option<f64>, CapacityError> {
        self.parsed(name, "a number")
    }

    fn whole(&self, name: &'static str) -> Result<Option<u32>, CapacityError> {
        self.parsed(name, "a whole number from 0 to 4294967295")
    }

    /// The plan's inputs: the lab's tiny plan, with each knob given applied in
    /// [`KNOBS`]' order and checked as it is applied (the defaults are valid), so an error
    /// names the knob that caused it. `read` reads the files the request names.
    pub fn inputs(&self, read: &mut ReadFile<'_>) -> Result<PlanInputs, CapacityError> {
        if let Some((unknown, value)) = self.pairs.iter().find(|(k, _)| Knob::named(k).is_none()) {
            return Err(CapacityError::UnknownKnob {
                name: unknown.clone(),
                value: value.clone(),
            });
        }
        let mut inputs = PlanInputs::tiny_lab("poisson")?;
        let hardware = self.value("hardware").unwrap_or_default();
        inputs.hardware = HardwareProfile::preset(hardware).map_err(rule("hardware", hardware))?;
        let model = self.value("model").unwrap_or_default();
        inputs.model = ModelProfile::preset(model).map_err(rule("model", model))?;
        inputs.calibration = if self.has("no-calibration") {
            None
        } else {
            Calibration::measured_for(&inputs.hardware, &inputs.model)
        };
        inputs.trace = self.trace(read)?;
        self.sweep(&mut inputs)?;
        self.fleet(&mut inputs, read)?;
        self.operations(&mut inputs, read)?;
        if let Some(size) = self.whole("block-size")? {
            inputs.sweep.block_size = size;
            inputs.baseline.policy.block_size = size;
            inputs
                .sweep
                .validate(&inputs.model)
                .map_err(rule("block-size", &size.to_string()))?;
        }
        if let Some(v) = self.number("slo-ttft-p99")? {
            inputs.slo.ttft_p99_s = v;
            inputs
                .slo
                .validate()
                .map_err(rule("slo-ttft-p99", &shortest(v)))?;
        }
        if let Some(v) = self.number("slo-tpot-p99")? {
            inputs.slo.tpot_p99_s = v;
            inputs
                .slo
                .validate()
                .map_err(rule("slo-tpot-p99", &shortest(v)))?;
        }
        if let Some(path) = self.get("quality") {
            inputs.quality = QualityProfile::from_eval_json(&read("quality", path)?, "f32")
                .map_err(rule("quality", path))?;
        }
        let tolerance = match self.number("quality-tolerance")? {
            Some(t) if (0.0..=MAX_QUALITY_TOLERANCE).contains(&t) => t,
            Some(t) => {
                return Err(knob_error(
                    "quality-tolerance",
                    &shortest(t),
                    format!(
                        "expected a share from 0 to {} above each slice's full-precision bits per byte (0.01 = 1 %), got {}",
                        shortest(MAX_QUALITY_TOLERANCE),
                        shortest(t)
                    ),
                ))
            }
            None => DEFAULT_QUALITY_TOLERANCE,
        };
        inputs.quality_floors = inputs.quality.floors_within(tolerance);
        self.floors(&mut inputs)?;
        if let Some(path) = self.get("last-known-good") {
            let known = NamedPolicy::from_known_good_json(&read("last-known-good", path)?)
                .map_err(rule("last-known-good", path))?;
            inputs.last_known_good = Some(known);
        }
        Ok(inputs)
    }

    /// The trace: a file (`.csv`, `.jsonl`), or a preset shaped by `requests`, `seed` and
    /// `rate`.
    fn trace(&self, read: &mut ReadFile<'_>) -> Result<TraceSource, CapacityError> {
        let name = self.value("trace").unwrap_or_default();
        if let Some(format) = TraceFormat::from_path(name) {
            if self.has("requests") || self.has("seed") || self.has("rate") {
                return Err(CapacityError::Knobs {
                    knobs: vec!["requests", "seed", "rate"],
                    why: "--requests, --seed and --rate shape a trace preset, not a file".into(),
                });
            }
            let trace = Trace::parse(&read("trace", name)?, format).map_err(rule("trace", name))?;
            return Ok(TraceSource::Recorded {
                name: name.into(),
                trace,
            });
        }
        let mut spec = TraceSpec::preset(name).map_err(|err| {
            knob_error(
                "trace",
                name,
                format!("{err} (or give a trace file ending in .csv or .jsonl)"),
            )
        })?;
        let requests: Option<u64> =
            self.parsed("requests", "a whole number from 0 to 18446744073709551615")?;
        if let Some(n) = requests {
            spec.requests = n;
            spec.validate().map_err(rule("requests", &n.to_string()))?;
        }
        if let Some(seed) =
            self.parsed::<u64>("seed", "a whole number from 0 to 18446744073709551615")?
        {
            spec.seed = seed;
        }
        if let Some(rate) = self.number("rate")? {
            spec.arrivals.set_mean_rate(rate);
            spec.validate().map_err(rule("rate", &shortest(rate)))?;
        }
        Ok(TraceSource::Generated { spec })
    }

    /// `policy`, `batch-limits`, `weights` and `load-scales`: the sweep's lists.
    fn sweep(&self, inputs: &mut PlanInputs) -> Result<(), CapacityError> {
        let check = |inputs: &PlanInputs, name: &'static str, text: &str| {
            inputs
                .sweep
                .validate(&inputs.model)
                .map_err(rule(name, text))
        };
        if let Some(text) = self.get("policy") {
            inputs.sweep.batchings = list(
                "policy",
                text,
                &format!(
                    "{} (BUDGET a whole number of tokens from 1 to 4294967295)",
                    Batching::EXPECTED
                ),
                |s| s.parse().ok(),
            )?;
            check(inputs, "policy", text)?;
        }
        if let Some(text) = self.get("batch-limits") {
            inputs.sweep.max_sequences = list(
                "batch-limits",
                text,
                "whole numbers of sequences from 1 to 4294967295",
                |s| s.parse().ok(),
            )?;
            check(inputs, "batch-limits", text)?;
        }
        if let Some(text) = self.get("weights") {
            inputs.sweep.weights = list("weights", text, WeightPath::EXPECTED, |s| s.parse().ok())?;
        }
        if let Some(text) = self.get("load-scales") {
            // "nan" and "inf" read as numbers here; the sweep's check names them.
            inputs.sweep.load_scales = list(
                "load-scales",
                text,
                &format!(
                    "numbers from {} to {}",
                    shortest(crate::MIN_LOAD_SCALE),
                    shortest(crate::MAX_LOAD_SCALE)
                ),
                |s| s.parse::<f64>().ok(),
            )?;
            check(inputs, "load-scales", text)?;
        }
        Ok(())
    }

    /// The replicas, routers, caches, split, speculation and measured lengths: the fleets
    /// the sweep serves each configuration on.
    fn fleet(&self, inputs: &mut PlanInputs, read: &mut ReadFile<'_>) -> Result<(), CapacityError> {
        let fleet = &mut inputs.sweep.fleet;
        let check = |fleet: &crate::FleetSweep, name: &'static str, text: &str| {
            fleet.validate().map_err(rule(name, text))
        };
        if let Some(text) = self.get("replicas") {
            fleet.replicas = list(
                "replicas",
                text,
                &format!(
                    "whole numbers of replicas from 1 to {}",
                    crate::MAX_REPLICAS
                ),
                |s| s.parse().ok(),
            )?;
            check(fleet, "replicas", text)?;
        }
        if let Some(text) = self.get("router") {
            fleet.routers = list("router", text, crate::Router::EXPECTED, |s| s.parse().ok())?;
        }
        if let Some(s) = self.number("router-staleness")? {
            fleet.router_staleness_s = s;
            check(fleet, "router-staleness", &shortest(s))?;
        }
        if let Some(cap) = self.whole("queue-cap")? {
            fleet.queue_cap = Some(cap);
            check(fleet, "queue-cap", &cap.to_string())?;
        }
        if let Some(text) = self.get("prefix-cache") {
            fleet.prefix_cache = on_off("prefix-cache", text)?;
        }
        if let Some(text) = self.get("attention") {
            fleet.attention = text.trim().parse().map_err(rule("attention", text))?;
        }
        if let Some(text) = self.get("disaggregate") {
            fleet.disaggregate = Some(split(text)?);
            check(fleet, "disaggregate", text)?;
        }
        let decoding = self.value("decoding").unwrap_or_default();
        let speculative = self.whole("speculative")?;
        let lengths_from_policy = self.has("lengths-from-policy");
        // The name is checked when given, not only on the paths that read it: a plan that
        // neither speculates nor cuts lengths by policy would otherwise release under a
        // policy that does not exist.
        if speculative.is_none() && !lengths_from_policy {
            let profile = SpeculationProfile::tiny()?;
            measured(
                decoding,
                profile.policy(decoding).is_some(),
                ("the shipped measurements have", "they have"),
                profile.policy_names(),
            )?;
        }
        if let Some(k) = speculative {
            fleet.speculative_k = Some(k);
            check(fleet, "speculative", &k.to_string())?;
            let profile = match self.get("speculation") {
                Some(path) => SpeculationProfile::from_json(&read("speculation", path)?)
                    .map_err(rule("speculation", path))?,
                None => SpeculationProfile::tiny()?,
            };
            measured(
                decoding,
                profile.policy(decoding).is_some(),
                ("the measured profile has", "it has"),
                profile.policy_names(),
            )?;
            inputs.speculation = Some(SpeculationInputs {
                decoding: decoding.into(),
                profile,
                draft_s_per_token: crate::NGRAM_DRAFT_S_PER_TOKEN,
            });
        } else if self.has("speculation") {
            return Err(CapacityError::Knobs {
                knobs: vec!["speculation", "speculative"],
                why: "--speculation gives the measured acceptance of --speculative K; give K too"
                    .into(),
            });
        }
        if lengths_from_policy {
            let profile = match self.get("lengths") {
                Some(path) => LengthProfile::from_json(&read("lengths", path)?)
                    .map_err(rule("lengths", path))?,
                None => LengthProfile::tiny()?,
            };
            measured(
                decoding,
                profile.policy(decoding).is_some(),
                ("the measured lengths have", "they have"),
                profile.policy_names(),
            )?;
            inputs.lengths = Some(LengthInputs {
                decoding: decoding.into(),
                profile,
            });
        } else if self.has("lengths") {
            return Err(CapacityError::Knobs {
                knobs: vec!["lengths", "lengths-from-policy"],
                why:
                    "--lengths gives the measured runs of --lengths-from-policy; give that flag too"
                        .into(),
            });
        }
        let fleet = &mut inputs.sweep.fleet;
        if let Some(gbps) = self.number("kv-link-gbps")? {
            fleet.kv_link_gbps = gbps;
            if fleet.disaggregate.is_none() {
                return Err(knob_error(
                    "kv-link-gbps",
                    &shortest(gbps),
                    "the KV link joins prefill and decode replicas; give --disaggregate P:D too",
                ));
            }
            check(fleet, "kv-link-gbps", &shortest(gbps))?;
        }
        Ok(())
    }

    /// The rollout, its trace, the mitigation delay and the owners: how the release is
    /// operated.
    fn operations(
        &self,
        inputs: &mut PlanInputs,
        read: &mut ReadFile<'_>,
    ) -> Result<(), CapacityError> {
        let latency = self.value("owner-latency").unwrap_or_default();
        let quality = self.value("owner-quality").unwrap_or_default();
        inputs.owners = Owners {
            latency: latency.trim().into(),
            quality: quality.trim().into(),
        };
        // The rule is the plan's own; the message names the knob.
        inputs.owners.validate().map_err(|e| match &e {
            CapacityError::Owner { gate, .. } => {
                let (name, role) = if *gate == "latency" {
                    ("owner-latency", latency)
                } else {
                    ("owner-quality", quality)
                };
                rule(name, role)(e)
            }
            _ => e,
        })?;
        let Some(text) = self.get("rollout") else {
            if self.has("rollout-trace")
                || self.has("mitigation-delay")
                || self.has("detector-windows")
            {
                return Err(CapacityError::Knobs {
                    knobs: vec!["rollout-trace", "mitigation-delay", "detector-windows", "rollout"],
                    why: "--rollout-trace, --mitigation-delay and --detector-windows shape a canary; give --rollout canary:FRACTION too".into(),
                });
            }
            return Ok(());
        };
        let fraction: f64 = text
            .strip_prefix("canary:")
            .and_then(|f| f.trim().parse().ok())
            .ok_or_else(|| {
                knob_error(
                    "rollout",
                    text,
                    "expected canary:FRACTION, the candidate's share of the requests, e.g. canary:0.1",
                )
            })?;
        let mut rollout = RolloutInputs::canary(fraction);
        rollout.validate().map_err(rule("rollout", text))?;
        if let Some(d) = self.number("mitigation-delay")? {
            rollout.mitigation_delay_s = Some(d);
            rollout
                .validate()
                .map_err(rule("mitigation-delay", &shortest(d)))?;
        }
        if let Some(w) = self.whole("detector-windows")? {
            rollout.windows = w;
            rollout
                .validate()
                .map_err(rule("detector-windows", &w.to_string()))?;
        }
        inputs.rollout = Some(rollout);
        if let Some(name) = self.get("rollout-trace") {
            inputs.rollout_trace = Some(if let Some(format) = TraceFormat::from_path(name) {
                TraceSource::Recorded {
                    name: name.into(),
                    trace: Trace::parse(&read("rollout-trace", name)?, format)
                        .map_err(rule("rollout-trace", name))?,
                }
            } else {
                let mut spec = TraceSpec::preset(name).map_err(|err| {
                    knob_error(
                        "rollout-trace",
                        name,
                        format!("{err} (or give a trace file ending in .csv or .jsonl)"),
                    )
                })?;
                // A preset meets the canary at the plan's rate and request count.
                if let TraceSource::Generated { spec: plan } = &inputs.trace {
                    spec.arrivals.set_mean_rate(plan.arrivals.mean_rate());
                    spec.requests = plan.requests;
                }
                TraceSource::Generated { spec }
            });
        }
        Ok(())
    }

    /// `floor SLICE=MAX` replaces that slice's floor; the other slices keep theirs.
    fn floors(&self, inputs: &mut PlanInputs) -> Result<(), CapacityError> {
        let mut named: Vec<&str> = Vec::new();
        for f in self.all("floor") {
            let (slice, max) = f
                .split_once('=')
                .ok_or_else(|| knob_error("floor", f, "expected SLICE=MAX, e.g. eu=2.1"))?;
            let slice = slice.trim();
            let max_bits_per_byte: f64 = max.trim().parse().map_err(|_| {
                knob_error(
                    "floor",
                    f,
                    format!("{max:?} is not a number of bits per byte"),
                )
            })?;
            if !(crate::MIN_BITS_PER_BYTE..=crate::MAX_BITS_PER_BYTE).contains(&max_bits_per_byte) {
                return Err(knob_error(
                    "floor",
                    f,
                    format!(
                        "expected a number of bits per byte from {} to {}, got {}",
                        shortest(crate::MIN_BITS_PER_BYTE),
                        shortest(crate::MAX_BITS_PER_BYTE),
                        shortest(max_bits_per_byte)
                    ),
                ));
            }
            if named.contains(&slice) {
                return Err(knob_error(
                    "floor",
                    f,
                    format!("slice {slice:?} has a floor already"),
                ));
            }
            named.push(slice);
            let measured = inputs
                .quality
                .slices
                .iter()
                .map(|s| format!("{:?}", s.slice))
                .collect::<Vec<_>>()
                .join(", ");
            let Some(floor) = inputs.quality_floors.iter_mut().find(|q| q.slice == slice) else {
                return Err(knob_error(
                    "floor",
                    f,
                    format!(
                        "the quality profile measures no slice {slice:?}; it measures {measured}"
                    ),
                ));
            };
            floor.max_bits_per_byte = max_bits_per_byte;
        }
        Ok(())
    }
}

/// `decoding` must be a policy the measured file holds: `has` whether it does, `words` what
/// the message says of the file and of its `names` ("the measured profile has", "it has").
fn measured(
    decoding: &str,
    has: bool,
    words: (&str, &str),
    names: String,
) -> Result<(), CapacityError> {
    if has {
        return Ok(());
    }
    Err(knob_error(
        "decoding",
        decoding,
        format!(
            "{} no policy {:?}; {} {names}",
            words.0,
            crate::decoding_name(decoding),
            words.1
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(_: &'static str, _: &str) -> Result<String, CapacityError> {
        panic!("the request names no file")
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        PlanRequest::new(pairs.iter().copied())
            .inputs(&mut no_files)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn no_knob_is_named_twice_and_every_url_key_is_the_labs() {
        for (i, k) in KNOBS.iter().enumerate() {
            assert!(
                KNOBS[..i]
                    .iter()
                    .all(|o| o.name != k.name && (k.url.is_none() || o.url != k.url)),
                "{} twice",
                k.name
            );
            assert!(k.url.is_none_or(|u| u.starts_with("cap_")), "{}", k.name);
            assert_eq!(k.value_name.is_empty(), k.kind == Switch, "{}", k.name);
        }
    }

    #[test]
    fn an_empty_request_is_the_tiny_lab_plan() {
        let inputs = PlanRequest::default().inputs(&mut no_files).unwrap();
        assert_eq!(inputs, PlanInputs::tiny_lab("poisson").unwrap());
    }

    #[test]
    fn the_one_list_rule() {
        assert_eq!(
            refused(&[("batch-limits", "4,,8")]),
            "--batch-limits 4,,8: an empty entry; expected a comma-separated list of whole numbers of sequences from 1 to 4294967295"
        );
        assert!(refused(&[("load-scales", "1,")]).contains("an empty entry"));
        assert!(refused(&[("replicas", "")]).starts_with("--replicas \"\": an empty entry"));
        assert_eq!(
            refused(&[("router", "random,random")]),
            "--router random,random: \"random\" is listed twice"
        );
        let seventeen = (1..=17)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            refused(&[("batch-limits", seventeen.as_str())]),
            format!("--batch-limits {seventeen}: 17 entries; a list holds at most 16")
        );
        let sixteen = (1..=16)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let inputs = PlanRequest::new([("batch-limits", sixteen.as_str()), ("requests", "200")])
            .inputs(&mut no_files)
            .unwrap();
        assert_eq!(inputs.sweep.max_sequences.len(), 16);
    }

    #[test]
    fn each_error_names_its_knob_and_value() {
        assert_eq!(
            refused(&[("disaggregate", "3-1")]),
            "--disaggregate 3-1: expected P:D, the prefill and decode replicas as whole numbers, e.g. 3:1"
        );
        assert_eq!(
            refused(&[("prefix-cache", "yes")]),
            "--prefix-cache yes: expected on or off"
        );
        assert!(
            refused(&[("hardware", "tpu")]).starts_with("--hardware tpu: unknown hardware preset")
        );
        assert!(refused(&[("rate", "fast")]).starts_with("--rate fast: expected a number"));
        assert_eq!(
            refused(&[("colour", "red")]),
            "a plan request has no knob \"colour\" (given \"red\")"
        );
        let e = PlanRequest::new([("speculative", "2"), ("decoding", "beam")])
            .inputs(&mut no_files)
            .unwrap_err();
        assert!(
            matches!(&e, CapacityError::Knob { knob: "decoding", value, .. } if value == "beam")
        );
    }

    #[test]
    fn files_are_read_by_the_caller_with_their_knob() {
        let mut asked = Vec::new();
        let e = PlanRequest::new([("quality", "eval.json")])
            .inputs(&mut |knob, path| {
                asked.push((knob, path.to_string()));
                Ok("not json".into())
            })
            .unwrap_err();
        assert_eq!(asked, [("quality", "eval.json".to_string())]);
        assert!(
            e.to_string()
                .starts_with("--quality eval.json: quality profile"),
            "{e}"
        );
    }
}
