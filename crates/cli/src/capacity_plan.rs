//! `decode-lab capacity`: the inference capacity plan (the `capacity` crate) on the command
//! line: presets or a trace file in, the plan as Markdown or JSON out. Reading and writing
//! files happens here; the planner itself is pure.

use std::path::{Path, PathBuf};

use capacity::{
    Batching, HardwareProfile, ModelProfile, NamedPolicy, Plan, PlanInputs, QualityFloor,
    QualityProfile, Trace, TraceFormat, TraceSource, TraceSpec, WeightPath,
};
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Md,
    Json,
}

#[derive(Args)]
pub struct CapacityArgs {
    /// A trace preset (poisson, bursty, diurnal) or a trace file (.csv or .jsonl; schema in
    /// the README).
    #[arg(long, default_value = "poisson", value_name = "PRESET|FILE")]
    trace: String,
    /// Requests drawn from a trace preset.
    #[arg(long)]
    requests: Option<u64>,
    /// Seed of a trace preset.
    #[arg(long)]
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
    #[arg(long, value_name = "LIST")]
    policy: Option<String>,
    /// Batch limits (most concurrent sequences) to sweep, comma-separated.
    #[arg(long, value_name = "LIST")]
    batch_limits: Option<String>,
    /// Weight paths to sweep, comma-separated: full, int8.
    #[arg(long, value_name = "LIST")]
    weights: Option<String>,
    /// Multiples of the trace's arrival rate offered to one replica, comma-separated.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    load_scales: Option<String>,
    /// Tokens per KV-cache block.
    #[arg(long)]
    block_size: Option<u32>,
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
    /// Floors: every slice at most this share above its full-precision bits per byte.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "floor")]
    quality_tolerance: Option<f64>,
    /// A slice's floor in bits per byte, `SLICE=MAX` (repeat for several slices).
    #[arg(long, value_name = "SLICE=MAX")]
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

fn list<T>(text: &str, what: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| parse(s).ok_or_else(|| format!("{what} {s:?} is not valid")))
        .collect()
}

fn batching(text: &str) -> Option<Batching> {
    match text {
        "static" => Some(Batching::Static),
        "continuous" => Some(Batching::Continuous),
        _ => {
            let budget = text.strip_prefix("chunked:")?.parse().ok()?;
            Some(Batching::ChunkedPrefill {
                token_budget: budget,
            })
        }
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

pub fn inputs(args: &CapacityArgs) -> Result<PlanInputs, String> {
    let e = |e: capacity::CapacityError| e.to_string();
    let mut inputs = PlanInputs::tiny_lab("poisson").map_err(e)?;
    inputs.hardware = HardwareProfile::preset(&args.hardware).map_err(e)?;
    inputs.model = ModelProfile::preset(&args.model).map_err(e)?;
    if args.no_calibration || args.hardware != "lab-cpu" || args.model != "decode-lab-tiny-v1" {
        inputs.calibration = None;
    }
    let file_format = TraceFormat::from_path(&args.trace);
    inputs.trace = match file_format {
        Some(format) => {
            if args.requests.is_some() || args.seed.is_some() || args.rate.is_some() {
                return Err(
                    "--requests, --seed and --rate shape a trace preset, not a file".into(),
                );
            }
            let trace = Trace::parse(&read(Path::new(&args.trace))?, format)
                .map_err(|err| format!("{}: {err}", args.trace))?;
            TraceSource::Recorded {
                name: args.trace.clone(),
                trace,
            }
        }
        None => {
            let mut spec = TraceSpec::preset(&args.trace)
                .map_err(|err| format!("{err} (or give a trace file ending in .csv or .jsonl)"))?;
            if let Some(n) = args.requests {
                spec.requests = n;
            }
            if let Some(seed) = args.seed {
                spec.seed = seed;
            }
            if let Some(rate) = args.rate {
                match &mut spec.arrivals {
                    capacity::Arrivals::Poisson { rate_per_s }
                    | capacity::Arrivals::Bursty { rate_per_s, .. }
                    | capacity::Arrivals::Diurnal { rate_per_s, .. } => *rate_per_s = rate,
                }
            }
            TraceSource::Generated { spec }
        }
    };
    if let Some(text) = &args.policy {
        inputs.sweep.batchings = list(text, "policy", batching)?;
    }
    if let Some(text) = &args.batch_limits {
        inputs.sweep.max_sequences = list(text, "batch limit", |s| s.parse().ok())?;
    }
    if let Some(text) = &args.weights {
        inputs.sweep.weights = list(text, "weight path", |s| match s {
            "full" => Some(WeightPath::Full),
            "int8" => Some(WeightPath::Int8),
            _ => None,
        })?;
    }
    if let Some(text) = &args.load_scales {
        inputs.sweep.load_scales = list(text, "load scale", |s| s.parse().ok())?;
    }
    if let Some(size) = args.block_size {
        inputs.sweep.block_size = size;
        inputs.baseline.policy.block_size = size;
    }
    if let Some(slo) = args.slo_ttft_p99 {
        inputs.slo.ttft_p99_s = slo;
    }
    if let Some(slo) = args.slo_tpot_p99 {
        inputs.slo.tpot_p99_s = slo;
    }
    if let Some(path) = &args.quality {
        inputs.quality = QualityProfile::from_eval_json(&read(path)?, "f32")
            .map_err(|err| format!("{}: {err}", path.display()))?;
        inputs.quality_floors = inputs.quality.floors_within(1e-4);
    }
    if let Some(tolerance) = args.quality_tolerance {
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(format!(
                "quality tolerance {tolerance} is not a share at or above 0"
            ));
        }
        inputs.quality_floors = inputs.quality.floors_within(tolerance);
    }
    if !args.floor.is_empty() {
        inputs.quality_floors = args
            .floor
            .iter()
            .map(|f| {
                let (slice, max) = f
                    .split_once('=')
                    .ok_or_else(|| format!("floor {f:?} is not SLICE=MAX"))?;
                let max_bits_per_byte = max
                    .trim()
                    .parse()
                    .map_err(|_| format!("floor {f:?}: {max:?} is not a number"))?;
                Ok(QualityFloor {
                    slice: slice.trim().into(),
                    max_bits_per_byte,
                })
            })
            .collect::<Result<_, String>>()?;
    }
    if let Some(path) = &args.last_known_good {
        let known: NamedPolicy = serde_json::from_str(&read(path)?).map_err(|err| {
            format!(
                "{} is not a known-good plan (written by --save-known-good): {err}",
                path.display()
            )
        })?;
        inputs.last_known_good = Some(known);
    }
    Ok(inputs)
}

pub fn run(args: &CapacityArgs) -> Result<String, String> {
    let inputs = inputs(args)?;
    let report = Plan::run(&inputs).map_err(|e| e.to_string())?;
    if let Some(path) = &args.save_known_good {
        if report.decision.kind == capacity::DecisionKind::Release {
            let known = NamedPolicy {
                name: format!("known-good: {}", report.decision.policy.label()),
                policy: report.decision.policy.clone(),
            };
            let text = serde_json::to_string_pretty(&known).map_err(|e| e.to_string())?;
            std::fs::write(path, text + "\n")
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(if args.json || args.report == ReportFormat::Json {
        report.to_json()
    } else {
        report.to_markdown()
    })
}
