//! `decode-lab capacity`: the inference capacity plan (the `capacity` crate) on the command
//! line: presets or a trace file in, the plan as Markdown or JSON out. Reading and writing
//! files happens here; the planner itself is pure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::files::{self, Named};
use capacity::{
    shortest, Batching, Calibration, HardwareProfile, LengthInputs, LengthProfile, ModelProfile,
    NamedPolicy, Owners, Plan, PlanInputs, QualityProfile, RolloutInputs, SpeculationInputs,
    SpeculationProfile, Trace, TraceFormat, TraceSource, TraceSpec, WeightPath,
};
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Md,
    Json,
}

#[derive(Args)]
pub struct CapacityArgs {
    /// A trace preset (poisson, bursty, diurnal, chat-prefix) or a trace file (.csv or .jsonl; schema in
    /// the README).
    #[arg(long, default_value = "poisson", value_name = "PRESET|FILE")]
    trace: String,
    /// Requests drawn from a trace preset.
    #[arg(long, allow_hyphen_values = true)]
    requests: Option<u64>,
    /// Seed of a trace preset.
    #[arg(long, allow_hyphen_values = true)]
    seed: Option<u64>,
    /// Mean arrival rate of a trace preset, requests per second.
    #[arg(long, allow_hyphen_values = true)]
    rate: Option<f64>,
    /// Accelerator preset: lab-cpu, a100-80gb, h100-sxm, h200, l4.
    #[arg(long, default_value = "lab-cpu")]
    hardware: String,
    /// Model preset: decode-lab-tiny-v1, llama-2-7b, llama-2-13b, llama-3-8b, mistral-7b.
    #[arg(long, default_value = "decode-lab-tiny-v1")]
    model: String,
    /// Use the hardware preset's datasheet figures, not the fit to the lab's own timings
    /// (the fit applies only to the tiny model on lab-cpu).
    #[arg(long)]
    no_calibration: bool,
    /// Batching policies to sweep, comma-separated: static, continuous, chunked:BUDGET.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    policy: Option<String>,
    /// Batch limits (most concurrent sequences) to sweep, comma-separated.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    batch_limits: Option<String>,
    /// Weight paths to sweep, comma-separated: full, int8.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    weights: Option<String>,
    /// Multiples of the trace's arrival rate offered to one replica, comma-separated.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    load_scales: Option<String>,
    /// Tokens per KV-cache block.
    #[arg(long, allow_hyphen_values = true)]
    block_size: Option<u32>,
    /// Replica counts to sweep, comma-separated: the trace served on N identical replicas
    /// behind a router.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    replicas: Option<String>,
    /// Routers to sweep, comma-separated: round-robin, random, least-outstanding, least-kv,
    /// prefix-affinity, kv-aware (formulas in the README).
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    router: Option<String>,
    /// The router sees replica load and cache state refreshed every S seconds (0: live).
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    router_staleness: Option<f64>,
    /// Admission control: at most this many requests wait per replica; the rest are
    /// rejected and count against goodput.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    queue_cap: Option<u32>,
    /// A prefix cache on each replica (`on` or `off`).
    #[arg(long, value_name = "on|off")]
    prefix_cache: Option<String>,
    /// How attention's memory traffic is priced: fused (FlashAttention: the scores stay on
    /// chip) or naive (the score matrix written and read) [default: fused].
    #[arg(long, value_name = "fused|naive")]
    attention: Option<String>,
    /// Prefill/decode disaggregation: P prefill and D decode replicas, swept beside P + D
    /// colocated ones.
    #[arg(long, value_name = "P:D", allow_hyphen_values = true)]
    disaggregate: Option<String>,
    /// Bandwidth of the link a request's KV cache crosses from its prefill to its decode
    /// replica, Gbit/s [default: 400].
    #[arg(long, value_name = "GBPS", allow_hyphen_values = true)]
    kv_link_gbps: Option<f64>,
    /// Speculative decoding: sweep every configuration also drafting K tokens per step,
    /// with the acceptance measured per slice under --decoding.
    #[arg(long, value_name = "K", allow_hyphen_values = true)]
    speculative: Option<u32>,
    /// The decoding policy the plan serves, whose measured acceptance rate (with
    /// --speculative) and output lengths (with --lengths-from-policy) apply: greedy,
    /// temperature-0.7 or temperature-1.5 (those the `--planner` files measure).
    #[arg(long, value_name = "POLICY", default_value = "temperature-0.7")]
    decoding: String,
    /// The measured acceptance: the JSON of `decode-lab speculate --planner` (default:
    /// the committed models/decode-lab-tiny-v1/speculate.json).
    #[arg(long, value_name = "FILE")]
    speculation: Option<PathBuf>,
    /// Cut each request's output where a measured run of --decoding stopped: the trace's
    /// length is the request's budget, and the policy decides how much of it is used.
    #[arg(long)]
    lengths_from_policy: bool,
    /// The measured runs: the JSON of `decode-lab lengths --planner` (default: the
    /// committed models/decode-lab-tiny-v1/lengths.json).
    #[arg(long, value_name = "FILE")]
    lengths: Option<PathBuf>,
    /// Simulate the release as a canary taking this share of the requests
    /// (`canary:FRACTION`); a detector stops it at the first breached gate.
    #[arg(long, value_name = "canary:FRACTION")]
    rollout: Option<String>,
    /// The traffic the canary meets (a preset or a trace file, at the plan's rate unless
    /// --rate is given) [default: the plan's trace].
    #[arg(long, value_name = "PRESET|FILE")]
    rollout_trace: Option<String>,
    /// Seconds from a detection to the canary's traffic back on the fallback [default: one
    /// detector window].
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    mitigation_delay: Option<f64>,
    /// How many tumbling windows the detector judges over the rollout trace's span
    /// [default: 20]; fewer, longer windows hold enough of a rare slice's requests to
    /// judge it.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    detector_windows: Option<u32>,
    /// The role that owns the latency detectors of the playbook.
    #[arg(long, value_name = "ROLE", default_value = "serving on-call")]
    owner_latency: String,
    /// The role that owns the quality detectors of the playbook.
    #[arg(long, value_name = "ROLE", default_value = "model quality owner")]
    owner_quality: String,
    /// SLO: p99 time to first token, seconds.
    #[arg(long, allow_hyphen_values = true)]
    slo_ttft_p99: Option<f64>,
    /// SLO: p99 time per output token, seconds.
    #[arg(long, allow_hyphen_values = true)]
    slo_tpot_p99: Option<f64>,
    /// The quality profile: the JSON of `decode-lab eval --json` (default: the committed
    /// models/decode-lab-tiny-v1/eval.json).
    #[arg(long, value_name = "FILE")]
    quality: Option<PathBuf>,
    /// Floors: every slice at most this share above its full-precision bits per byte
    /// (default 0.0001, that is 0.01 %).
    #[arg(long, allow_hyphen_values = true)]
    quality_tolerance: Option<f64>,
    /// A slice's floor in bits per byte, `SLICE=MAX`, in place of the tolerance's floor for
    /// that slice (repeat for several slices).
    #[arg(long, value_name = "SLICE=MAX", allow_hyphen_values = true)]
    floor: Vec<String>,
    /// The last known-good plan (a file `--save-known-good` wrote); degraded to before the
    /// baseline.
    #[arg(long, value_name = "FILE")]
    last_known_good: Option<PathBuf>,
    /// When the plan releases, write its configuration here as the next known-good plan.
    #[arg(long, value_name = "FILE")]
    save_known_good: Option<PathBuf>,
    /// Print the report as JSON (the same as `--report json`).
    #[arg(long, conflicts_with = "report")]
    json: bool,
    #[arg(long, value_enum, default_value_t = ReportFormat::Md)]
    report: ReportFormat,
}

/// `--flag VALUE` as a message names it: the value as typed, quoted when it is empty or
/// holds spaces.
fn flag(name: &str, value: &str) -> String {
    let value = policy::Excerpt(value);
    if value.0.is_empty() || value.0.chars().any(char::is_whitespace) {
        format!("--{name} {value:?}")
    } else {
        format!("--{name} {value}")
    }
}

/// A comma-separated list: every entry read by `parse`, no empty entry (`4,,8`, a
/// trailing comma) and no entry twice; errors say what was expected.
fn list<T: PartialEq>(
    name: &str,
    text: &str,
    expected: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, String> {
    let mut items = Vec::new();
    for entry in text.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(format!(
                "{}: an empty entry; expected a comma-separated list of {expected}",
                flag(name, text)
            ));
        }
        let item = parse(entry).ok_or_else(|| {
            format!(
                "{}: {entry:?} is not valid; expected {expected}",
                flag(name, text)
            )
        })?;
        if items.contains(&item) {
            return Err(format!("{}: {entry:?} is listed twice", flag(name, text)));
        }
        items.push(item);
    }
    Ok(items)
}

/// Reads a file a flag names; the message names the flag and the path.
fn read(name: &str, path: &Path) -> Result<String, String> {
    let what = flag(name, &path.display().to_string());
    if path.is_dir() {
        return Err(format!("{what}: is a directory, not a file"));
    }
    std::fs::read_to_string(path).map_err(|e| format!("{what}: cannot read it: {e}"))
}

/// The files this run reads, with their flags.
fn files_read(args: &CapacityArgs) -> Vec<Named> {
    let mut files = Vec::new();
    if TraceFormat::from_path(&args.trace).is_some() {
        files.push(Named::new("--trace", &args.trace));
    }
    if let Some(name) = &args.rollout_trace {
        if TraceFormat::from_path(name).is_some() {
            files.push(Named::new("--rollout-trace", name));
        }
    }
    for (name, path) in [
        ("--quality", &args.quality),
        ("--last-known-good", &args.last_known_good),
        ("--speculation", &args.speculation),
        ("--lengths", &args.lengths),
    ] {
        if let Some(path) = path {
            files.push(Named::new(name, path));
        }
    }
    files
}

/// `--save-known-good` must name a file that can be written and that the run does not
/// read ([`files::check`]): checked before any work, so no input is overwritten by a plan
/// made from it.
fn check_save_path(args: &CapacityArgs) -> Result<(), String> {
    let Some(save) = &args.save_known_good else {
        return Ok(());
    };
    let output = Named::new("--save-known-good", save);
    files::check(std::slice::from_ref(&output), &files_read(args))?;
    files::writable(&output).map(|_| ())
}

/// `--decoding` must be a policy the measured file holds: `has` whether it does, `words`
/// what the message says of the file and of its `names` ("the measured profile has",
/// "it has").
fn measured(
    args: &CapacityArgs,
    has: bool,
    words: (&str, &str),
    names: String,
) -> Result<(), String> {
    if has {
        return Ok(());
    }
    Err(format!(
        "{}: {} no policy {:?}; {} {names}",
        flag("decoding", &args.decoding),
        words.0,
        capacity::decoding_name(&args.decoding),
        words.1
    ))
}

/// Floors allow each slice this share above its full-precision bits per byte by default
/// (0.01 %), and at most this share with `--quality-tolerance` (1,000 %).
const DEFAULT_TOLERANCE: f64 = 1e-4;
const MAX_TOLERANCE: f64 = 10.0;

pub fn inputs(args: &CapacityArgs) -> Result<PlanInputs, String> {
    let mut inputs = PlanInputs::tiny_lab("poisson").map_err(|e| e.to_string())?;
    inputs.hardware = HardwareProfile::preset(&args.hardware)
        .map_err(|e| format!("{}: {e}", flag("hardware", &args.hardware)))?;
    inputs.model = ModelProfile::preset(&args.model)
        .map_err(|e| format!("{}: {e}", flag("model", &args.model)))?;
    inputs.calibration = if args.no_calibration {
        None
    } else {
        Calibration::measured_for(&inputs.hardware, &inputs.model)
    };
    inputs.trace = trace(args)?;
    // Each flag is checked as it is applied (the defaults are valid), so an error names
    // the flag that caused it.
    let sweep_flag = |inputs: &PlanInputs, name: &str, text: &str| {
        inputs
            .sweep
            .validate(&inputs.model)
            .map_err(|e| format!("{}: {e}", flag(name, text)))
    };
    if let Some(text) = &args.policy {
        inputs.sweep.batchings = list(
            "policy",
            text,
            &format!(
                "{} (BUDGET a whole number of tokens from 1 to 4294967295)",
                Batching::EXPECTED
            ),
            |s| s.parse().ok(),
        )?;
        sweep_flag(&inputs, "policy", text)?;
    }
    if let Some(text) = &args.batch_limits {
        inputs.sweep.max_sequences = list(
            "batch-limits",
            text,
            "whole numbers of sequences from 1 to 4294967295",
            |s| s.parse().ok(),
        )?;
        sweep_flag(&inputs, "batch-limits", text)?;
    }
    if let Some(text) = &args.weights {
        inputs.sweep.weights = list("weights", text, WeightPath::EXPECTED, |s| s.parse().ok())?;
    }
    if let Some(text) = &args.load_scales {
        // "nan" and "inf" read as numbers here; the sweep's check names them.
        inputs.sweep.load_scales = list(
            "load-scales",
            text,
            &format!(
                "numbers from {} to {}",
                shortest(capacity::MIN_LOAD_SCALE),
                shortest(capacity::MAX_LOAD_SCALE)
            ),
            |s| s.parse::<f64>().ok(),
        )?;
        sweep_flag(&inputs, "load-scales", text)?;
    }
    fleet(args, &mut inputs)?;
    operations(args, &mut inputs)?;
    if let Some(size) = args.block_size {
        inputs.sweep.block_size = size;
        inputs.baseline.policy.block_size = size;
        sweep_flag(&inputs, "block-size", &size.to_string())?;
    }
    if let Some(v) = args.slo_ttft_p99 {
        inputs.slo.ttft_p99_s = v;
        inputs
            .slo
            .validate()
            .map_err(|e| format!("{}: {e}", flag("slo-ttft-p99", &shortest(v))))?;
    }
    if let Some(v) = args.slo_tpot_p99 {
        inputs.slo.tpot_p99_s = v;
        inputs
            .slo
            .validate()
            .map_err(|e| format!("{}: {e}", flag("slo-tpot-p99", &shortest(v))))?;
    }
    if let Some(path) = &args.quality {
        inputs.quality = QualityProfile::from_eval_json(&read("quality", path)?, "f32")
            .map_err(|err| format!("{}: {err}", flag("quality", &path.display().to_string())))?;
    }
    let tolerance = match args.quality_tolerance {
        Some(t) if (0.0..=MAX_TOLERANCE).contains(&t) => t,
        Some(t) => {
            return Err(format!(
                "{}: expected a share from 0 to {} above each slice's full-precision bits per byte (0.01 = 1 %), got {}",
                flag("quality-tolerance", &shortest(t)),
                shortest(MAX_TOLERANCE),
                shortest(t)
            ))
        }
        None => DEFAULT_TOLERANCE,
    };
    inputs.quality_floors = inputs.quality.floors_within(tolerance);
    floors(args, &mut inputs)?;
    if let Some(path) = &args.last_known_good {
        let known =
            NamedPolicy::from_known_good_json(&read("last-known-good", path)?).map_err(|err| {
                format!(
                    "{}: {err}",
                    flag("last-known-good", &path.display().to_string())
                )
            })?;
        inputs.last_known_good = Some(known);
    }
    Ok(inputs)
}

/// `--replicas`, `--router`, `--router-staleness`, `--queue-cap` and `--prefix-cache`: the
/// fleets the sweep serves each configuration on.
fn fleet(args: &CapacityArgs, inputs: &mut PlanInputs) -> Result<(), String> {
    let fleet = &mut inputs.sweep.fleet;
    let check = |fleet: &capacity::FleetSweep, name: &str, text: &str| {
        fleet
            .validate()
            .map_err(|e| format!("{}: {e}", flag(name, text)))
    };
    if let Some(text) = &args.replicas {
        fleet.replicas = list(
            "replicas",
            text,
            &format!(
                "whole numbers of replicas from 1 to {}",
                capacity::MAX_REPLICAS
            ),
            |s| s.parse().ok(),
        )?;
        check(fleet, "replicas", text)?;
    }
    if let Some(text) = &args.router {
        fleet.routers = list("router", text, capacity::Router::EXPECTED, |s| {
            s.parse().ok()
        })?;
    }
    if let Some(s) = args.router_staleness {
        fleet.router_staleness_s = s;
        check(fleet, "router-staleness", &shortest(s))?;
    }
    if let Some(cap) = args.queue_cap {
        fleet.queue_cap = Some(cap);
        check(fleet, "queue-cap", &cap.to_string())?;
    }
    if let Some(text) = &args.prefix_cache {
        fleet.prefix_cache = match text.as_str() {
            "on" => true,
            "off" => false,
            _ => {
                return Err(format!(
                    "{}: expected on or off",
                    flag("prefix-cache", text)
                ))
            }
        };
    }
    if let Some(text) = &args.attention {
        fleet.attention = text
            .parse()
            .map_err(|e| format!("{}: {e}", flag("attention", text)))?;
    }
    if let Some(text) = &args.disaggregate {
        let split = text
            .split_once(':')
            .and_then(|(p, d)| Some((p.trim().parse().ok()?, d.trim().parse().ok()?)))
            .ok_or_else(|| {
                format!(
                    "{}: expected P:D, the prefill and decode replicas as whole numbers, e.g. 3:1",
                    flag("disaggregate", text)
                )
            })?;
        fleet.disaggregate = Some(split);
        check(fleet, "disaggregate", text)?;
    }
    // The name is checked when given, not only on the paths that read it: a plan that
    // neither speculates nor cuts lengths by policy would otherwise release under a policy
    // that does not exist.
    if args.speculative.is_none() && !args.lengths_from_policy {
        let profile = SpeculationProfile::tiny().map_err(|e| e.to_string())?;
        let has = profile.policy(&args.decoding).is_some();
        measured(
            args,
            has,
            ("the shipped measurements have", "they have"),
            profile.policy_names(),
        )?;
    }
    if let Some(k) = args.speculative {
        fleet.speculative_k = Some(k);
        check(fleet, "speculative", &k.to_string())?;
        let profile = match &args.speculation {
            Some(path) => {
                SpeculationProfile::from_json(&read("speculation", path)?).map_err(|e| {
                    format!("{}: {e}", flag("speculation", &path.display().to_string()))
                })?
            }
            None => SpeculationProfile::tiny().map_err(|e| e.to_string())?,
        };
        let has = profile.policy(&args.decoding).is_some();
        measured(
            args,
            has,
            ("the measured profile has", "it has"),
            profile.policy_names(),
        )?;
        inputs.speculation = Some(SpeculationInputs {
            decoding: args.decoding.clone(),
            profile,
            draft_s_per_token: capacity::NGRAM_DRAFT_S_PER_TOKEN,
        });
    } else if args.speculation.is_some() {
        return Err(
            "--speculation gives the measured acceptance of --speculative K; give K too".into(),
        );
    }
    if args.lengths_from_policy {
        let profile = match &args.lengths {
            Some(path) => LengthProfile::from_json(&read("lengths", path)?)
                .map_err(|e| format!("{}: {e}", flag("lengths", &path.display().to_string())))?,
            None => LengthProfile::tiny().map_err(|e| e.to_string())?,
        };
        let has = profile.policy(&args.decoding).is_some();
        measured(
            args,
            has,
            ("the measured lengths have", "they have"),
            profile.policy_names(),
        )?;
        inputs.lengths = Some(LengthInputs {
            decoding: args.decoding.clone(),
            profile,
        });
    } else if args.lengths.is_some() {
        return Err(
            "--lengths gives the measured runs of --lengths-from-policy; give that flag too".into(),
        );
    }
    let fleet = &mut inputs.sweep.fleet;
    if let Some(gbps) = args.kv_link_gbps {
        fleet.kv_link_gbps = gbps;
        if fleet.disaggregate.is_none() {
            return Err(format!(
                "{}: the KV link joins prefill and decode replicas; give --disaggregate P:D too",
                flag("kv-link-gbps", &shortest(gbps))
            ));
        }
        check(fleet, "kv-link-gbps", &shortest(gbps))?;
    }
    Ok(())
}

/// `--rollout`, `--rollout-trace`, `--mitigation-delay` and the owners: how the release
/// is operated.
fn operations(args: &CapacityArgs, inputs: &mut PlanInputs) -> Result<(), String> {
    inputs.owners = Owners {
        latency: args.owner_latency.trim().into(),
        quality: args.owner_quality.trim().into(),
    };
    // The rule is the plan's own; the message names the flag.
    inputs.owners.validate().map_err(|e| match &e {
        capacity::CapacityError::Owner { gate, .. } => {
            let role = if *gate == "latency" {
                &args.owner_latency
            } else {
                &args.owner_quality
            };
            format!("{}: {e}", flag(&format!("owner-{gate}"), role))
        }
        _ => e.to_string(),
    })?;
    let Some(text) = &args.rollout else {
        if args.rollout_trace.is_some()
            || args.mitigation_delay.is_some()
            || args.detector_windows.is_some()
        {
            return Err("--rollout-trace, --mitigation-delay and --detector-windows shape a canary; give --rollout canary:FRACTION too".into());
        }
        return Ok(());
    };
    let fraction: f64 = text
        .strip_prefix("canary:")
        .and_then(|f| f.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "{}: expected canary:FRACTION, the candidate's share of the requests, e.g. canary:0.1",
                flag("rollout", text)
            )
        })?;
    let mut rollout = RolloutInputs::canary(fraction);
    rollout
        .validate()
        .map_err(|e| format!("{}: {e}", flag("rollout", text)))?;
    if let Some(d) = args.mitigation_delay {
        rollout.mitigation_delay_s = Some(d);
        rollout
            .validate()
            .map_err(|e| format!("{}: {e}", flag("mitigation-delay", &shortest(d))))?;
    }
    if let Some(w) = args.detector_windows {
        rollout.windows = w;
        rollout
            .validate()
            .map_err(|e| format!("{}: {e}", flag("detector-windows", &w.to_string())))?;
    }
    inputs.rollout = Some(rollout);
    if let Some(name) = &args.rollout_trace {
        let plan_rate = match &inputs.trace {
            TraceSource::Generated { spec } => Some(spec.arrivals.mean_rate()),
            TraceSource::Recorded { .. } => None,
        };
        inputs.rollout_trace = Some(if let Some(format) = TraceFormat::from_path(name) {
            TraceSource::Recorded {
                name: name.clone(),
                trace: Trace::parse(&read("rollout-trace", Path::new(name))?, format)
                    .map_err(|err| format!("{}: {err}", flag("rollout-trace", name)))?,
            }
        } else {
            let mut spec = TraceSpec::preset(name).map_err(|err| {
                format!(
                    "{}: {err} (or give a trace file ending in .csv or .jsonl)",
                    flag("rollout-trace", name)
                )
            })?;
            if let Some(rate) = plan_rate {
                spec.arrivals.set_mean_rate(rate);
            }
            if let TraceSource::Generated { spec: plan } = &inputs.trace {
                spec.requests = plan.requests;
            }
            TraceSource::Generated { spec }
        });
    }
    Ok(())
}

/// The trace: a file (`.csv`, `.jsonl`) read here, or a preset shaped by `--requests`,
/// `--seed` and `--rate`.
fn trace(args: &CapacityArgs) -> Result<TraceSource, String> {
    if let Some(format) = TraceFormat::from_path(&args.trace) {
        if args.requests.is_some() || args.seed.is_some() || args.rate.is_some() {
            return Err("--requests, --seed and --rate shape a trace preset, not a file".into());
        }
        let trace = Trace::parse(&read("trace", Path::new(&args.trace))?, format)
            .map_err(|err| format!("{}: {err}", flag("trace", &args.trace)))?;
        return Ok(TraceSource::Recorded {
            name: args.trace.clone(),
            trace,
        });
    }
    let mut spec = TraceSpec::preset(&args.trace).map_err(|err| {
        format!(
            "{}: {err} (or give a trace file ending in .csv or .jsonl)",
            flag("trace", &args.trace)
        )
    })?;
    if let Some(n) = args.requests {
        spec.requests = n;
        spec.validate()
            .map_err(|e| format!("{}: {e}", flag("requests", &n.to_string())))?;
    }
    if let Some(seed) = args.seed {
        spec.seed = seed;
    }
    if let Some(rate) = args.rate {
        spec.arrivals.set_mean_rate(rate);
        spec.validate()
            .map_err(|e| format!("{}: {e}", flag("rate", &shortest(rate))))?;
    }
    Ok(TraceSource::Generated { spec })
}

/// `--floor SLICE=MAX` replaces that slice's floor; the other slices keep theirs.
fn floors(args: &CapacityArgs, inputs: &mut PlanInputs) -> Result<(), String> {
    let mut named: Vec<&str> = Vec::new();
    for f in &args.floor {
        let what = flag("floor", f);
        let (slice, max) = f
            .split_once('=')
            .ok_or_else(|| format!("{what}: expected SLICE=MAX, e.g. eu=2.1"))?;
        let slice = slice.trim();
        let max_bits_per_byte: f64 = max
            .trim()
            .parse()
            .map_err(|_| format!("{what}: {max:?} is not a number of bits per byte"))?;
        if !(capacity::MIN_BITS_PER_BYTE..=capacity::MAX_BITS_PER_BYTE).contains(&max_bits_per_byte)
        {
            return Err(format!(
                "{what}: expected a number of bits per byte from {} to {}, got {}",
                shortest(capacity::MIN_BITS_PER_BYTE),
                shortest(capacity::MAX_BITS_PER_BYTE),
                shortest(max_bits_per_byte)
            ));
        }
        if named.contains(&slice) {
            return Err(format!("{what}: slice {slice:?} has a floor already"));
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
            return Err(format!(
                "{what}: the quality profile measures no slice {slice:?}; it measures {measured}"
            ));
        };
        floor.max_bits_per_byte = max_bits_per_byte;
    }
    Ok(())
}

/// Sweeps of more simulated requests than this announce themselves on standard error
/// (about 5 s at 1 µs each); progress lines follow every 2 s once a sweep has run 2 s.
const ANNOUNCE_WORK: u64 = 5_000_000;
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// One line on standard error, beside the plan.
fn note(line: &str) {
    crate::output::note(&format!("capacity: {line}"));
}

pub fn run(args: &CapacityArgs) -> Result<String, String> {
    check_save_path(args)?;
    let inputs = inputs(args)?;
    let requests = match &inputs.trace {
        TraceSource::Generated { spec } => spec.requests,
        TraceSource::Recorded { trace, .. } => trace.requests.len() as u64,
    };
    let s = &inputs.sweep;
    let points = (s.load_scales.len()
        * s.batchings.len()
        * s.max_sequences.len()
        * s.weights.len()
        * s.fleet.fleets().len()) as u64;
    let work = points.saturating_mul(requests);
    if work > ANNOUNCE_WORK && work <= capacity::MAX_PLAN_WORK {
        note(&format!(
            "simulating {points} configurations of {requests} requests, {work} simulated requests: about {} s in a release build at about 1 µs each",
            work.div_ceil(1_000_000)
        ));
    }
    let start = Instant::now();
    let mut last_note = start;
    let mut progress = |done: usize, total: usize| {
        let now = Instant::now();
        if now.duration_since(last_note) < PROGRESS_EVERY {
            return;
        }
        last_note = now;
        let elapsed = now.duration_since(start).as_secs_f64();
        let left = elapsed / done.max(1) as f64 * total.saturating_sub(done) as f64;
        note(&format!(
            "{done} of {total} configurations simulated in {elapsed:.0} s, about {left:.0} s left"
        ));
    };
    let report = Plan::run_with_progress(&inputs, &mut progress).map_err(|e| {
        use capacity::CapacityError::*;
        match e {
            TooMuchWork { .. } => format!(
                "{e}; lower --requests, use a shorter trace, or sweep fewer --load-scales, --policy, --batch-limits, --weights, --replicas or --router"
            ),
            // What the trace itself holds: named by the flag that gave it.
            BadRequest { .. }
            | RequestTooLong { .. }
            | NoArrivalRate { .. }
            | RateTooHigh { .. }
            | UngatedSlice { .. } => format!("{}: {e}", flag("trace", &args.trace)),
            e => e.to_string(),
        }
    })?;
    if let Some(path) = &args.save_known_good {
        if report.decision.kind == capacity::DecisionKind::Release {
            let known = NamedPolicy {
                name: format!("known-good: {}", report.decision.name),
                policy: report.decision.policy.clone(),
                fleet: report.decision.fleet,
            };
            let text = serde_json::to_string_pretty(&known).map_err(|e| e.to_string())?;
            files::write(
                &Named::new("--save-known-good", path),
                (text + "\n").as_bytes(),
            )?;
        }
    }
    Ok(if args.json || args.report == ReportFormat::Json {
        report.to_json()
    } else {
        report.to_markdown()
    })
}
