//! The capacity planner's panel as plain data: the form's text (from the URL or the inputs)
//! becomes [`capacity::PlanInputs`], [`capacity::Plan::run`] sweeps and decides, and the
//! report becomes the rows that the sweep chart, its table mirror and the four report
//! sections all read. Errors are sentences naming the value (the crate's own `Display`).
//!
//! URL keys (each optional; a malformed value keeps the default and is named in a message):
//! `cap_hw` hardware preset, `cap_model` model preset, `cap_weights` (`both`, `full` or
//! `int8`), `cap_trace` trace preset (`poisson`, `bursty`, `diurnal`), `cap_n` requests,
//! `cap_rate` arrival rate (requests/s), `cap_batching` (a comma list of `static`,
//! `continuous`, `chunked`), `cap_chunk` chunked prefill's token budget, `cap_seqs` batch
//! limits (comma list), `cap_loads` load scales (comma list), `cap_ttft` p99 TTFT SLO (ms),
//! `cap_tpot` p99 time-per-output-token SLO (ms), `cap_floor` quality floor (% above each
//! slice's full-precision bits per byte).
//!
//! The lab simulates in the page's thread, so a plan is bounded: at most [`MAX_REQUESTS`]
//! requests and [`MAX_WORK`] simulated requests over the whole sweep. The default plan, 120
//! configurations of 2,000 requests, takes about 150 ms natively in release and 210 ms as
//! WebAssembly in Node 20 (median of 5 on the 2-vCPU EPYC); the limit, about 0.7 s and 0.9 s.

use capacity::{
    Arrivals, Batching, Calibration, DecisionKind, HardwareProfile, ModelProfile, NamedPolicy,
    Plan, PlanInputs, PlanReport, QualityProfile, Slo, Sweep, SweepRow, TraceSource, TraceSpec,
    WeightPath,
};

/// Most requests one trace of the panel may hold.
pub const MAX_REQUESTS: u64 = 20_000;
/// Most simulated requests in one plan (configurations × requests): about 0.7 s natively.
pub const MAX_WORK: u64 = 1_000_000;
/// Most entries in a comma list (batch limits, load scales).
const MAX_LIST: usize = 8;

/// The form, as the text the learner typed or the URL held.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityForm {
    pub hardware: String,
    pub model: String,
    pub weights: String,
    pub trace: String,
    pub requests: String,
    pub rate: String,
    pub batchings: String,
    pub chunk_budget: String,
    pub max_sequences: String,
    pub loads: String,
    pub ttft_ms: String,
    pub tpot_ms: String,
    pub floor_pct: String,
}

/// One field: its URL key, its default text, and the check a URL value must pass.
struct FieldSpec {
    key: &'static str,
    default: &'static str,
    check: fn(&str) -> Result<(), String>,
}

const FIELDS: [FieldSpec; 13] = [
    FieldSpec {
        key: "cap_hw",
        default: "lab-cpu",
        check: |t| hardware(t).map(drop),
    },
    FieldSpec {
        key: "cap_model",
        default: "decode-lab-tiny-v1",
        check: |t| model(t).map(drop),
    },
    FieldSpec {
        key: "cap_weights",
        default: "both",
        check: |t| weights(t).map(drop),
    },
    FieldSpec {
        key: "cap_trace",
        default: "poisson",
        check: |t| trace(t).map(drop),
    },
    FieldSpec {
        key: "cap_n",
        default: "2000",
        check: |t| requests(t).map(drop),
    },
    FieldSpec {
        key: "cap_rate",
        default: "200",
        check: |t| positive(t, "The arrival rate (requests/s)").map(drop),
    },
    FieldSpec {
        key: "cap_batching",
        default: "static,continuous,chunked",
        check: |t| batching_names(t).map(drop),
    },
    FieldSpec {
        key: "cap_chunk",
        default: "128",
        check: |t| count(t, "The chunked-prefill token budget").map(drop),
    },
    FieldSpec {
        key: "cap_seqs",
        default: "1, 4, 16, 64",
        check: |t| sequences(t).map(drop),
    },
    FieldSpec {
        key: "cap_loads",
        default: "0.5, 1, 2, 4, 8",
        check: |t| loads(t).map(drop),
    },
    FieldSpec {
        key: "cap_ttft",
        default: "50",
        check: |t| positive(t, "The p99 TTFT SLO (ms)").map(drop),
    },
    FieldSpec {
        key: "cap_tpot",
        default: "1",
        check: |t| positive(t, "The p99 time-per-output-token SLO (ms)").map(drop),
    },
    FieldSpec {
        key: "cap_floor",
        default: "0.01",
        check: |t| non_negative(t, "The quality floor (%)").map(drop),
    },
];

/// The batching choices: the URL's name, the label in the form.
pub const BATCHINGS: [(&str, &str); 3] = [
    ("static", "Static (request-level) batching"),
    ("continuous", "Continuous batching (paged KV cache)"),
    ("chunked", "Continuous batching with chunked prefill"),
];

impl CapacityForm {
    fn from_texts(t: [String; 13]) -> CapacityForm {
        let [hardware, model, weights, trace, requests, rate, batchings, chunk_budget, max_sequences, loads, ttft_ms, tpot_ms, floor_pct] =
            t;
        CapacityForm {
            hardware,
            model,
            weights,
            trace,
            requests,
            rate,
            batchings,
            chunk_budget,
            max_sequences,
            loads,
            ttft_ms,
            tpot_ms,
            floor_pct,
        }
    }

    fn texts(&self) -> [&str; 13] {
        [
            &self.hardware,
            &self.model,
            &self.weights,
            &self.trace,
            &self.requests,
            &self.rate,
            &self.batchings,
            &self.chunk_budget,
            &self.max_sequences,
            &self.loads,
            &self.ttft_ms,
            &self.tpot_ms,
            &self.floor_pct,
        ]
    }

    /// The form from the URL's pairs: each valid value is taken; a malformed one keeps the
    /// default and gives a sentence.
    pub fn from_pairs(pairs: &[(String, String)]) -> (CapacityForm, Vec<String>) {
        let mut messages = Vec::new();
        let texts = FIELDS.map(|spec| {
            if let Some((_, text)) = pairs.iter().find(|(k, _)| k == spec.key) {
                match (spec.check)(text) {
                    Ok(()) => return text.clone(),
                    Err(why) => messages.push(format!(
                        "The link's {}: {why} Using the default, {}.",
                        spec.key, spec.default
                    )),
                }
            }
            spec.default.to_string()
        });
        (CapacityForm::from_texts(texts), messages)
    }

    /// The pairs to write to the URL: every field, trimmed.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        FIELDS
            .iter()
            .zip(self.texts())
            .map(|(spec, text)| (spec.key, text.trim().to_string()))
            .collect()
    }

    /// Whether the batching choice `name` (see [`BATCHINGS`]) is ticked.
    pub fn has_batching(&self, name: &str) -> bool {
        self.batchings
            .split(',')
            .any(|b| b.trim().eq_ignore_ascii_case(name))
    }

    /// The batchings list with `name` ticked or not, in [`BATCHINGS`]' order.
    pub fn with_batching(&self, name: &str, on: bool) -> String {
        BATCHINGS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| if *n == name { on } else { self.has_batching(n) })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The plan's inputs, or one sentence per bad field. `last_known_good` is the plan to
    /// degrade to before the baseline.
    pub fn inputs(&self, last_known_good: Option<NamedPolicy>) -> Result<PlanInputs, Vec<String>> {
        let mut errors = Vec::new();
        let hw = keep(&mut errors, hardware(&self.hardware));
        let model = keep(&mut errors, model(&self.model));
        let weights = keep(&mut errors, weights(&self.weights));
        let spec = keep(&mut errors, trace(&self.trace));
        let requests = keep(&mut errors, requests(&self.requests));
        let rate = keep(
            &mut errors,
            positive(&self.rate, "The arrival rate (requests/s)"),
        );
        let batching_names = keep(&mut errors, batching_names(&self.batchings));
        let chunk = keep(
            &mut errors,
            count(&self.chunk_budget, "The chunked-prefill token budget"),
        );
        let seqs = keep(&mut errors, sequences(&self.max_sequences));
        let loads = keep(&mut errors, loads(&self.loads));
        let ttft = keep(
            &mut errors,
            positive(&self.ttft_ms, "The p99 TTFT SLO (ms)"),
        );
        let tpot = keep(
            &mut errors,
            positive(&self.tpot_ms, "The p99 time-per-output-token SLO (ms)"),
        );
        let floor = keep(
            &mut errors,
            non_negative(&self.floor_pct, "The quality floor (%)"),
        );
        let (
            Some(hw),
            Some(model),
            Some(weights),
            Some(mut spec),
            Some(requests),
            Some(rate),
            Some(batching_names),
            Some(chunk),
            Some(seqs),
            Some(loads),
            Some(ttft),
            Some(tpot),
            Some(floor),
        ) = (
            hw,
            model,
            weights,
            spec,
            requests,
            rate,
            batching_names,
            chunk,
            seqs,
            loads,
            ttft,
            tpot,
            floor,
        )
        else {
            return Err(errors);
        };
        let batchings: Vec<Batching> = batching_names
            .iter()
            .map(|name| match *name {
                "static" => Batching::Static,
                "continuous" => Batching::Continuous,
                _ => Batching::ChunkedPrefill {
                    token_budget: chunk,
                },
            })
            .collect();
        let points = (loads.len() * batchings.len() * seqs.len() * weights.len()) as u64;
        if points * requests > MAX_WORK {
            return Err(vec![format!(
                "The sweep would simulate {points} configurations of {requests} requests, {} requests in all; the lab stops at {} so that the page stays responsive. Lower the request count or sweep fewer settings (decode-lab's capacity command has no such limit).",
                points * requests,
                MAX_WORK
            )]);
        }
        spec.requests = requests;
        spec.arrivals.set_mean_rate(rate);
        let quality = QualityProfile::tiny();
        Ok(PlanInputs {
            calibration: Calibration::measured_for(&hw, &model),
            hardware: hw,
            model,
            quality_floors: quality.floors_within(floor / 100.0),
            quality,
            trace: TraceSource::Generated { spec },
            slo: Slo {
                ttft_p99_s: ttft / 1e3,
                tpot_p99_s: tpot / 1e3,
            },
            sweep: Sweep {
                load_scales: loads,
                batchings,
                max_sequences: seqs,
                weights,
                block_size: 16,
            },
            baseline: NamedPolicy::baseline(),
            last_known_good,
        })
    }
}

impl Default for CapacityForm {
    fn default() -> CapacityForm {
        CapacityForm::from_texts(FIELDS.map(|f| f.default.to_string()))
    }
}

fn keep<T>(errors: &mut Vec<String>, result: Result<T, String>) -> Option<T> {
    result.map_err(|e| errors.push(e)).ok()
}

fn hardware(text: &str) -> Result<HardwareProfile, String> {
    HardwareProfile::preset(text.trim()).map_err(|e| sentence(&e.to_string()))
}

fn model(text: &str) -> Result<ModelProfile, String> {
    ModelProfile::preset(text.trim()).map_err(|e| sentence(&e.to_string()))
}

fn trace(text: &str) -> Result<TraceSpec, String> {
    TraceSpec::preset(text.trim()).map_err(|e| sentence(&e.to_string()))
}

fn weights(text: &str) -> Result<Vec<WeightPath>, String> {
    match text.trim() {
        "both" => Ok(vec![WeightPath::Full, WeightPath::Int8]),
        other => other
            .parse()
            .map(|w| vec![w])
            .map_err(|_| format!("The weight path \"{other}\" is not both, full or int8.")),
    }
}

fn requests(text: &str) -> Result<u64, String> {
    let t = text.trim();
    match t.replace('_', "").parse::<u64>() {
        Ok(n) if (1..=MAX_REQUESTS).contains(&n) => Ok(n),
        _ => Err(format!(
            "The request count \"{t}\" is not a whole number from 1 to {MAX_REQUESTS}."
        )),
    }
}

fn count(text: &str, what: &str) -> Result<u32, String> {
    let t = text.trim();
    match t.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{what} \"{t}\" is not a whole number of at least 1."
        )),
    }
}

fn number(text: &str, what: &str, ok: fn(f64) -> bool, expected: &str) -> Result<f64, String> {
    let t = text.trim();
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() && ok(x) => Ok(x),
        _ => Err(format!("{what} \"{t}\" is not {expected}.")),
    }
}

fn positive(text: &str, what: &str) -> Result<f64, String> {
    number(text, what, |x| x > 0.0, "a number above 0")
}

fn non_negative(text: &str, what: &str) -> Result<f64, String> {
    number(text, what, |x| x >= 0.0, "a number at or above 0")
}

fn list<T>(
    text: &str,
    what: &str,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let items: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() || items.len() > MAX_LIST {
        return Err(format!(
            "{what} \"{}\" needs 1 to {MAX_LIST} comma-separated values.",
            text.trim()
        ));
    }
    items.into_iter().map(item).collect()
}

fn sequences(text: &str) -> Result<Vec<u32>, String> {
    list(text, "The batch limits", |t| {
        count(t, "The batch limit (sequences)")
    })
}

fn loads(text: &str) -> Result<Vec<f64>, String> {
    list(text, "The load scales", |t| positive(t, "The load scale"))
}

fn batching_names(text: &str) -> Result<Vec<&'static str>, String> {
    let mut names = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match BATCHINGS.iter().find(|(n, _)| n.eq_ignore_ascii_case(item)) {
            Some((n, _)) if !names.contains(n) => names.push(*n),
            Some(_) => {}
            None => {
                return Err(format!(
                    "The batching \"{item}\" is not static, continuous or chunked."
                ))
            }
        }
    }
    if names.is_empty() {
        return Err("Choose at least one batching to sweep.".into());
    }
    Ok(names)
}

/// The crate's message as a sentence: a capital first letter and a full stop.
pub fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// Four significant figures, plain for everyday magnitudes: the report's own formatter.
pub use capacity::figure;

/// [`figure`] without trailing zeros: "50", "0.5", for axis labels and SLOs.
pub fn short(x: f64) -> String {
    let text = figure(x);
    if text.contains('.') && !text.contains('e') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A share as a percentage with one decimal.
pub fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// One point of the sweep as the chart and its table both read it.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    pub row: SweepRow,
    /// The released configuration (never set when the plan degrades).
    pub chosen: bool,
    /// Position in the chart, in its viewBox units; `None` for a point that could not run.
    pub at: Option<(f64, f64)>,
    /// "all gates pass", the failed gates, or why the point could not run.
    pub gates: String,
}

/// The chart's frame: a log-scale x (p99 TTFT) and a linear y (tokens/s).
#[derive(Clone, Debug, PartialEq)]
pub struct ChartFrame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    /// x positions and labels of the decade ticks (seconds).
    pub x_ticks: Vec<(f64, String)>,
    /// y positions and labels of the ticks (tokens/s).
    pub y_ticks: Vec<(f64, String)>,
    /// x of the TTFT SLO.
    pub slo_x: f64,
}

/// What a plan shows.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanView {
    pub report: PlanReport,
    pub points: Vec<SweepPoint>,
    pub frame: ChartFrame,
    /// The released configuration at every load, in load order: its throughput-latency
    /// curve (empty when the plan degrades).
    pub curve: Vec<(f64, f64)>,
    /// `release`, `degrade-to-last-known-good` or `degrade-to-baseline`.
    pub kind: &'static str,
}

pub const CHART_WIDTH: f64 = 560.0;
pub const CHART_HEIGHT: f64 = 300.0;

/// Runs the plan the form describes.
pub fn plan(
    form: &CapacityForm,
    last_known_good: Option<NamedPolicy>,
) -> Result<PlanView, Vec<String>> {
    let inputs = form.inputs(last_known_good)?;
    let report = Plan::run(&inputs)
        .map_err(|e| vec![format!("The plan cannot run: {}", sentence(&e.to_string()))])?;
    Ok(view(report))
}

/// The chart's rows and frame from a report; the same rows make the table.
pub fn view(report: PlanReport) -> PlanView {
    let (left, right, top, bottom) = (64.0, 16.0, 12.0, 44.0);
    let runs = || report.sweep.iter().filter(|r| r.error.is_none());
    let slo = report.contract.slo.ttft_p99_s;
    // The x range covers every point and the SLO, in whole decades.
    let positive_ttft = runs().map(|r| r.ttft_p99_s).filter(|t| *t > 0.0);
    let lo = positive_ttft.clone().fold(slo, f64::min).log10().floor();
    let hi = positive_ttft
        .fold(slo, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let y_max = nice_ceiling(runs().map(|r| r.output_tokens_per_s).fold(0.0, f64::max));
    let plot_w = CHART_WIDTH - left - right;
    let plot_h = CHART_HEIGHT - top - bottom;
    let x_of = |t: f64| {
        let decade = t.max(10f64.powf(lo)).log10();
        left + (decade - lo) / (hi - lo) * plot_w
    };
    let y_of = |v: f64| top + plot_h - v / y_max * plot_h;
    let released = report.decision.kind == DecisionKind::Release;
    let points: Vec<SweepPoint> = report
        .sweep
        .iter()
        .map(|row| SweepPoint {
            chosen: released
                && row.error.is_none()
                && row.policy == report.decision.policy
                && row.load_scale == report.decision.load_scale,
            at: row
                .error
                .is_none()
                .then(|| (x_of(row.ttft_p99_s), y_of(row.output_tokens_per_s))),
            gates: match &row.error {
                Some(e) => format!("cannot run: {e}"),
                None if row.passes_gates => "all gates pass".into(),
                None => format!("fails: {}", row.failed_gates),
            },
            row: row.clone(),
        })
        .collect();
    let x_ticks = (lo as i32..=hi as i32)
        .map(|d| {
            let t = 10f64.powi(d);
            (x_of(t), seconds(t))
        })
        .collect();
    let y_ticks = (0..=4)
        .map(|i| {
            let v = y_max * i as f64 / 4.0;
            (y_of(v), short(v))
        })
        .collect();
    let mut curve: Vec<(f64, f64, f64)> = points
        .iter()
        .filter(|p| released && p.row.policy == report.decision.policy)
        .filter_map(|p| p.at.map(|(x, y)| (p.row.load_scale, x, y)))
        .collect();
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    PlanView {
        curve: curve.into_iter().map(|(_, x, y)| (x, y)).collect(),
        kind: report.decision.kind.name(),
        frame: ChartFrame {
            width: CHART_WIDTH,
            height: CHART_HEIGHT,
            left,
            right,
            top,
            bottom,
            x_ticks,
            y_ticks,
            slo_x: x_of(slo),
        },
        points,
        report,
    }
}

/// 1, 2 or 5 times a power of ten, at or above `x` (1 for nothing).
fn nice_ceiling(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || !x.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|v| *v >= x)
        .unwrap_or(10.0 * p)
}

/// A time in the unit that reads best: "1 ms", "10 s", "100 µs".
pub fn seconds(t: f64) -> String {
    if t >= 1.0 {
        format!("{} s", short(t))
    } else if t >= 1e-3 {
        format!("{} ms", short(t * 1e3))
    } else {
        format!("{} µs", short(t * 1e6))
    }
}

/// The decision in words: the verdict, then the crate's reason, then each failed gate.
pub fn decision_words(report: &PlanReport) -> (String, String, Vec<String>) {
    let d = &report.decision;
    let verdict = match d.kind {
        DecisionKind::Release => format!("Release: {}.", d.name),
        DecisionKind::DegradeToLastKnownGood => format!(
            "Degrade to the last known-good plan: {} ({}).",
            d.name,
            d.policy.label()
        ),
        DecisionKind::DegradeToBaseline => format!(
            "Degrade to the named baseline: {} ({}).",
            d.name,
            d.policy.label()
        ),
    };
    let failed = d.failed_gates.iter().map(ToString::to_string).collect();
    (verdict, sentence(&d.reason), failed)
}

/// The benchmark contract as (input, value) rows.
pub fn contract_rows(report: &PlanReport) -> Vec<(String, String)> {
    let c = &report.contract;
    let h = &c.hardware;
    let m = &c.model;
    let mut rows = vec![
        (
            "hardware".to_string(),
            format!(
                "{}: {} GiB, {} GB/s × {} efficiency, {} TFLOP/s × {} efficiency, {} per hour{}",
                h.name,
                figure(h.memory_bytes / (1u64 << 30) as f64),
                figure(h.bandwidth_bytes_per_s / 1e9),
                figure(h.bandwidth_efficiency),
                figure(h.peak_flops / 1e12),
                figure(h.flops_efficiency),
                figure(h.cost_per_hour),
                if c.calibration.is_some() {
                    " (calibrated to the lab CPU's measured forward pass)"
                } else {
                    ""
                }
            ),
        ),
        (
            "model".to_string(),
            format!(
                "{}: {} parameters, {} layers, {} heads, {} KV heads, context {}, full precision {}",
                m.name,
                figure(m.parameters),
                m.layers,
                m.heads,
                m.kv_heads,
                m.context_len,
                m.full_precision
            ),
        ),
        (
            "trace".to_string(),
            format!(
                "{}{}: {} requests at {} requests/s, mean prompt {} tokens, mean output {} tokens",
                c.trace_name,
                c.trace_seed.map_or(String::new(), |s| format!(" (seed {s})")),
                c.requests,
                figure(c.offered_rate_per_s),
                figure(c.mean_prompt_tokens),
                figure(c.mean_output_tokens)
            ),
        ),
    ];
    for s in &c.slices {
        rows.push((
            format!("slice {}", s.slice),
            format!(
                "{} requests ({}), mean prompt {} tokens",
                s.requests,
                percent(s.requests as f64 / c.requests.max(1) as f64),
                figure(s.mean_prompt_tokens)
            ),
        ));
    }
    rows.push((
        "SLOs".to_string(),
        format!(
            "p99 TTFT ≤ {}, p99 time per output token ≤ {}, on all traffic and on every slice",
            seconds(c.slo.ttft_p99_s),
            seconds(c.slo.tpot_p99_s)
        ),
    ));
    for f in &c.quality_floors {
        rows.push((
            format!("quality floor {}", f.slice),
            format!("≤ {} bits/byte", figure(f.max_bits_per_byte)),
        ));
    }
    rows.push((
        "sweep".to_string(),
        format!(
            "load scales {:?} × {}",
            c.sweep.load_scales,
            c.sweep.configurations()
        ),
    ));
    rows
}

/// Where the shipped configuration's time went: (what, share) rows.
pub fn bottleneck_rows(report: &PlanReport) -> Vec<(&'static str, f64)> {
    let b = &report.chosen.metrics.bottleneck;
    vec![
        ("compute-bound iterations", b.compute_share),
        ("memory-bound iterations", b.memory_share),
        ("per-iteration overhead", b.overhead_share),
        ("idle", b.idle_share),
        ("queueing, of request latency", b.queueing_share_of_latency),
    ]
}

/// The hardware presets as (value, text) options.
pub fn hardware_options() -> Vec<(String, String)> {
    HardwareProfile::presets()
        .into_iter()
        .map(|h| {
            let text = format!(
                "{} ({} GiB, {} per hour)",
                h.name,
                short(h.memory_bytes / (1u64 << 30) as f64),
                short(h.cost_per_hour)
            );
            (h.name, text)
        })
        .collect()
}

/// The model presets as (value, text) options.
pub fn model_options() -> Vec<(String, String)> {
    ModelProfile::presets()
        .into_iter()
        .map(|m| {
            let text = format!(
                "{} ({} parameters, {} weights)",
                m.name,
                short(m.parameters),
                m.full_precision
            );
            (m.name, text)
        })
        .collect()
}

/// The trace presets as (value, text) options.
pub fn trace_options() -> Vec<(String, String)> {
    TraceSpec::presets()
        .into_iter()
        .map(|t| {
            let text = match t.arrivals {
                Arrivals::Poisson { .. } => "poisson (steady arrivals)",
                Arrivals::Bursty { .. } => "bursty (bursts of 8x the calm rate)",
                Arrivals::Diurnal { .. } => "diurnal (±60 % over a 10-minute day)",
            };
            (t.name, text.to_string())
        })
        .collect()
}

/// The weight-path choices as (value, text) options.
pub fn weight_options() -> Vec<(String, String)> {
    [
        ("both", "Both: full precision and int8"),
        (
            "full",
            "Full precision only (f16, or f32 for the tiny model)",
        ),
        ("int8", "Int8 only"),
    ]
    .map(|(v, t)| (v.to_string(), t.to_string()))
    .to_vec()
}

/// What a later plan may degrade to: the configuration this one released, if it did.
pub fn known_good(report: &PlanReport) -> Option<NamedPolicy> {
    (report.decision.kind == DecisionKind::Release).then(|| NamedPolicy {
        name: format!("last known-good: {}", report.decision.policy.label()),
        policy: report.decision.policy.clone(),
    })
}

/// A download of the report: (file name, MIME type, text), as Markdown or as JSON.
pub fn report_file(report: &PlanReport, markdown: bool) -> (String, &'static str, String) {
    if markdown {
        (
            file_name(report, "md"),
            "text/markdown",
            report.to_markdown(),
        )
    } else {
        (
            file_name(report, "json"),
            "application/json",
            report.to_json(),
        )
    }
}

/// The report's file name: `capacity-plan-<model>-<hardware>.<extension>`, names made safe.
pub fn file_name(report: &PlanReport, extension: &str) -> String {
    let slug = |name: &str| {
        name.split(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '.')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    };
    format!(
        "capacity-plan-{}-{}.{extension}",
        slug(&report.contract.model.name),
        slug(&report.contract.hardware.name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn small() -> CapacityForm {
        CapacityForm {
            requests: "300".into(),
            ..CapacityForm::default()
        }
    }

    #[test]
    fn the_default_form_plans_and_the_chart_and_table_share_their_rows() {
        let view = plan(&small(), None).unwrap();
        assert_eq!(view.points.len(), view.report.sweep.len());
        assert_eq!(view.points.len(), 5 * 3 * 4 * 2);
        for (p, r) in view.points.iter().zip(&view.report.sweep) {
            assert_eq!(&p.row, r);
            let (x, y) = p.at.unwrap();
            let f = &view.frame;
            assert!(x >= f.left - 1e-9 && x <= f.width - f.right + 1e-9, "{x}");
            assert!(y >= f.top - 1e-9 && y <= f.height - f.bottom + 1e-9, "{y}");
        }
        assert_eq!(
            view.report.decision.kind,
            DecisionKind::Release,
            "{}",
            view.report.decision.reason
        );
        assert_eq!(view.points.iter().filter(|p| p.chosen).count(), 1);
        assert_eq!(view.kind, "release");
        assert_eq!(
            view.curve.len(),
            5,
            "the released configuration at each load"
        );
        assert!(
            view.curve.windows(2).all(|w| w[0].1 >= w[1].1),
            "{:?}",
            view.curve
        );
        assert!(known_good(&view.report).is_some());
        let (name, mime, text) = report_file(&view.report, false);
        assert!(name.ends_with(".json") && mime == "application/json");
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
        assert_eq!(hardware_options().len(), 5);
        assert_eq!(trace_options().len(), 3);
        assert!(model_options()
            .iter()
            .any(|(v, _)| v == "decode-lab-tiny-v1"));
        let (verdict, reason, failed) = decision_words(&view.report);
        assert!(verdict.starts_with("Release: "), "{verdict}");
        assert!(reason.ends_with('.') && failed.is_empty(), "{reason}");
        let contract = contract_rows(&view.report);
        assert!(
            contract.iter().any(|(k, _)| k == "slice eu"),
            "{contract:?}"
        );
        let shares: f64 = bottleneck_rows(&view.report)[..4].iter().map(|r| r.1).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{shares}");
        assert!(view.report.to_markdown().contains("## 3. Quality gates"));
        assert_eq!(
            file_name(&view.report, "md"),
            "capacity-plan-decode-lab-tiny-v1-lab-cpu-calibrated.md"
        );
    }

    #[test]
    fn the_default_form_is_the_crates_tiny_lab_plan_at_2000_requests() {
        let mut expected = PlanInputs::tiny_lab("poisson").unwrap();
        if let TraceSource::Generated { spec } = &mut expected.trace {
            spec.requests = 2000;
        }
        assert_eq!(CapacityForm::default().inputs(None).unwrap(), expected);
    }

    #[test]
    fn an_slo_nothing_meets_degrades_to_the_baseline_or_the_last_known_good() {
        let form = CapacityForm {
            ttft_ms: "0.001".into(),
            ..small()
        };
        let view = plan(&form, None).unwrap();
        assert_eq!(view.report.decision.kind, DecisionKind::DegradeToBaseline);
        assert!(view.points.iter().all(|p| !p.chosen));
        assert!(view.curve.is_empty() && known_good(&view.report).is_none());
        assert_eq!(view.kind, "degrade-to-baseline");
        let (verdict, _, failed) = decision_words(&view.report);
        assert!(verdict.contains("named baseline"), "{verdict}");
        assert!(failed.iter().any(|g| g.contains("p99 TTFT")), "{failed:?}");
        assert!(failed.iter().any(|g| g.contains("over")), "{failed:?}");

        let known = NamedPolicy {
            name: "known-good".into(),
            policy: view.report.decision.policy.clone(),
        };
        let view = plan(&form, Some(known)).unwrap();
        assert_eq!(
            view.report.decision.kind,
            DecisionKind::DegradeToLastKnownGood
        );
    }

    #[test]
    fn url_values_round_trip_and_malformed_ones_keep_the_default() {
        let form = CapacityForm {
            hardware: "h100-sxm".into(),
            model: "llama-3-8b".into(),
            weights: "int8".into(),
            trace: "bursty".into(),
            batchings: "continuous".into(),
            max_sequences: "8, 32".into(),
            ..small()
        };
        let written = form.pairs();
        assert!(written.iter().all(|(k, _)| k.starts_with("cap_")));
        let back: Vec<(String, String)> = written
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        assert_eq!(CapacityForm::from_pairs(&back), (form, Vec::new()));

        let (read, messages) = CapacityForm::from_pairs(&pairs(&[
            ("cap_hw", "tpu"),
            ("cap_n", "lots"),
            ("cap_seqs", "4,,x"),
            ("cap_batching", "dynamic"),
            ("cap_ttft", "-3"),
            ("cap_rate", "400"),
        ]));
        assert_eq!(read.hardware, "lab-cpu");
        assert_eq!(read.requests, "2000");
        assert_eq!(read.rate, "400");
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(messages[0].contains("\"tpu\"") && messages[0].contains("a100-80gb"));
        assert!(messages[1].contains("\"lots\"") && messages[1].contains("2000"));
        assert!(messages.iter().all(|m| m.starts_with("The link's cap_")));
    }

    #[test]
    fn bad_fields_are_sentences_naming_the_value() {
        let form = CapacityForm {
            requests: "0".into(),
            loads: "1, fast".into(),
            tpot_ms: "NaN".into(),
            batchings: String::new(),
            ..CapacityForm::default()
        };
        let errors = form.inputs(None).unwrap_err();
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].contains("\"0\""), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("\"fast\"")), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("\"NaN\"")), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("at least one batching")));

        let too_much = CapacityForm {
            requests: "20000".into(),
            ..CapacityForm::default()
        };
        let e = too_much.inputs(None).unwrap_err();
        assert!(
            e[0].contains("120 configurations of 20000 requests"),
            "{e:?}"
        );
    }

    #[test]
    fn a_machine_too_small_for_the_weights_is_a_row_not_a_crash() {
        // Llama-2-13B in f16 (26 GB) does not fit the L4's 24 GiB; int8 does.
        let form = CapacityForm {
            hardware: "l4".into(),
            model: "llama-2-13b".into(),
            requests: "50".into(),
            loads: "1".into(),
            ttft_ms: "1000000".into(),
            tpot_ms: "1000000".into(),
            floor_pct: "50".into(),
            ..CapacityForm::default()
        };
        let view = plan(&form, None).unwrap();
        let full = view
            .points
            .iter()
            .find(|p| p.row.weights == "full")
            .unwrap();
        assert!(full.at.is_none() && full.gates.starts_with("cannot run: "));
        assert!(view.points.iter().any(|p| p.at.is_some() && p.chosen));

        // Nothing passes, and the full-precision baseline cannot run there: a sentence.
        let strict = CapacityForm {
            ttft_ms: "0.001".into(),
            ..form
        };
        let e = plan(&strict, None).unwrap_err();
        assert!(
            e[0].starts_with(
                "The plan cannot run: The llama-2-13b full weights need 26000000000 bytes"
            ),
            "{e:?}"
        );
    }

    #[test]
    fn one_request_is_a_sentence_and_tiny_loads_do_not_panic() {
        // One request has no arrival rate to size replicas by (the plan said "one replica
        // sustains 0 requests/s" beside a goodput of hundreds): the planner says so.
        let one = CapacityForm {
            requests: "1".into(),
            ..CapacityForm::default()
        };
        let e = plan(&one, None).unwrap_err();
        assert!(e[0].contains("no arrival rate"), "{e:?}");
        let form = CapacityForm {
            loads: "0.001".into(),
            ..CapacityForm::default()
        };
        let view = plan(&form, None).unwrap();
        assert!(view.frame.x_ticks.len() >= 2);
        assert!(view.frame.y_ticks.iter().all(|(y, _)| y.is_finite()));
    }

    #[test]
    fn batching_ticks_keep_their_order() {
        let form = CapacityForm {
            batchings: "chunked".into(),
            ..CapacityForm::default()
        };
        assert!(form.has_batching("chunked") && !form.has_batching("static"));
        assert_eq!(form.with_batching("static", true), "static,chunked");
        assert_eq!(form.with_batching("chunked", false), "");
        assert_eq!(figure(0.000_123_45), "0.0001234");
        assert_eq!(seconds(0.05), "50 ms");
        assert_eq!(seconds(2.5e-4), "250 µs");
        assert_eq!(sentence("unknown x"), "Unknown x.");
    }
}
