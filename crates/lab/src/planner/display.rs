//! The capacity planner's work, in its worker (built with the `planner` feature only, so the
//! page's wasm links none of it): the form's pairs check into a plan's inputs,
//! [`capacity::Plan::run_with_progress`] sweeps and decides, and the report becomes a
//! [`PlanDisplay`]: the decision in words, the markup of the sweep chart and of the report's
//! parts, and its two downloads. [`plan_display`] is that whole path. The report's content
//! is `capacity`'s ([`PlanReport::parts`], the same parts its Markdown writes); here
//! [`view`] places the sweep in the chart (p99 TTFT on a log scale against tokens/s, the
//! SLO, the released configuration's curve over the loads), and [`display`] draws the
//! pictures around the report's tables: the sweep's table becomes the chart's mirror and the
//! canary's windows its timeline (p99 TTFT per detector window against the SLO, the
//! detection window marked).

use capacity::{
    detection_window, elapsed, figure, rollout_table, seconds, window_name, CapacityError,
    DecisionKind, NamedPolicy, Plan, PlanInputs, PlanReport, RolloutReport, SweepRow,
    ROLLOUT_TABLE_ID, SWEEP_TABLE_ID,
};
use policy::figure_short;
use report::{sentence, Block, ChartPoint, Frame, Table, TimelineChart};

use crate::planner::form::{field, CapacityForm, PLAN_ID};
use crate::planner::protocol::{PlanDisplay, ReportFile, SweepChart};
use crate::widgets::form::{Form, Problems};
use crate::widgets::markup::{escape, figure_html, html, point};

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
    pub frame: Frame,
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

/// The sweep chart's frame; the canary's timeline is as wide and shorter.
pub const SWEEP_FRAME: Frame = Frame {
    width: 560.0,
    height: 300.0,
    left: 64.0,
    right: 16.0,
    top: 12.0,
    bottom: 44.0,
};

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

/// Five ticks on a chart's linear y axis, from 0 to `y_max`, placed by `y_of`.
fn y_ticks(y_max: f64, y_of: impl Fn(f64) -> f64) -> Vec<(f64, String)> {
    (0..=4)
        .map(|i| {
            let v = y_max * i as f64 / 4.0;
            (y_of(v), figure_short(v))
        })
        .collect()
}

/// The chart's rows and frame from a report; the same rows make the table.
pub fn view(report: PlanReport) -> PlanView {
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
    let ((x0, x1), (y0, y1)) = (SWEEP_FRAME.x_span(), SWEEP_FRAME.y_span());
    let (plot_w, plot_h) = (x1 - x0, y1 - y0);
    let x_of = |t: f64| {
        let decade = t.max(10f64.powf(lo)).log10();
        x0 + (decade - lo) / (hi - lo) * plot_w
    };
    let y_of = |v: f64| y1 - v / y_max * plot_h;
    let released = report.decision.kind == DecisionKind::Release;
    let points: Vec<SweepPoint> = report
        .sweep
        .iter()
        .map(|row| SweepPoint {
            chosen: report.is_released(row),
            at: row
                .error
                .is_none()
                .then(|| (x_of(row.ttft_p99_s), y_of(row.output_tokens_per_s))),
            gates: row.gates_text(),
            row: row.clone(),
        })
        .collect();
    let x_ticks = (lo as i32..=hi as i32)
        .map(|d| {
            let t = 10f64.powi(d);
            (x_of(t), seconds(t))
        })
        .collect();
    let y_ticks = y_ticks(y_max, y_of);
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
            frame: SWEEP_FRAME,
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

/// What the page shows of a placed plan: the report's parts, but for the sweep's table,
/// which the page draws under the sweep chart as its mirror, and the canary's windows,
/// drawn as its timeline.
pub fn display(view: &PlanView) -> PlanDisplay {
    let report = &view.report;
    let mut parts = report.parts();
    let mut sweep_table = None;
    for part in &mut parts {
        part.blocks.retain_mut(|block| match block {
            Block::Table(t) if t.id.as_deref() == Some(SWEEP_TABLE_ID) => {
                sweep_table = Some(mirror_of_chart(t.clone()));
                false
            }
            Block::Table(t) if t.id.as_deref() == Some(ROLLOUT_TABLE_ID) => {
                if let Some(r) = &report.rollout {
                    let chart = rollout_chart(r, report.contract.slo.ttft_p99_s);
                    *block = Block::Timeline(Box::new(chart));
                }
                true
            }
            _ => true,
        });
    }
    let sweep_table = sweep_table.unwrap_or_else(|| mirror_of_chart(capacity::sweep_table(report)));
    let chart = sweep_chart(view);
    let d = &report.decision;
    PlanDisplay {
        configurations: view.points.len(),
        kind: view.kind.to_string(),
        verdict: report.verdict(),
        reason: sentence(&d.reason),
        failed_gates: d.failed_gates.iter().map(ToString::to_string).collect(),
        sweep_html: sweep_html(&chart, &sweep_table),
        chart,
        sweep_table,
        parts_html: html(&parts),
        parts,
        markdown: report_file(report, true),
        json: report_file(report, false),
        released: known_good(report).and_then(|k| serde_json::to_string(&k).ok()),
    }
}

/// A table of the report as the mirror of the chart drawn from its rows.
fn mirror_of_chart(mut table: Table) -> Table {
    table.caption += ": the chart's points";
    table
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
        frame: f.frame,
        summary: sweep_takeaway(view, slo, passing),
        x_ticks: f.x_ticks.clone(),
        y_ticks: f.y_ticks.clone(),
        slo_x: f.slo_x,
        slo_label: format!("TTFT SLO {}", seconds(slo)),
        points,
        curve: view.curve.clone(),
    }
}

/// The sweep chart's markup: the scatter of tokens/s against p99 TTFT (log scale), the
/// SLO's line, the released configuration's curve over the loads and a ring round it, and
/// the table whose rows the points are.
fn sweep_html(c: &SweepChart, table: &Table) -> String {
    let ((x0, x1), (y0, y1)) = (c.frame.x_span(), c.frame.y_span());
    let curve: Vec<String> = c
        .curve
        .iter()
        .map(|(x, y)| format!("{x:.2},{y:.2}"))
        .collect();
    let mut inside = format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"axis-label\">p99 time to first token</text>\
         <line x1=\"{slo}\" y1=\"{y0}\" x2=\"{slo}\" y2=\"{y1}\" class=\"cap-slo\"></line>\
         <text x=\"{}\" y=\"{}\" class=\"axis-label\">{}</text>\
         <polyline points=\"{}\" class=\"cap-curve\"></polyline>",
        (x0 + x1) / 2.0,
        c.frame.height - 6.0,
        c.slo_x + 4.0,
        y0 + 10.0,
        escape(&c.slo_label),
        curve.join(" "),
        slo = c.slo_x,
    );
    for p in &c.points {
        inside += &point(p.row, (p.x, p.y, p.value), 3.5, !p.passes, &p.title);
        if p.chosen {
            inside += &format!(
                "<circle cx=\"{}\" cy=\"{}\" r=\"8\" class=\"cap-chosen\"></circle>",
                p.x, p.y
            );
        }
    }
    figure_html(
        "cap-sweep",
        &c.frame,
        "The sweep: output tokens/s against p99 time to first token (log scale)",
        &c.summary,
        &c.x_ticks,
        &c.y_ticks,
        "output tokens/s",
        &inside,
        "● passes every gate; × fails a gate; ring: the released configuration, its line: the same configuration at each load; dashed: the TTFT SLO.",
        table,
    )
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

/// The canary's p99 TTFT per detector window against the SLO, the detection window
/// marked, and the windows as its table.
fn rollout_chart(r: &RolloutReport, slo_s: f64) -> TimelineChart {
    let frame = Frame {
        height: 220.0,
        ..SWEEP_FRAME
    };
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
    let ((x0, x1), (y0, y1)) = (frame.x_span(), frame.y_span());
    let (plot_w, plot_h) = (x1 - x0, y1 - y0);
    let x_of = |t: f64| x0 + (t - r.start_s) / end * plot_w;
    let y_of = |ms: f64| y1 - ms / y_max * plot_h;
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
    let y_ticks = y_ticks(y_max, y_of);
    let marked = detected.map(|i| {
        let w = &r.timeline[i];
        (x_of(w.start_s), x_of(w.end_s), "detected".to_string())
    });
    let breaching = r.timeline.iter().filter(|w| !w.breached.is_empty()).count();
    TimelineChart {
        frame,
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
        table: mirror_of_chart(rollout_table(r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use report::Row;

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
            let f = &f.frame;
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
        let (verdict, reason, failed) = decision_words(&view);
        assert!(verdict.starts_with("Release: "), "{verdict}");
        assert!(reason.ends_with('.') && failed.is_empty(), "{reason}");
        let shown = display(&view);
        let contract: Vec<(String, String)> = rows_of(&shown, "cap-contract-table")
            .iter()
            .map(|r| (r.header.clone(), r.cells[0].text.clone()))
            .collect();
        assert!(
            contract.iter().any(|(k, _)| k == "slice eu"),
            "{contract:?}"
        );
        let shares: f64 = rows_of(&shown, "cap-bottleneck-table")[..4]
            .iter()
            .map(|r| r.cells[0].value.as_deref().unwrap().parse::<f64>().unwrap())
            .sum();
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
        let (verdict, _, failed) = decision_words(&view);
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

    /// The decision as the page shows it: the verdict, the reason and the failed gates.
    fn decision_words(view: &PlanView) -> (String, String, Vec<String>) {
        let shown = display(view);
        (shown.verdict, shown.reason, shown.failed_gates)
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
        // What crosses to the page reads back as it was sent; the chart, its table and the
        // parts cross as markup.
        let text = serde_json::to_string(&display).unwrap();
        let crossed = PlanDisplay {
            parts: Vec::new(),
            chart: SweepChart::default(),
            sweep_table: Table::default(),
            ..display.clone()
        };
        assert_eq!(serde_json::from_str::<PlanDisplay>(&text).unwrap(), crossed);
        assert_eq!(display.parts_html, html(&display.parts));
        for p in &display.chart.points {
            assert!(
                display
                    .sweep_html
                    .contains(&format!("data-point=\"{}\"", p.row)),
                "a mark for row {}",
                p.row
            );
        }
        assert!(display.sweep_html.contains("id=\"cap-sweep-table\""));
        assert_eq!(
            display.sweep_html.matches("class=\"cap-chosen\"").count(),
            1
        );

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
        let words = capacity::rollout_words(r);
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
            panic!("the canary should stop: {}", capacity::rollout_words(r));
        };
        assert!(r.stop_condition_fired);
        assert_eq!(r.timeline[i].end_s, t);
        let (from, to, _) = chart.marked.clone().unwrap();
        assert!(from < to && to <= chart.frame.width - chart.frame.right + 1e-9);
        let shaded: Vec<usize> = chart
            .table
            .rows
            .iter()
            .enumerate()
            .filter(|(_, row)| row.class.as_deref() == Some("cap-detected-row"))
            .map(|(j, _)| j)
            .collect();
        assert_eq!(shaded, [i]);
        let words = capacity::rollout_words(r);
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
