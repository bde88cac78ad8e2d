//! The capacity planner's work, in its worker (built with the `planner` feature only, so the
//! page's wasm links none of it): the form's pairs check into a plan's inputs,
//! [`capacity::Plan::run_with_progress`] sweeps and decides, and the report becomes a
//! [`PlanDisplay`]: the decision in words, the sweep chart's positions, every table as rows
//! of formatted cells (each number also in full, for `data-value`), the report's sentences
//! and its two downloads. [`plan_display`] is that whole path; [`view`] places the sweep in
//! the chart, and [`display`] formats the rest: with fleets the sweep table gains the
//! Markdown's replicas, router, prefix-hit and rejected columns; a speculating plan gains
//! its α table; part 5 holds the playbook and, with a canary, its outcome in words and its
//! timeline (p99 TTFT per detector window against the SLO, the detection window marked).

use capacity::{
    figure, CapacityError, DecisionKind, Fleet, NamedPolicy, Plan, PlanInputs, PlanReport,
    RolloutReport, SweepRow,
};
use policy::figure_short;
use report::{Block, Cell, ChartPoint, Part, Row, Table, TimelineChart};

use crate::planner::form::{field, CapacityForm, PLAN_ID};
use crate::planner::protocol::{PlanDisplay, ReportFile, SweepChart};
use crate::widgets::form::{Form, Problems};
use crate::widgets::markup::html;
use crate::widgets::number::sentence;

/// The plan the URL pairs `form` describe, degrading to `known_good` (the JSON of a
/// known-good plan) before the baseline, as the page shows it; or the problems, each at its
/// field. `progress(done, total)` is called after each configuration.
pub fn plan_display(
    form: &[(String, String)],
    known_good: Option<&str>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PlanDisplay, Problems> {
    let form = CapacityForm::from_job(form)?;
    let known = known_good
        .map(NamedPolicy::from_known_good_json)
        .transpose()
        .map_err(|e| plan_problem(&e))?;
    Ok(display(&plan(&form, known, progress)?))
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

/// A plan placed in the chart: the report, each configuration's point, the frame and the curve.
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

/// Runs the plan the form describes, degrading to `last_known_good` before the baseline and
/// calling `progress(done, total)` after each configuration; or every field's problem; or
/// the problem the plan itself finds ([`plan_problem`]).
pub fn plan(
    form: &CapacityForm,
    last_known_good: Option<NamedPolicy>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PlanView, Problems> {
    let inputs = PlanInputs {
        last_known_good,
        ..form.check()?
    };
    let report = Plan::run_with_progress(&inputs, progress).map_err(|e| plan_problem(&e))?;
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
            (y_of(v), figure_short(v))
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
        format!("{} s", figure_short(t))
    } else if t >= 1e-3 {
        format!("{} ms", figure_short(t * 1e3))
    } else {
        format!("{} µs", figure_short(t * 1e6))
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

/// What a later plan may degrade to: the configuration this one released, if it did.
pub fn known_good(report: &PlanReport) -> Option<NamedPolicy> {
    (report.decision.kind == DecisionKind::Release).then(|| NamedPolicy {
        name: format!("last known-good: {}", report.decision.name),
        policy: report.decision.policy.clone(),
        fleet: report.decision.fleet,
    })
}

/// A download of the report, as Markdown or as JSON.
pub fn report_file(report: &PlanReport, markdown: bool) -> ReportFile {
    let (extension, mime, text) = if markdown {
        ("md", "text/markdown", report.to_markdown())
    } else {
        ("json", "application/json", report.to_json())
    };
    ReportFile {
        name: file_name(report, extension),
        mime: mime.to_string(),
        text,
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

/// What the page shows of a placed plan.
pub fn display(view: &PlanView) -> PlanDisplay {
    let report = &view.report;
    let (verdict, reason, failed_gates) = decision_words(report);
    let parts = parts(report);
    PlanDisplay {
        configurations: view.points.len(),
        kind: view.kind.to_string(),
        verdict,
        reason,
        failed_gates,
        chart: sweep_chart(view),
        sweep_table: sweep_table(view),
        parts_html: html(&parts),
        parts,
        markdown: report_file(report, true),
        json: report_file(report, false),
        released: known_good(report).and_then(|k| serde_json::to_string(&k).ok()),
    }
}

/// A table of the capacity panel (left-aligned first columns: `cap-keyed`).
fn table(class: &str, id: &str, caption: String, headers: &[&str], rows: Vec<Row>) -> Table {
    Table {
        class: class.to_string(),
        id: Some(id.to_string()),
        caption,
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// A row with no class.
fn row(header: impl Into<String>, cells: Vec<Cell>) -> Row {
    Row {
        class: None,
        header: header.into(),
        cells,
    }
}

/// A duration in milliseconds, shown to four figures and given in seconds in full.
fn ms_cell(t: f64) -> Cell {
    Cell::number(figure(t * 1e3), t)
}

/// The sweep: tokens/s against p99 TTFT with the SLO line.
fn sweep_chart(view: &PlanView) -> SweepChart {
    let f = &view.frame;
    let slo = view.report.contract.slo.ttft_p99_s;
    let passing = view.points.iter().filter(|p| p.row.passes_gates).count();
    let points = view
        .points
        .iter()
        .enumerate()
        .filter_map(|(row, p)| {
            let (x, y) = p.at?;
            Some(ChartPoint {
                row,
                x,
                y,
                value: p.row.output_tokens_per_s,
                passes: p.row.passes_gates,
                chosen: p.chosen,
                title: format!(
                    "{}: {} tokens/s, p99 TTFT {}; {}",
                    p.row.label,
                    figure(p.row.output_tokens_per_s),
                    seconds(p.row.ttft_p99_s),
                    p.gates
                ),
            })
        })
        .collect();
    SweepChart {
        width: f.width,
        height: f.height,
        left: f.left,
        right: f.right,
        top: f.top,
        bottom: f.bottom,
        summary: sweep_takeaway(view, slo, passing),
        x_ticks: f.x_ticks.clone(),
        y_ticks: f.y_ticks.clone(),
        slo_x: f.slo_x,
        slo_label: format!("TTFT SLO {}", seconds(slo)),
        points,
        curve: view.curve.clone(),
    }
}

/// The sweep chart's takeaway, from its points: the released configuration against the TTFT
/// SLO, the fastest configuration and whether (and by how much) it fails, and how many pass.
fn sweep_takeaway(view: &PlanView, slo: f64, passing: usize) -> String {
    let ran = view.points.iter().filter(|p| p.row.error.is_none());
    let fastest = ran.fold(None::<&SweepPoint>, |best, p| match best {
        Some(b) if b.row.output_tokens_per_s >= p.row.output_tokens_per_s => Some(b),
        _ => Some(p),
    });
    // Short sentences and no abbreviation, so that the takeaway reads at grade 9 or below:
    // "p99 TTFT" is said as the time 99 % of first tokens come within.
    let tokens = |p: &SweepPoint| {
        format!(
            "It gives {} tokens/s, and 99 % of its first tokens come within {}",
            figure(p.row.output_tokens_per_s),
            seconds(p.row.ttft_p99_s)
        )
    };
    let mut text = match view.points.iter().find(|p| p.chosen) {
        Some(c) => format!(
            "The released configuration is {}. {}. The limit is {}.",
            c.row.label,
            tokens(c),
            seconds(slo)
        ),
        None => format!(
            "No configuration is released. The limit for 99 % of first tokens is {}.",
            seconds(slo)
        ),
    };
    text += &match fastest {
        Some(f) if f.chosen => " It is also the fastest.".to_string(),
        Some(f) if f.row.passes_gates => format!(
            " The fastest is {}. {}. It passes every gate too.",
            f.row.label,
            tokens(f)
        ),
        Some(f) if f.row.ttft_p99_s > slo => format!(
            " The fastest is {}. {}: {} over the limit.",
            f.row.label,
            tokens(f),
            seconds(f.row.ttft_p99_s - slo)
        ),
        Some(f) => format!(
            " The fastest is {}. {}, but {}.",
            f.row.label,
            tokens(f),
            f.gates
        ),
        None => String::new(),
    };
    text + &format!(
        " {passing} of {} configurations pass every gate.",
        view.points.len()
    )
}

/// The chart's table mirror: every configuration of the sweep, one row each; with fleets
/// (replicas, prefix caches, a queue cap), also each row's replicas, router, prefix-cache
/// hit rate and rejected requests, as the Markdown's sweep table has them.
fn sweep_table(view: &PlanView) -> Table {
    let passing = view.points.iter().filter(|p| p.row.passes_gates).count();
    let fleets = has_fleets(&view.report);
    let rows = view.points.iter().map(|p| sweep_row(p, fleets)).collect();
    let fleet_headers: &[&str] = if fleets {
        &["Replicas", "Router", "Prefix hits", "Rejected"]
    } else {
        &[]
    };
    let headers: Vec<&str> = std::iter::once("Configuration")
        .chain(fleet_headers.iter().copied())
        .chain(SWEEP_HEADERS)
        .collect();
    table(
        "mirror",
        "cap-sweep-table",
        format!(
            "Every configuration of the sweep ({} rows; {passing} pass every gate): the chart's points",
            view.points.len()
        ),
        &headers,
        rows,
    )
}

/// Whether the sweep serves any configuration on more than the single engine.
fn has_fleets(report: &PlanReport) -> bool {
    report.sweep.iter().any(|r| r.fleet != Fleet::single())
}

/// The sweep table's columns after the configuration and its fleet.
const SWEEP_HEADERS: [&str; 11] = [
    "Policy",
    "Batch limit",
    "Weights",
    "Load",
    "Offered (requests/s)",
    "Tokens/s",
    "p99 TTFT (ms)",
    "p99 time per token (ms)",
    "Goodput (requests/s)",
    "Cost per M tokens",
    "Gates",
];

fn sweep_row(p: &SweepPoint, fleets: bool) -> Row {
    let r = &p.row;
    // A configuration that could not run has no figures to show, only its value (zero).
    let number = |x: f64, scale: f64| {
        let shown = if r.error.is_some() {
            "—".to_string()
        } else {
            figure(x * scale)
        };
        Cell::number(shown, x)
    };
    let class = match (p.chosen, r.passes_gates) {
        (true, _) => "cap-chosen-row",
        (false, true) => "cap-pass-row",
        (false, false) => "cap-fail-row",
    };
    let header = if p.chosen {
        format!("{} (released)", r.label)
    } else {
        r.label.clone()
    };
    let fleet = [
        Cell::number(r.replicas.to_string(), r.replicas),
        Cell::text(r.router.clone()),
        Cell::number(percent(r.prefix_cache_hit_rate), r.prefix_cache_hit_rate),
        Cell::number(r.rejected.to_string(), r.rejected),
    ];
    let fleet = if fleets { &fleet[..] } else { &[] };
    Row {
        class: Some(class.to_string()),
        header,
        cells: fleet
            .iter()
            .cloned()
            .chain([
                Cell::text(r.batching.clone()),
                Cell::number(r.max_sequences.to_string(), r.max_sequences),
                Cell::text(r.weights.clone()),
                Cell::number(format!("{}x", r.load_scale), r.load_scale),
                number(r.offered_rate_per_s, 1.0),
                number(r.output_tokens_per_s, 1.0),
                number(r.ttft_p99_s, 1e3),
                number(r.tpot_p99_s, 1e3),
                number(r.goodput_per_s, 1.0),
                number(r.cost_per_million_output_tokens, 1.0),
                Cell::text(p.gates.clone()),
            ])
            .collect(),
    }
}

/// The chapter's four parts: contract, profiler and bottlenecks, quality gates, capacity
/// and cost.
fn parts(report: &PlanReport) -> Vec<Part> {
    let chosen = &report.chosen;
    let m = &chosen.metrics;
    let contract = contract_rows(report)
        .into_iter()
        .map(|(k, v)| row(k, vec![Cell::text(v)]))
        .collect();
    let latency = std::iter::once(&m.all)
        .chain(&m.by_slice)
        .map(|s| {
            row(
                s.slice.clone(),
                vec![
                    Cell::number(s.requests.to_string(), s.requests),
                    ms_cell(s.ttft.p50),
                    ms_cell(s.ttft.p99),
                    ms_cell(s.tpot.p50),
                    ms_cell(s.tpot.p99),
                    ms_cell(s.e2e.p99),
                    Cell::number(figure(s.goodput_per_s), s.goodput_per_s),
                    Cell::number(percent(s.slo_attainment), s.slo_attainment),
                ],
            )
        })
        .collect();
    let shares = bottleneck_rows(report)
        .into_iter()
        .map(|(what, share)| row(what, vec![Cell::number(percent(share), share)]))
        .collect();
    let b = &m.bottleneck;
    let kv = &m.kv;
    let bottleneck = format!(
        "Bottleneck: {}. {} iterations of {} tokens on average, {} preemptions; KV cache of {} blocks of {} tokens, peak use {} blocks, minimum headroom {}.",
        b.dominant,
        b.iterations,
        figure(b.mean_tokens_per_iteration),
        b.preemptions,
        kv.blocks,
        kv.block_size,
        kv.peak_used_blocks,
        percent(kv.min_headroom)
    );
    let quality = report
        .quality
        .iter()
        .map(|q| Row {
            class: (!q.passed).then(|| "over".to_string()),
            header: format!("{} ({})", q.slice, q.name),
            cells: vec![
                Cell::text(q.weights.clone()),
                Cell::number(format!("{:.5}", q.bits_per_byte), q.bits_per_byte),
                Cell::number(format!("{:.5}", q.max_bits_per_byte), q.max_bits_per_byte),
                Cell::text(if q.passed { "pass" } else { "fail" }),
            ],
        })
        .collect();
    let gates = chosen
        .gates
        .iter()
        .map(|g| format!("{}{g}", if g.passed { "pass: " } else { "fail: " }))
        .collect();
    let d = &report.decision;
    let cost = vec![
        row("configuration", vec![Cell::text(d.policy.label())]),
        row(
            "sustained load per replica (requests/s)",
            vec![Cell::number(
                figure(d.sustained_rate_per_s),
                d.sustained_rate_per_s,
            )],
        ),
        row(
            "load scale per replica",
            vec![Cell::number(format!("{}x", d.load_scale), d.load_scale)],
        ),
        row(
            "replicas for the trace",
            vec![Cell::number(d.replicas.to_string(), d.replicas)],
        ),
        row(
            "cost per hour",
            vec![Cell::number(figure(d.cost_per_hour), d.cost_per_hour)],
        ),
        row(
            "cost per million output tokens",
            vec![Cell::number(
                figure(m.cost_per_million_output_tokens),
                m.cost_per_million_output_tokens,
            )],
        ),
        row(
            "output tokens/s",
            vec![Cell::number(
                figure(m.output_tokens_per_s),
                m.output_tokens_per_s,
            )],
        ),
    ];
    let mut cost_part = vec![Block::Table(table(
        "mirror cap-keyed",
        "cap-cost-table",
        format!("What the decision ships: {}", d.name),
        &["Figure", "Value"],
        cost,
    ))];
    if let Some(t) = &d.max_throughput {
        let verdict = if t.passes_gates {
            "it passes every gate.".to_string()
        } else {
            format!("it fails: {}.", t.failed_gates)
        };
        cost_part.push(Block::Text(format!(
            "Maximising tokens/s alone would pick {} ({} tokens/s, p99 TTFT {}, goodput {} requests/s): {verdict}",
            t.label,
            figure(t.output_tokens_per_s),
            seconds(t.ttft_p99_s),
            figure(t.goodput_per_s)
        )));
    }
    let mut parts = vec![Part {
        id: "cap-contract-title".into(),
        title: "1. Benchmark contract".into(),
        blocks: vec![Block::Table(table(
            "mirror cap-keyed",
            "cap-contract-table",
            "What was simulated, under which assumptions".into(),
            &["Input", "Value"],
            contract,
        ))],
    }];
    parts.extend(speculation_part(report));
    parts.extend(lengths_part(report));
    parts.extend([
        Part {
            id: "cap-profile-title".into(),
            title: format!("2. Profiler and bottleneck report: {}", chosen.name),
            blocks: vec![
                Block::Table(table(
                    "mirror",
                    "cap-latency-table",
                    "Latency and goodput of the shipped configuration, on all traffic and per slice".into(),
                    &[
                        "Slice",
                        "Requests",
                        "TTFT p50 (ms)",
                        "TTFT p99 (ms)",
                        "Time per token p50 (ms)",
                        "Time per token p99 (ms)",
                        "End to end p99 (ms)",
                        "Goodput (requests/s)",
                        "SLO attainment",
                    ],
                    latency,
                )),
                Block::Table(table(
                    "mirror cap-keyed",
                    "cap-bottleneck-table",
                    "Where the time went (shares of the simulated wall time; queueing as a share of request latency)".into(),
                    &["Time spent in", "Share"],
                    shares,
                )),
                Block::Text(bottleneck),
            ],
        },
        Part {
            id: "cap-quality-title".into(),
            title: "3. Quality gates".into(),
            blocks: vec![
                Block::Table(table(
                    "mirror",
                    "cap-quality-table",
                    "Held-out bits per byte of the tiny model per slice and weight path (lower is better), against each slice's floor; eu is the rare slice".into(),
                    &["Slice", "Weights", "Bits/byte", "Floor", "Verdict"],
                    quality,
                )),
                Block::Text(format!("Gates of {}:", chosen.name)),
                Block::List {
                    class: "cap-gates-list".into(),
                    items: gates,
                },
            ],
        },
        Part {
            id: "cap-cost-title".into(),
            title: "4. Capacity and cost recommendation".into(),
            blocks: cost_part,
        },
        operations_part(report),
    ]);
    parts
}

/// When the sweep speculates: α and E per decoding policy and slice, the plan's policy
/// first, as the crate measured them.
fn speculation_part(report: &PlanReport) -> Option<Part> {
    let s = report.contract.speculation.as_ref()?;
    let rows = s
        .acceptance
        .iter()
        .map(|a| Row {
            class: (a.policy == s.decoding).then(|| "cap-chosen-row".to_string()),
            header: a.policy.clone(),
            cells: vec![
                Cell::text(a.slice.clone()),
                Cell::number(figure(a.acceptance_rate), a.acceptance_rate),
                Cell::number(
                    figure(a.expected_tokens_per_step),
                    a.expected_tokens_per_step,
                ),
            ],
        })
        .collect();
    Some(Part {
        id: "cap-speculation-title".into(),
        title: "Speculative decoding".into(),
        blocks: vec![Block::Table(table(
            "mirror",
            "cap-speculation-table",
            format!(
                "Acceptance rate α of the {} draft, measured per decoding policy and slice, and the expected tokens per verification step E = (1 − α^(k+1)) / (1 − α) at k = {}; the plan serves {} ({} µs per drafted token)",
                s.draft,
                s.k,
                s.decoding,
                figure(s.draft_s_per_token * 1e6)
            ),
            &["Decoding policy", "Slice", "α", "E (tokens per step)"],
            rows,
        ))],
    })
}

/// When output lengths come from the decoding policy: per slice, how often the measured
/// runs chose end-of-text, the share of its budget a request keeps, and the mean output
/// the trace asked for against the one served.
fn lengths_part(report: &PlanReport) -> Option<Part> {
    let l = report.contract.lengths.as_ref()?;
    let rows = l
        .slices
        .iter()
        .map(|sl| {
            row(
                sl.slice.clone(),
                vec![
                    Cell::number(sl.runs.to_string(), sl.runs as f64),
                    Cell::number(format!("{:.1} %", sl.eos_share * 100.0), sl.eos_share),
                    Cell::number(
                        format!("{:.1} %", sl.mean_budget_share * 100.0),
                        sl.mean_budget_share,
                    ),
                    Cell::number(figure(sl.mean_budget_tokens), sl.mean_budget_tokens),
                    Cell::number(figure(sl.mean_output_tokens), sl.mean_output_tokens),
                ],
            )
        })
        .collect();
    Some(Part {
        id: "cap-lengths-title".into(),
        title: "Output lengths from the decoding policy".into(),
        blocks: vec![Block::Table(table(
            "mirror",
            "cap-lengths-table",
            format!(
                "Where {} stopped in the tiny model's measured runs (at most {} tokens each), and the output each slice's requests were served with: a request keeps the share of its trace length that one measured run used",
                l.decoding, l.max_new_tokens
            ),
            &[
                "Slice",
                "Measured runs",
                "Chose end-of-text",
                "Mean share of budget",
                "Trace's mean output (tokens)",
                "Served mean output (tokens)",
            ],
            rows,
        ))],
    })
}

/// Part 5: a detector, owner, mitigation and stop condition for every gate of what ships,
/// and the canary when one was simulated.
fn operations_part(report: &PlanReport) -> Part {
    let rows = report
        .playbook
        .iter()
        .map(|p| {
            row(
                p.detector.clone(),
                vec![
                    Cell::text(p.owner.clone()),
                    Cell::text(p.mitigation.clone()),
                    Cell::text(p.stop_condition.clone()),
                ],
            )
        })
        .collect();
    let mut blocks = vec![Block::Table(table(
        "mirror cap-keyed",
        "cap-playbook-table",
        "The failure playbook: a detector for every gate of the shipped configuration".into(),
        &["Detector", "Owner", "Mitigation", "Stop condition"],
        rows,
    ))];
    if let Some(r) = &report.rollout {
        blocks.push(Block::Text(rollout_words(r)));
        blocks.push(Block::Timeline(Box::new(rollout_chart(
            r,
            report.contract.slo.ttft_p99_s,
        ))));
    }
    Part {
        id: "cap-playbook-title".into(),
        title: "5. Failure playbook and rollout".into(),
        blocks,
    }
}

/// The canary in a paragraph: whether it stopped, when the detector fired and on what,
/// and the requests that missed the SLO, overall and per slice.
pub fn rollout_words(r: &RolloutReport) -> String {
    let after = |t: f64| seconds(t - r.start_s);
    let opening = format!(
        "Canary: {} took {} of the requests from t0 = {}, judged over {} windows; the fallback is {}.",
        r.candidate,
        percent(r.fraction),
        seconds(r.start_s),
        seconds(r.window_s),
        r.fallback
    );
    let per_slice = r
        .missed_by_slice
        .iter()
        .map(|(slice, missed, of)| format!("{slice} {missed} of {of}"))
        .collect::<Vec<_>>()
        .join(", ");
    let outcome = match (&r.detector, r.detected_at_s, r.stopped_at_s) {
        (Some(d), Some(detected), Some(stopped)) => format!(
            "Stopped: the detector fired {} after t0 ({d}); the canary's traffic returned to {} {} after t0. {} of its {} requests missed the SLO ({per_slice}); after the stop the fallback served {} of its share and missed {}.",
            after(detected),
            r.fallback,
            after(stopped),
            r.missed_slo,
            r.canary_requests,
            r.after_stop_requests,
            r.after_stop_missed
        ),
        _ => format!(
            "Completed: no detector fired; {} of the canary's {} requests missed the SLO ({per_slice}).",
            r.missed_slo, r.canary_requests
        ),
    };
    format!("{opening} {outcome}")
}

/// The detection window: the first that breached a gate.
fn detection_window(r: &RolloutReport) -> Option<usize> {
    r.timeline.iter().position(|w| !w.breached.is_empty())
}

/// The canary's p99 TTFT per detector window against the SLO, the detection window
/// marked, and the windows as its table.
fn rollout_chart(r: &RolloutReport, slo_s: f64) -> TimelineChart {
    let (width, height) = (CHART_WIDTH, 220.0);
    let (left, right, top, bottom) = (64.0, 16.0, 12.0, 44.0);
    let end = r.timeline.last().map_or(r.window_s, |w| w.end_s) - r.start_s;
    let end = if end > 0.0 { end } else { 1.0 };
    let measured = |w: &&capacity::RolloutWindow| w.canary_requests > 0;
    let y_max = nice_ceiling(
        r.timeline
            .iter()
            .filter(measured)
            .map(|w| w.canary_ttft_p99_s * 1e3)
            .fold(slo_s * 1e3, f64::max),
    );
    let (plot_w, plot_h) = (width - left - right, height - top - bottom);
    let x_of = |t: f64| left + (t - r.start_s) / end * plot_w;
    let y_of = |ms: f64| top + plot_h - ms / y_max * plot_h;
    let detected = detection_window(r);
    let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut points = Vec::new();
    let mut gap = true;
    for (row, w) in r.timeline.iter().enumerate() {
        if w.canary_requests == 0 {
            gap = true;
            continue;
        }
        let at = (
            x_of((w.start_s + w.end_s) / 2.0),
            y_of(w.canary_ttft_p99_s * 1e3),
        );
        if gap {
            lines.push(Vec::new());
            gap = false;
        }
        if let Some(line) = lines.last_mut() {
            line.push(at);
        }
        points.push(ChartPoint {
            row,
            x: at.0,
            y: at.1,
            value: w.canary_ttft_p99_s * 1e3,
            passes: w.breached.is_empty(),
            chosen: false,
            title: format!(
                "{}: {} canary requests, p99 TTFT {}{}",
                window_name(r, w),
                w.canary_requests,
                seconds(w.canary_ttft_p99_s),
                if w.breached.is_empty() {
                    String::new()
                } else {
                    format!("; breached {}", w.breached.join("; "))
                }
            ),
        });
    }
    let x_ticks = (0..=4)
        .map(|i| {
            let t = end * i as f64 / 4.0;
            (x_of(r.start_s + t), elapsed(t))
        })
        .collect();
    let y_ticks = (0..=4)
        .map(|i| {
            let v = y_max * i as f64 / 4.0;
            (y_of(v), figure_short(v))
        })
        .collect();
    let marked = detected.map(|i| {
        let w = &r.timeline[i];
        (x_of(w.start_s), x_of(w.end_s), "detected".to_string())
    });
    let rows = r
        .timeline
        .iter()
        .enumerate()
        .map(|(i, w)| Row {
            class: if Some(i) == detected {
                Some("cap-detected-row".to_string())
            } else {
                (!w.breached.is_empty()).then(|| "over".to_string())
            },
            header: window_name(r, w),
            cells: vec![
                Cell::number(w.canary_requests.to_string(), w.canary_requests),
                if w.canary_requests == 0 {
                    Cell::text("—")
                } else {
                    ms_cell(w.canary_ttft_p99_s)
                },
                Cell::text(if w.breached.is_empty() {
                    "none".to_string()
                } else {
                    w.breached.join("; ")
                }),
            ],
        })
        .collect();
    let breaching = r.timeline.iter().filter(|w| !w.breached.is_empty()).count();
    TimelineChart {
        width,
        height,
        left,
        right,
        top,
        bottom,
        caption: "The canary: p99 time to first token of its requests per detector window".into(),
        summary: format!(
            "The canary ran for {} windows of {}. In {breaching} of them, a gate broke. 99 % of first tokens should come within {}.{}",
            r.timeline.len(),
            seconds(r.window_s),
            seconds(slo_s),
            match detected {
                Some(i) => format!(" The breach was found in window {}.", i + 1),
                None => String::new(),
            }
        ),
        x_label: "time after t0".into(),
        y_label: "p99 TTFT (ms)".into(),
        x_ticks,
        y_ticks,
        lines,
        points,
        level_y: y_of(slo_s * 1e3),
        level_label: format!("TTFT SLO {}", seconds(slo_s)),
        marked,
        table: table(
            "mirror",
            "cap-rollout-table",
            format!(
                "The canary's detector windows ({} rows): the chart's points",
                r.timeline.len()
            ),
            &[
                "Window (after t0)",
                "Canary requests",
                "p99 TTFT (ms)",
                "Breached gates",
            ],
            rows,
        ),
    }
}

/// A window as its span after t0: "0 s – 150 ms".
fn window_name(r: &RolloutReport, w: &capacity::RolloutWindow) -> String {
    format!(
        "{} – {}",
        elapsed(w.start_s - r.start_s),
        elapsed(w.end_s - r.start_s)
    )
}

/// A time after t0: [`seconds`], whose "0 µs" reads better as t0 itself, "0 s".
fn elapsed(t: f64) -> String {
    if t <= 0.0 {
        "0 s".into()
    } else {
        seconds(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::form::tests::{named, small};
    use crate::planner::form::{hardware_options, model_options, trace_options};

    /// The plan of `form`, its progress unread.
    fn plan(
        form: &CapacityForm,
        last_known_good: Option<NamedPolicy>,
    ) -> Result<PlanView, Problems> {
        super::plan(form, last_known_good, &mut |_, _| {})
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
        let json = report_file(&view.report, false);
        assert!(json.name.ends_with(".json") && json.mime == "application/json");
        assert!(serde_json::from_str::<serde_json::Value>(&json.text).is_ok());
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

    /// The sweep's takeaway against a direct computation from the plan's own rows: the
    /// released configuration (the decision's policy and load), the fastest one, and the
    /// count that pass.
    #[test]
    fn the_sweep_takeaway_names_the_released_and_the_fastest_configuration() {
        let pairs: Vec<(String, String)> = CapacityForm::default()
            .to_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let display = plan_display(&pairs, None, &mut |_, _| {}).unwrap();
        let report = plan(&CapacityForm::default(), None).unwrap().report;
        let slo = report.contract.slo.ttft_p99_s;
        let ran: Vec<_> = report.sweep.iter().filter(|r| r.error.is_none()).collect();
        let released = ran
            .iter()
            .find(|r| {
                r.policy == report.decision.policy && r.load_scale == report.decision.load_scale
            })
            .unwrap();
        let best = ran
            .iter()
            .map(|r| r.output_tokens_per_s)
            .fold(f64::NEG_INFINITY, f64::max);
        let fastest = ran.iter().find(|r| r.output_tokens_per_s == best).unwrap();
        let takeaway = &display.chart.summary;
        assert!(
            takeaway.starts_with(&format!(
                "The released configuration is {}. It gives {} tokens/s, and 99 % of its first tokens come within {}. The limit is {}.",
                released.label,
                figure(released.output_tokens_per_s),
                seconds(released.ttft_p99_s),
                seconds(slo)
            )),
            "{takeaway}"
        );
        assert!(
            takeaway.contains(&format!(
                " The fastest is {}. It gives {} tokens/s",
                fastest.label,
                figure(fastest.output_tokens_per_s)
            )) || fastest.label == released.label,
            "{takeaway}"
        );
        if fastest.ttft_p99_s > slo {
            assert!(
                takeaway.contains(&format!(
                    "come within {}: {} over the limit.",
                    seconds(fastest.ttft_p99_s),
                    seconds(fastest.ttft_p99_s - slo)
                )),
                "{takeaway}"
            );
        }
        // Plain words: Flesch–Kincaid grade 9 or below (Chartability's reading level).
        let grade = crate::widgets::walk::grade(takeaway);
        assert!(grade <= 9.0, "grade {grade:.1}: {takeaway}");
        let passing = report.sweep.iter().filter(|r| r.passes_gates).count();
        assert!(
            takeaway.ends_with(&format!(
                " {passing} of 120 configurations pass every gate."
            )),
            "{takeaway}"
        );
    }

    /// The rows of a table of the display, by its id.
    fn rows_of<'a>(display: &'a PlanDisplay, id: &str) -> &'a [Row] {
        let parts = display.parts.iter().flat_map(|p| &p.blocks);
        let tables = std::iter::once(&display.sweep_table).chain(parts.filter_map(|b| match b {
            Block::Table(t) => Some(t),
            Block::Timeline(c) => Some(&c.table),
            _ => None,
        }));
        let found: Vec<&Table> = tables.filter(|t| t.id.as_deref() == Some(id)).collect();
        assert_eq!(found.len(), 1, "{id}");
        &found[0].rows
    }

    /// The default form, through the worker's whole path: every table the page renders, each
    /// with the rows the report holds (counted from the report itself), a number's full value
    /// in each numeric cell, progress to the last configuration, and the released
    /// configuration as a known-good plan that a later plan degrades to.
    #[test]
    fn the_display_has_every_table_the_page_renders_with_the_reports_rows() {
        let pairs: Vec<(String, String)> = CapacityForm::default()
            .to_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let mut reports = Vec::new();
        let display =
            plan_display(&pairs, None, &mut |done, total| reports.push((done, total))).unwrap();
        let report = plan(&CapacityForm::default(), None).unwrap().report;
        assert_eq!(reports.len(), report.sweep.len());
        assert_eq!(reports.last(), Some(&(120, 120)));

        let m = &report.chosen.metrics;
        let c = &report.contract;
        for (id, rows) in [
            ("cap-sweep-table", report.sweep.len()),
            (
                "cap-contract-table",
                3 + c.slices.len() + 1 + c.quality_floors.len() + 1,
            ),
            ("cap-latency-table", 1 + m.by_slice.len()),
            ("cap-bottleneck-table", 5),
            ("cap-quality-table", report.quality.len()),
            ("cap-cost-table", 7),
            ("cap-playbook-table", report.playbook.len()),
        ] {
            assert_eq!(rows_of(&display, id).len(), rows, "{id}");
        }
        assert_eq!(display.configurations, 120);
        assert_eq!(display.sweep_table.headers.len(), 12);
        for (row, source) in display.sweep_table.rows.iter().zip(&report.sweep) {
            assert_eq!(row.cells.len(), 11);
            assert!(row.header.starts_with(&source.label), "{}", row.header);
            let tokens = row.cells[5].value.as_deref().unwrap();
            assert_eq!(tokens.parse::<f64>(), Ok(source.output_tokens_per_s));
        }
        let latency = rows_of(&display, "cap-latency-table");
        assert_eq!(latency[0].header, m.all.slice);
        assert_eq!(
            latency[0].cells[2].value.as_deref().unwrap().parse::<f64>(),
            Ok(m.all.ttft.p99)
        );

        assert_eq!(display.kind, "release");
        assert!(
            display.verdict.starts_with("Release: "),
            "{}",
            display.verdict
        );
        assert_eq!(display.chart.points.iter().filter(|p| p.chosen).count(), 1);
        assert_eq!(display.markdown.text, report.to_markdown());
        assert_eq!(display.json.text, report.to_json());
        let released = display.released.clone().unwrap();
        assert_eq!(
            NamedPolicy::from_known_good_json(&released).ok(),
            known_good(&report)
        );
        // What crosses to the page reads back as it was sent; the parts cross as markup.
        let text = serde_json::to_string(&display).unwrap();
        let crossed = PlanDisplay {
            parts: Vec::new(),
            ..display.clone()
        };
        assert_eq!(serde_json::from_str::<PlanDisplay>(&text).unwrap(), crossed);
        assert_eq!(display.parts_html, html(&display.parts));

        // An SLO nothing meets degrades to the configuration released above.
        let strict: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| match k.as_str() {
                "cap_ttft" => (k.clone(), "0.001".to_string()),
                "cap_n" => (k.clone(), "300".to_string()),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let degraded = plan_display(&strict, Some(&released), &mut |_, _| {}).unwrap();
        assert_eq!(degraded.kind, "degrade-to-last-known-good");
        assert!(degraded.released.is_none());
        assert!(degraded.chart.curve.is_empty());
        assert!(!degraded.failed_gates.is_empty());
    }

    /// A plan on two fleets with prefix caches, speculating, and a canary: the sweep table
    /// gains the fleet's columns, and the speculation, playbook and rollout tables hold the
    /// report's rows; the timeline's points and marked window are the report's windows.
    #[test]
    fn fleets_speculation_the_playbook_and_the_rollout_are_the_reports_rows() {
        let form = CapacityForm {
            trace: "chat-prefix".into(),
            requests: "400".into(),
            loads: "1".into(),
            batchings: "continuous".into(),
            max_sequences: "16".into(),
            replicas: "1, 2".into(),
            routers: "round-robin, kv-aware".into(),
            prefix_cache: "on".into(),
            speculative_k: "2".into(),
            decoding: "temperature-0.7".into(),
            lengths: "policy".into(),
            canary: "0.2".into(),
            detector_windows: "4".into(),
            ttft_ms: "1000".into(),
            tpot_ms: "1000".into(),
            floor_pct: "50".into(),
            ..CapacityForm::default()
        };
        let pairs: Vec<(String, String)> = form
            .to_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let display = plan_display(&pairs, None, &mut |_, _| {}).unwrap();
        let report = plan(&form, None).unwrap().report;
        assert_eq!(display.kind, "release", "{}", display.reason);

        // 2 weight paths × (1 + 2 routers at 2 replicas) fleets × with and without k.
        assert_eq!(report.sweep.len(), 2 * 3 * 2);
        let sweep = &display.sweep_table;
        assert_eq!(sweep.headers.len(), 16);
        assert_eq!(
            &sweep.headers[1..5],
            ["Replicas", "Router", "Prefix hits", "Rejected"]
        );
        for (row, r) in sweep.rows.iter().zip(&report.sweep) {
            assert_eq!(row.cells.len(), 15);
            assert!(row.header.starts_with(&r.label), "{}", row.header);
            assert_eq!(
                row.cells[0].value.as_deref(),
                Some(r.replicas.to_string().as_str())
            );
            assert_eq!(row.cells[1].text, r.router);
            let hits = row.cells[2].value.as_deref().unwrap().parse::<f64>();
            assert_eq!(hits, Ok(r.prefix_cache_hit_rate));
            assert_eq!(
                row.cells[3].value.as_deref(),
                Some(r.rejected.to_string().as_str())
            );
            let tokens = row.cells[9].value.as_deref().unwrap().parse::<f64>();
            assert_eq!(tokens, Ok(r.output_tokens_per_s));
        }
        assert!(report.sweep.iter().any(|r| r.prefix_cache_hit_rate > 0.0));

        let spec = report.contract.speculation.as_ref().unwrap();
        let rows = rows_of(&display, "cap-speculation-table");
        assert_eq!(rows.len(), spec.acceptance.len());
        assert_eq!(rows.len(), 3 * 2, "three policies, two slices");
        assert_eq!(rows[0].header, "temperature 0.7", "the plan's policy first");
        for (row, a) in rows.iter().zip(&spec.acceptance) {
            assert_eq!((&row.header, &row.cells[0].text), (&a.policy, &a.slice));
            let alpha = row.cells[1].value.as_deref().unwrap().parse::<f64>();
            assert_eq!(alpha, Ok(a.acceptance_rate));
            let e = row.cells[2].value.as_deref().unwrap().parse::<f64>();
            assert_eq!(e, Ok(a.expected_tokens_per_step));
        }

        let lengths = report.contract.lengths.as_ref().unwrap();
        assert_eq!(lengths.decoding, "temperature 0.7");
        let rows = rows_of(&display, "cap-lengths-table");
        assert_eq!(rows.len(), 2, "one row per slice");
        for (row, sl) in rows.iter().zip(&lengths.slices) {
            assert_eq!(row.header, sl.slice);
            let number = |i: usize| row.cells[i].value.as_deref().unwrap().parse::<f64>();
            assert_eq!(number(0), Ok(sl.runs as f64));
            assert_eq!(number(1), Ok(sl.eos_share));
            assert_eq!(number(2), Ok(sl.mean_budget_share));
            assert_eq!(number(3), Ok(sl.mean_budget_tokens));
            assert_eq!(number(4), Ok(sl.mean_output_tokens));
            assert!(
                sl.mean_output_tokens < sl.mean_budget_tokens,
                "sampling stops early"
            );
        }

        let playbook = rows_of(&display, "cap-playbook-table");
        assert_eq!(playbook.len(), report.playbook.len());
        assert_eq!(
            playbook.len(),
            report.chosen.gates.len(),
            "one detector per gate"
        );
        for (row, p) in playbook.iter().zip(&report.playbook) {
            assert_eq!(row.header, p.detector);
            let cells: Vec<&str> = row.cells.iter().map(|c| c.text.as_str()).collect();
            assert_eq!(cells, [&p.owner, &p.mitigation, &p.stop_condition]);
        }

        let r = report.rollout.as_ref().unwrap();
        let windows = rows_of(&display, "cap-rollout-table");
        assert_eq!(windows.len(), r.timeline.len());
        for (row, w) in windows.iter().zip(&r.timeline) {
            let requests = row.cells[0].value.as_deref().unwrap().parse::<u64>();
            assert_eq!(requests, Ok(w.canary_requests));
            if w.canary_requests > 0 {
                let p99 = row.cells[1].value.as_deref().unwrap().parse::<f64>();
                assert_eq!(p99, Ok(w.canary_ttft_p99_s));
            }
        }
        let chart = display
            .parts
            .iter()
            .flat_map(|p| &p.blocks)
            .find_map(|b| match b {
                Block::Timeline(c) => Some(c),
                _ => None,
            })
            .unwrap();
        let measured = r.timeline.iter().filter(|w| w.canary_requests > 0).count();
        assert_eq!(chart.points.len(), measured);
        assert_eq!(chart.lines.iter().map(Vec::len).sum::<usize>(), measured);
        assert_eq!(chart.marked.is_some(), r.detected_at_s.is_some());
        let words = rollout_words(r);
        assert!(
            words.contains(if r.stop_condition_fired {
                "Stopped: "
            } else {
                "Completed: "
            }),
            "{words}"
        );
        for (slice, missed, of) in &r.missed_by_slice {
            assert!(
                words.contains(&format!("{slice} {missed} of {of}")),
                "{words}"
            );
        }
    }

    /// A canary meeting harder traffic than the plan's stops, and the chart marks the window
    /// whose end is the detection time.
    #[test]
    fn a_stopped_canary_marks_its_detection_window() {
        let report = plan(
            &CapacityForm {
                canary: "0.5".into(),
                rollout_trace: "chat-prefix".into(),
                detector_windows: "10".into(),
                ..CapacityForm::default()
            },
            None,
        )
        .unwrap()
        .report;
        let r = report.rollout.as_ref().unwrap();
        let chart = rollout_chart(r, report.contract.slo.ttft_p99_s);
        // The chat-prefix trace's longer prompts breach the TTFT SLO the plan's own trace met.
        let (Some(t), Some(i)) = (r.detected_at_s, detection_window(r)) else {
            panic!("the canary should stop: {}", rollout_words(r));
        };
        assert!(r.stop_condition_fired);
        assert_eq!(r.timeline[i].end_s, t);
        let (from, to, _) = chart.marked.clone().unwrap();
        assert!(from < to && to <= chart.width - chart.right + 1e-9);
        let shaded: Vec<usize> = chart
            .table
            .rows
            .iter()
            .enumerate()
            .filter(|(_, row)| row.class.as_deref() == Some("cap-detected-row"))
            .map(|(j, _)| j)
            .collect();
        assert_eq!(shaded, [i]);
        let words = rollout_words(r);
        assert!(words.contains("Stopped: the detector fired"), "{words}");
        assert!(words.contains(r.detector.as_deref().unwrap()), "{words}");
    }

    /// The worker's answer to a form the check refuses is the check's problems, and a
    /// known-good text that does not read is a problem of the Plan button.
    #[test]
    fn a_bad_form_or_known_good_is_a_problem_at_its_field() {
        let pairs = [("cap_rate", "fast"), ("cap_loads", "1, 0")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let (form, _) =
            CapacityForm::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let problems = plan_display(&pairs, None, &mut |_, _| {}).unwrap_err();
        assert_eq!(problems, form.check().unwrap_err());
        assert_eq!(plan(&form, None).unwrap_err(), problems);
        let fields: Vec<_> = named(&problems).into_iter().map(|p| p.0).collect();
        assert_eq!(fields, ["cap-rate", "cap-loads"]);

        let unknown = [("cap_hw".to_string(), "tpu".to_string())];
        let e = plan_display(&unknown, None, &mut |_, _| {}).unwrap_err();
        assert_eq!(named(&e)[0].0, "cap-hw");

        let e = plan_display(&[], Some("{not json"), &mut |_, _| {}).unwrap_err();
        let [(field, message)] = named(&e)[..] else {
            panic!("{e:?}");
        };
        assert_eq!(field, PLAN_ID);
        assert!(message.starts_with("The plan cannot run: "), "{message}");
    }
}
