//! The capacity planner's panel as plain data: the form's text (from the URL or the inputs)
//! checks into [`capacity::PlanInputs`] or into every field's problem,
//! [`capacity::Plan::run`] sweeps and decides, and the report becomes the rows that the
//! sweep chart, its table mirror and the four report sections all read.
//!
//! URL keys (each optional; a value that does not read stays in its field and is reported
//! there, and a name a select does not offer is reported at the select, which keeps its
//! default): `cap_hw` hardware preset, `cap_model` model preset, `cap_weights` (`both`,
//! `full` or `int8`), `cap_trace` trace preset (`poisson`, `bursty`, `diurnal`), `cap_n`
//! requests, `cap_rate` arrival rate (requests/s), `cap_batching` (a comma list of `static`,
//! `continuous`, `chunked`), `cap_chunk` chunked prefill's token budget, `cap_seqs` batch
//! limits (comma list), `cap_loads` load scales (comma list), `cap_ttft` p99 TTFT SLO (ms),
//! `cap_tpot` p99 time-per-output-token SLO (ms), `cap_floor` quality floor (% above each
//! slice's full-precision bits per byte).
//!
//! The bounds of rates, load scales and SLOs are the `capacity` crate's, which the check
//! calls. The lab simulates in the page's thread, so it bounds a plan itself: at most
//! [`MAX_REQUESTS`] requests and [`MAX_WORK`] simulated requests over the whole sweep. The
//! default plan, 120 configurations of 2,000 requests, takes about 150 ms natively in
//! release and 210 ms as WebAssembly in Node 20 (median of 5 on the 2-vCPU EPYC); the
//! limit, about 0.7 s and 0.9 s.

use std::ops::Bound;

use capacity::{
    Arrivals, Batching, Calibration, CapacityError, DecisionKind, HardwareProfile, ModelProfile,
    NamedPolicy, Plan, PlanInputs, PlanReport, QualityProfile, Slo, Sweep, SweepRow, TraceSource,
    TraceSpec, WeightPath, MAX_LOAD_SCALE, MAX_RATE_PER_S, MIN_LOAD_SCALE, MIN_RATE_PER_S,
    MIN_SLO_S,
};

use crate::widgets::form::{pairs_from_texts, texts_from_pairs, Form, Problems};
use crate::widgets::number::{number_in, sentence, whole_in};

/// Most requests one trace of the panel may hold.
pub const MAX_REQUESTS: u64 = 20_000;
/// Most simulated requests in one plan (configurations × requests): about 0.7 s natively.
pub const MAX_WORK: u64 = 1_000_000;
/// Most entries in a comma list (batch limits, load scales).
const MAX_LIST: usize = 8;

/// The id of the Plan button: where a problem the plan found, and no one field owns, points.
pub const PLAN_ID: &str = "cap-plan";

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

/// One field: its URL key, its input's id, its name in messages and its default text.
struct FieldSpec {
    key: &'static str,
    id: &'static str,
    name: &'static str,
    default: &'static str,
}

/// The form's fields, by name.
mod field {
    use super::FieldSpec;
    pub const HARDWARE: FieldSpec = FieldSpec {
        key: "cap_hw",
        id: "cap-hw",
        name: "hardware",
        default: "lab-cpu",
    };
    pub const MODEL: FieldSpec = FieldSpec {
        key: "cap_model",
        id: "cap-model",
        name: "model",
        default: "decode-lab-tiny-v1",
    };
    pub const WEIGHTS: FieldSpec = FieldSpec {
        key: "cap_weights",
        id: "cap-weights",
        name: "weight paths",
        default: "both",
    };
    pub const TRACE: FieldSpec = FieldSpec {
        key: "cap_trace",
        id: "cap-trace",
        name: "trace",
        default: "poisson",
    };
    pub const REQUESTS: FieldSpec = FieldSpec {
        key: "cap_n",
        id: "cap-n",
        name: "Requests in the trace",
        default: "2000",
    };
    pub const RATE: FieldSpec = FieldSpec {
        key: "cap_rate",
        id: "cap-rate",
        name: "Arrival rate (requests/s)",
        default: "200",
    };
    pub const BATCHINGS: FieldSpec = FieldSpec {
        key: "cap_batching",
        id: "cap-batchings",
        name: "batching",
        default: "static,continuous,chunked",
    };
    pub const CHUNK: FieldSpec = FieldSpec {
        key: "cap_chunk",
        id: "cap-chunk",
        name: "Chunked prefill's tokens per iteration",
        default: "128",
    };
    pub const SEQUENCES: FieldSpec = FieldSpec {
        key: "cap_seqs",
        id: "cap-seqs",
        name: "Batch limits",
        default: "1, 4, 16, 64",
    };
    pub const LOADS: FieldSpec = FieldSpec {
        key: "cap_loads",
        id: "cap-loads",
        name: "Load scales",
        default: "0.5, 1, 2, 4, 8",
    };
    pub const TTFT: FieldSpec = FieldSpec {
        key: "cap_ttft",
        id: "cap-ttft",
        name: "SLO: p99 time to first token (ms)",
        default: "50",
    };
    pub const TPOT: FieldSpec = FieldSpec {
        key: "cap_tpot",
        id: "cap-tpot",
        name: "SLO: p99 time per output token (ms)",
        default: "1",
    };
    pub const FLOOR: FieldSpec = FieldSpec {
        key: "cap_floor",
        id: "cap-floor",
        name: "Quality floor (%)",
        default: "0.01",
    };
}

/// In the order of [`CapacityForm::texts`].
const FIELDS: [FieldSpec; 13] = [
    field::HARDWARE,
    field::MODEL,
    field::WEIGHTS,
    field::TRACE,
    field::REQUESTS,
    field::RATE,
    field::BATCHINGS,
    field::CHUNK,
    field::SEQUENCES,
    field::LOADS,
    field::TTFT,
    field::TPOT,
    field::FLOOR,
];

/// The batching choices: the URL's name, the label in the form. `static` and `continuous`
/// are the crate's own names ([`Batching`]'s `Display`); `chunked` is chunked prefill at the
/// form's own token budget, which the crate writes `chunked:BUDGET`.
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
}

impl Form for CapacityForm {
    type Checked = PlanInputs;

    /// The form a URL's pairs ask for: each key's text goes into its field as it is, for the
    /// check to report at the field if it does not read. The selects and the batching boxes
    /// hold only the names they offer, so another name is a problem of that field, which
    /// keeps its default.
    fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (CapacityForm, Problems) {
        let defaults = FIELDS.map(|f| f.default.to_string());
        let mut form =
            CapacityForm::from_texts(texts_from_pairs(FIELDS.map(|f| f.key), defaults, pairs));
        let mut problems = Problems::default();
        for (text, spec, options) in [
            (&mut form.hardware, &field::HARDWARE, hardware_options()),
            (&mut form.model, &field::MODEL, model_options()),
            (&mut form.weights, &field::WEIGHTS, weight_options()),
            (&mut form.trace, &field::TRACE, trace_options()),
        ] {
            let names: Vec<&str> = options.iter().map(|(v, _)| v.as_str()).collect();
            let asked = text.trim().to_string();
            *text = if names.contains(&asked.as_str()) {
                asked
            } else {
                problems.add(spec.id, not_offered(spec, &asked, &names));
                spec.default.to_string()
            };
        }
        let offered = BATCHINGS.map(|(name, _)| name);
        let unknown = form
            .batchings
            .split(',')
            .map(str::trim)
            .find(|b| !b.is_empty() && !offered.iter().any(|n| n.eq_ignore_ascii_case(b)));
        if let Some(unknown) = unknown {
            let spec = &field::BATCHINGS;
            problems.add(spec.id, not_offered(spec, unknown, &offered));
            form.batchings = spec.default.to_string();
        }
        (form, problems)
    }

    /// The pairs to write to the URL, every field trimmed.
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        pairs_from_texts(FIELDS.map(|f| f.key), self.texts())
    }

    /// The plan's inputs, or every field's problem. Each field is read on its own; then
    /// the trace is held to the crate's rules with its rate and request count (a problem of
    /// the rate: the request count is within the lab's bound), and the sweep to the lab's
    /// [`MAX_WORK`] (a problem of the request count, the field that scales it most simply).
    fn check(&self) -> Result<PlanInputs, Problems> {
        let mut problems = Problems::default();
        let hardware = problems.field(
            field::HARDWARE.id,
            preset(HardwareProfile::preset(self.hardware.trim())),
        );
        let model = problems.field(
            field::MODEL.id,
            preset(ModelProfile::preset(self.model.trim())),
        );
        let weights = problems.field(
            field::WEIGHTS.id,
            weight_paths(&self.weights, field::WEIGHTS.name),
        );
        let spec = problems.field(
            field::TRACE.id,
            preset(TraceSpec::preset(self.trace.trim())),
        );
        let requests = problems.field(
            field::REQUESTS.id,
            request_count(&self.requests, field::REQUESTS.name),
        );
        let rate = problems.field(
            field::RATE.id,
            number_in(
                &self.rate,
                field::RATE.name,
                MIN_RATE_PER_S..=MAX_RATE_PER_S,
            ),
        );
        let names = problems.field(field::BATCHINGS.id, batching_names(&self.batchings));
        let chunk = problems.field(
            field::CHUNK.id,
            count(&self.chunk_budget, field::CHUNK.name),
        );
        let seqs = problems.field(
            field::SEQUENCES.id,
            list(&self.max_sequences, field::SEQUENCES.name, |t| {
                count(t, "Batch limit (sequences)")
            }),
        );
        let loads = problems.field(
            field::LOADS.id,
            list(&self.loads, field::LOADS.name, |t| {
                number_in(t, "Load scale", MIN_LOAD_SCALE..=MAX_LOAD_SCALE)
            }),
        );
        let ttft_s = problems.field(
            field::TTFT.id,
            slo_seconds(&self.ttft_ms, field::TTFT.name, |s| Slo {
                ttft_p99_s: s,
                tpot_p99_s: MIN_SLO_S,
            }),
        );
        let tpot_s = problems.field(
            field::TPOT.id,
            slo_seconds(&self.tpot_ms, field::TPOT.name, |s| Slo {
                ttft_p99_s: MIN_SLO_S,
                tpot_p99_s: s,
            }),
        );
        let floor_pct = problems.field(
            field::FLOOR.id,
            number_in(&self.floor_pct, field::FLOOR.name, 0.0..),
        );

        let spec = match (spec, requests, rate) {
            (Some(mut spec), Some(requests), Some(rate)) => {
                spec.requests = requests;
                spec.arrivals.set_mean_rate(rate);
                problems.field(
                    field::RATE.id,
                    spec.validate()
                        .map(|()| spec)
                        .map_err(|e| sentence(e.to_string())),
                )
            }
            _ => None,
        };
        let batchings: Option<Vec<Batching>> = match (names, chunk) {
            (Some(names), Some(token_budget)) => problems.field(
                field::BATCHINGS.id,
                names
                    .iter()
                    .map(|name| batching_named(name, token_budget))
                    .collect::<Result<_, _>>()
                    .map_err(|e| sentence(e.to_string())),
            ),
            _ => None,
        };
        if let (Some(l), Some(b), Some(s), Some(w), Some(r)) =
            (&loads, &batchings, &seqs, &weights, requests)
        {
            let points = (l.len() * b.len() * s.len() * w.len()) as u64;
            if points * r > MAX_WORK {
                let message = format!(
                    "The sweep would simulate {points} configurations of {r} requests, {} \
                     requests in all; the lab stops at {MAX_WORK} so that the page stays \
                     responsive. Lower the request count or sweep fewer settings \
                     (decode-lab's capacity command has no such limit).",
                    points * r
                );
                problems.add(field::REQUESTS.id, message);
            }
        }
        problems.or(|| {
            let (hardware, model) = (hardware?, model?);
            let quality = QualityProfile::tiny();
            Some(PlanInputs {
                calibration: Calibration::measured_for(&hardware, &model),
                hardware,
                model,
                quality_floors: quality.floors_within(floor_pct? / 100.0),
                quality,
                trace: TraceSource::Generated { spec: spec? },
                slo: Slo {
                    ttft_p99_s: ttft_s?,
                    tpot_p99_s: tpot_s?,
                },
                sweep: Sweep {
                    load_scales: loads?,
                    batchings: batchings?,
                    max_sequences: seqs?,
                    weights: weights?,
                    block_size: 16,
                    fleet: Default::default(),
                },
                baseline: NamedPolicy::baseline(),
                last_known_good: None,
                speculation: None,
                owners: Default::default(),
                rollout: None,
                rollout_trace: None,
            })
        })
    }
}

impl Default for CapacityForm {
    fn default() -> CapacityForm {
        CapacityForm::from_texts(FIELDS.map(|f| f.default.to_string()))
    }
}

/// What a URL asked of a select (or the batching boxes) that it does not offer.
fn not_offered(spec: &FieldSpec, asked: &str, names: &[&str]) -> String {
    let names = match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    };
    format!(
        "The URL asks for {} \"{asked}\", which is not one of {names}; using {}.",
        spec.name, spec.default
    )
}

/// A preset the crate looked up, or its error (which lists the known names) as a sentence.
fn preset<T>(found: Result<T, CapacityError>) -> Result<T, String> {
    found.map_err(|e| sentence(e.to_string()))
}

/// `both`, the lab's name for sweeping both paths, or one of the crate's weight paths.
fn weight_paths(text: &str, name: &str) -> Result<Vec<WeightPath>, String> {
    match text.trim() {
        "both" => Ok(vec![WeightPath::Full, WeightPath::Int8]),
        other => other.parse().map(|w| vec![w]).map_err(|_| {
            format!(
                "The {name} must be both, {}, but they are \"{other}\".",
                WeightPath::EXPECTED
            )
        }),
    }
}

/// The request count, within the lab's bound; its digits may be grouped with underscores
/// as Rust writes them ("20_000"), as the panel has always read them.
fn request_count(text: &str, name: &str) -> Result<u64, String> {
    whole_in(&text.trim().replace('_', ""), name, 1, MAX_REQUESTS)
        // The message quotes the text as it was typed.
        .or_else(|_| whole_in(text, name, 1, MAX_REQUESTS))
}

/// A count the crate holds in a u32 (a batch limit, a token budget): a whole number of at
/// least 1, since with none no request is ever admitted.
fn count(text: &str, name: &str) -> Result<u32, String> {
    // Within u32's range, so the conversion is exact.
    whole_in(text, name, 1, u32::MAX.into()).map(|n| n as u32)
}

/// A p99 SLO typed in milliseconds, as seconds: a number above zero, then within the
/// crate's range ([`Slo::validate`] of the `Slo` that `slo` makes of it).
fn slo_seconds(text: &str, name: &str, slo: impl Fn(f64) -> Slo) -> Result<f64, String> {
    let above_zero = (Bound::Excluded(0.0), Bound::Unbounded);
    let seconds = number_in(text, name, above_zero)? / 1e3;
    slo(seconds)
        .validate()
        .map(|()| seconds)
        .map_err(|e| sentence(e.to_string()))
}

/// A comma list of 1 to [`MAX_LIST`] values, each read by `item`; every bad value is named.
fn list<T>(
    text: &str,
    name: &str,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let items: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() || items.len() > MAX_LIST {
        return Err(format!(
            "{name} must be 1 to {MAX_LIST} comma-separated values, but they are \"{}\".",
            text.trim()
        ));
    }
    let mut values = Vec::new();
    let mut wrong = Vec::new();
    for t in items {
        match item(t) {
            Ok(v) => values.push(v),
            Err(e) => wrong.push(e),
        }
    }
    if wrong.is_empty() {
        Ok(values)
    } else {
        Err(wrong.join(" "))
    }
}

/// The ticked batchings, as [`BATCHINGS`]' names, each once.
fn batching_names(text: &str) -> Result<Vec<&'static str>, String> {
    let mut names = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match BATCHINGS.iter().find(|(n, _)| n.eq_ignore_ascii_case(item)) {
            Some((n, _)) if !names.contains(n) => names.push(*n),
            Some(_) => {}
            None => {
                return Err(format!(
                    "The batching \"{item}\" is not one of static, continuous or chunked."
                ))
            }
        }
    }
    if names.is_empty() {
        return Err("Choose at least one batching to sweep.".into());
    }
    Ok(names)
}

/// The crate's batching for one of [`BATCHINGS`]' names: `chunked` at the form's token
/// budget, the others by the crate's own names.
fn batching_named(name: &str, token_budget: u32) -> Result<Batching, CapacityError> {
    match name {
        "chunked" => Ok(Batching::ChunkedPrefill { token_budget }),
        other => other.parse(),
    }
}

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

/// Runs the plan the form describes, degrading to `last_known_good` before the baseline;
/// or every field's problem; or the problem the plan itself finds ([`plan_problem`]).
pub fn plan(
    form: &CapacityForm,
    last_known_good: Option<NamedPolicy>,
) -> Result<PlanView, Problems> {
    let inputs = PlanInputs {
        last_known_good,
        ..form.check()?
    };
    let report = Plan::run(&inputs).map_err(|e| plan_problem(&e))?;
    Ok(view(report))
}

/// An error of [`Plan::run`] on checked inputs, as a problem of the field it comes from.
pub fn plan_problem(error: &CapacityError) -> Problems {
    Problems::one(
        field_of(error),
        format!("The plan cannot run: {}", sentence(error.to_string())),
    )
}

/// The field whose value a plan's error comes from; the Plan button when no one field does.
fn field_of(error: &CapacityError) -> &'static str {
    match error {
        CapacityError::NoArrivalRate { .. }
        | CapacityError::EmptyTrace
        | CapacityError::TooManyRequests { .. }
        | CapacityError::TooMuchWork { .. } => field::REQUESTS.id,
        CapacityError::RateTooHigh { .. } => field::RATE.id,
        CapacityError::WeightsTooLarge { .. } | CapacityError::KvTooSmall { .. } => {
            field::HARDWARE.id
        }
        CapacityError::RequestTooLong { .. } => field::MODEL.id,
        _ => PLAN_ID,
    }
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
                _ if t.shared_prefixes.is_some() => {
                    "chat-prefix (steady, with shared system prompts)"
                }
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
        fleet: report.decision.fleet,
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

    /// Each problem as (field, message), in the form's order.
    fn named(problems: &Problems) -> Vec<(&str, &str)> {
        problems
            .iter()
            .map(|p| (p.field, p.message.as_str()))
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
        assert_eq!(trace_options().len(), 4);
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
        assert_eq!(CapacityForm::default().check().unwrap(), expected);
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
            fleet: view.report.decision.fleet,
        };
        let view = plan(&form, Some(known)).unwrap();
        assert_eq!(
            view.report.decision.kind,
            DecisionKind::DegradeToLastKnownGood
        );
    }

    #[test]
    fn url_values_round_trip_and_bad_ones_are_named_at_their_fields() {
        let form = CapacityForm {
            hardware: "h100-sxm".into(),
            model: "llama-3-8b".into(),
            weights: "int8".into(),
            trace: "bursty".into(),
            batchings: "continuous".into(),
            max_sequences: "8, 32".into(),
            ..small()
        };
        let written = form.to_pairs();
        assert!(written.iter().all(|(k, _)| k.starts_with("cap_")));
        let back = CapacityForm::from_pairs(written.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, (form, Problems::default()));

        let (read, url) = CapacityForm::from_pairs([
            ("panel", "capacity"),
            ("cap_hw", "tpu"),
            ("cap_n", "lots"),
            ("cap_seqs", "4,,x"),
            ("cap_batching", "dynamic"),
            ("cap_ttft", "-3"),
            ("cap_rate", "400"),
            ("cap_model", " l4 "),
        ]);
        // The selects and boxes keep their defaults and name what the URL asked for ...
        assert_eq!(
            (read.hardware.as_str(), read.model.as_str()),
            ("lab-cpu", "decode-lab-tiny-v1")
        );
        assert_eq!(read.batchings, "static,continuous,chunked");
        assert_eq!(
            named(&url),
            [
                ("cap-hw", "The URL asks for hardware \"tpu\", which is not one of a100-80gb, h100-sxm, h200, l4 or lab-cpu; using lab-cpu."),
                ("cap-model", "The URL asks for model \"l4\", which is not one of decode-lab-tiny-v1, llama-2-7b, llama-2-13b, llama-3-8b or mistral-7b; using decode-lab-tiny-v1."),
                ("cap-batchings", "The URL asks for batching \"dynamic\", which is not one of static, continuous or chunked; using static,continuous,chunked."),
            ]
        );
        // ... and the typed fields keep the URL's text, for the check to name at the field.
        assert_eq!(
            (read.requests.as_str(), read.rate.as_str()),
            ("lots", "400")
        );
        assert_eq!(
            named(&read.check().unwrap_err()),
            [
                ("cap-n", "Requests in the trace must be a whole number from 1 to 20000, but it is \"lots\"."),
                ("cap-seqs", "Batch limit (sequences) must be a whole number from 1 to 4294967295, but it is \"x\"."),
                ("cap-ttft", "SLO: p99 time to first token (ms) must be a number greater than 0, but it is \"-3\"."),
            ]
        );
    }

    /// A URL with three bad capacity values names all three, each at its own field.
    #[test]
    fn every_bad_value_of_a_url_is_named() {
        let (form, url) = CapacityForm::from_pairs([
            ("panel", "capacity"),
            ("cap_rate", "fast"),
            ("cap_loads", "1, 0"),
            ("cap_floor", "-1"),
        ]);
        assert!(url.is_empty());
        let problems = form.check().unwrap_err();
        assert_eq!(
            named(&problems),
            [
                ("cap-rate", "Arrival rate (requests/s) must be a number from 0.000001 to 1000000000, but it is \"fast\"."),
                ("cap-loads", "Load scale must be a number from 0.000001 to 1000000, but it is \"0\"."),
                ("cap-floor", "Quality floor (%) must be a number of at least 0, but it is \"-1\"."),
            ]
        );
        assert!(matches!(plan(&form, None), Err(p) if p == problems));
    }

    #[test]
    fn bad_fields_are_sentences_naming_the_value() {
        let form = CapacityForm {
            requests: "0".into(),
            loads: "1, fast, -2".into(),
            tpot_ms: "NaN".into(),
            batchings: String::new(),
            chunk_budget: "0".into(),
            max_sequences: "1,2,3,4,5,6,7,8,9".into(),
            weights: "half".into(),
            ..CapacityForm::default()
        };
        assert_eq!(
            named(&form.check().unwrap_err()),
            [
                ("cap-weights", "The weight paths must be both, full or int8, but they are \"half\"."),
                ("cap-n", "Requests in the trace must be a whole number from 1 to 20000, but it is \"0\"."),
                ("cap-batchings", "Choose at least one batching to sweep."),
                ("cap-chunk", "Chunked prefill's tokens per iteration must be a whole number from 1 to 4294967295, but it is \"0\"."),
                ("cap-seqs", "Batch limits must be 1 to 8 comma-separated values, but they are \"1,2,3,4,5,6,7,8,9\"."),
                ("cap-loads", "Load scale must be a number from 0.000001 to 1000000, but it is \"fast\". Load scale must be a number from 0.000001 to 1000000, but it is \"-2\"."),
                ("cap-tpot", "SLO: p99 time per output token (ms) must be a number greater than 0, but it is \"NaN\"."),
            ]
        );

        // The crate's own bounds, beyond what the form reads: an SLO past its range, a
        // bursty trace too slow to burst, presets it does not know.
        let form = CapacityForm {
            ttft_ms: "1e13".into(),
            trace: "bursty".into(),
            rate: "0.000001".into(),
            hardware: "tpu".into(),
            ..CapacityForm::default()
        };
        let problems = form.check().unwrap_err();
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["cap-hw", "cap-ttft", "cap-rate"]);
        assert!(problems
            .of("cap-hw")
            .unwrap()
            .starts_with("Unknown hardware preset \"tpu\"; known: a100-80gb"));
        assert!(problems
            .of("cap-ttft")
            .unwrap()
            .starts_with("P99 TTFT SLO (s) must lie in"));
        assert!(problems
            .of("cap-rate")
            .unwrap()
            .starts_with("Arrivals per burst cycle"));

        // Digits grouped as Rust writes them read; a bad one is quoted as typed.
        let grouped = CapacityForm {
            requests: "2_000".into(),
            ..CapacityForm::default()
        };
        assert_eq!(grouped.check(), CapacityForm::default().check());
        let e = CapacityForm {
            requests: "20_001".into(),
            ..CapacityForm::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(named(&e), [("cap-n", "Requests in the trace must be a whole number from 1 to 20000, but it is \"20_001\".")]);

        let too_much = CapacityForm {
            requests: "20000".into(),
            ..CapacityForm::default()
        };
        let e = too_much.check().unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(
            e.of("cap-n")
                .unwrap()
                .contains("120 configurations of 20000 requests"),
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
            e.of("cap-hw").unwrap().starts_with(
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
        assert!(e.of("cap-n").unwrap().contains("no arrival rate"), "{e:?}");
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
    }

    /// A plan's error points at the field to change, or at the Plan button.
    #[test]
    fn a_plans_error_is_a_problem_of_its_field() {
        let at = |e: CapacityError| {
            let problems = plan_problem(&e);
            assert!(problems
                .iter()
                .all(|p| p.message.starts_with("The plan cannot run: ")));
            problems.iter().map(|p| p.field).collect::<Vec<_>>()
        };
        assert_eq!(at(CapacityError::EmptyTrace), ["cap-n"]);
        let fast = CapacityError::RateTooHigh {
            what: "the trace's arrival rate".into(),
            rate: 1e13,
            limit: 1e12,
        };
        assert_eq!(at(fast), ["cap-rate"]);
        let long = CapacityError::RequestTooLong {
            request: 0,
            tokens: 300,
            context_len: 256,
        };
        assert_eq!(at(long), ["cap-model"]);
        let small = CapacityError::KvTooSmall {
            needed_blocks: 2,
            available_blocks: 1,
        };
        assert_eq!(at(small), ["cap-hw"]);
        let floor = CapacityError::Quality {
            reason: "two floors name slice \"en\"".into(),
        };
        assert_eq!(at(floor), [PLAN_ID]);
    }

    /// The boxes' `static` and `continuous` are the crate's names, which it reads back.
    #[test]
    fn the_batching_names_are_the_crates() {
        for (name, _) in BATCHINGS {
            let batching = batching_named(name, 64).unwrap();
            assert_eq!(batching_named(&batching.to_string(), 64), Ok(batching));
        }
        assert_eq!(Batching::Static.to_string(), BATCHINGS[0].0);
        assert_eq!(Batching::Continuous.to_string(), BATCHINGS[1].0);
        assert_eq!(
            batching_named("chunked", 64),
            Ok(Batching::ChunkedPrefill { token_budget: 64 })
        );
        assert!(batching_named("dynamic", 64).is_err());
    }
}
