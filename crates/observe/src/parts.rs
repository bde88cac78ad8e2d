//! The report of an observation as [`report`] parts, for every reader: the versions ×
//! slices table, p99 TTFT and the outcome rate per version and slice as charts with their
//! tables, the drift against the baseline with its detectors and the rollback target, input
//! quality and predictions, and the rejected lines. `decode-lab observe` writes them as
//! Markdown; the lab's observation worker writes them as the Observe panel's HTML.

use report::{Block, Cell, Frame, IntervalChart, IntervalPoint, Part, Row, Table};

use crate::table::{rate, rows, COLUMNS};
use crate::{Report, Summary};

/// The report's parts; the rejected lines' only when some were.
pub fn parts(report: &Report) -> Vec<Part> {
    let mut parts = vec![
        versions_part(report),
        ttft_part(report),
        outcome_part(report),
        drift_part(report),
        inputs_part(report),
    ];
    if report.rejected_count > 0 {
        parts.push(rejected_part(report));
    }
    if report.duplicate_count > 0
        || report.runs_after_as_of > 0
        || report.outcomes_unmatched > 0
        || report.outcomes_late > 0
    {
        parts.push(left_out_part(report));
    }
    parts
}

/// What was read, in a sentence: "59 runs in 3 versions; 1 lines rejected."
pub fn summary(report: &Report) -> String {
    format!(
        "{} runs in {} versions; {} lines rejected{}.",
        report.runs,
        report.versions.len(),
        report.rejected_count,
        if report.duplicate_count > 0 {
            format!("; {} repeated lines counted once", report.duplicate_count)
        } else {
            String::new()
        }
    )
}

fn part(id: &str, title: &str, blocks: Vec<Block>) -> Part {
    Part {
        id: id.into(),
        title: title.into(),
        blocks,
    }
}

fn versions_part(report: &Report) -> Part {
    let rows = rows(report).iter().map(|r| Row::texts(r)).collect();
    part(
        "obs-part-versions",
        "Versions and slices",
        vec![Block::Table(Table::mirror(
            "obs-versions-table",
            "Each version, then each of its slices: service health and mature outcomes (nearest-rank percentiles; Wilson 95 % intervals)",
            &COLUMNS,
            rows,
        ))],
    )
}

/// Every (version, slice) group, the version's whole first: its label and summary.
fn groups(report: &Report) -> Vec<(String, String, &Summary)> {
    report
        .versions
        .iter()
        .flat_map(|v| {
            std::iter::once(("all".to_string(), &v.summary))
                .chain(v.slices.iter().map(|s| (s.slice.clone(), &s.summary)))
                .map(move |(slice, s)| (v.version_id.clone(), slice, s))
        })
        .collect()
}

/// Whether the detector named `detector` fired on `slice` of `version`.
fn breached(report: &Report, version: &str, slice: &str, detector: &str) -> bool {
    report.drift.as_ref().is_some_and(|d| {
        d.candidates
            .iter()
            .filter(|c| c.version_id == version)
            .flat_map(|c| std::iter::once(&c.aggregate).chain(&c.slices))
            .filter(|s| s.slice == slice)
            .flat_map(|s| &s.breaches)
            .any(|b| b.detector == detector)
    })
}

const FRAME: Frame = Frame {
    width: 640.0,
    height: 240.0,
    left: 56.0,
    right: 16.0,
    top: 12.0,
    bottom: 36.0,
};

/// A round top for an axis from 0 that holds `max`, and its ticks: 1, 2 or 5 times a power
/// of ten, four or five steps.
pub fn axis(max: f64) -> (f64, Vec<f64>) {
    if max.is_nan() || max <= 0.0 || max.is_infinite() {
        return (1.0, vec![0.0, 0.5, 1.0]);
    }
    let rough = max / 4.0;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| s * 4.0 >= max)
        .unwrap_or(10.0 * power);
    let n = (max / step).ceil().max(1.0) as usize;
    (step * n as f64, (0..=n).map(|i| step * i as f64).collect())
}

/// A group's (version, slice, value, interval, value in words, whether a detector fired).
type Point = (String, String, f64, Option<(f64, f64)>, String, bool);

/// One value per group (with its interval), on an axis from 0 to the largest end.
struct Series {
    id: &'static str,
    caption: &'static str,
    y_label: &'static str,
    points: Vec<Point>,
    scale: f64,
    unit: &'static str,
    legend: &'static str,
    headers: [&'static str; 4],
}

fn interval_chart(s: Series) -> IntervalChart {
    let max = s
        .points
        .iter()
        .map(|p| p.3.map_or(p.2, |(_, hi)| hi.max(p.2)))
        .fold(0.0, f64::max);
    let (top, ticks) = axis(max * s.scale);
    let ((x0, x1), (y0, y1)) = (FRAME.x_span(), FRAME.y_span());
    // Enough decimals to tell the ticks apart: none from a step of 1 up.
    let step = ticks.get(1).copied().unwrap_or(1.0);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let y = |v: f64| y1 - (v * s.scale / top) * (y1 - y0);
    let step = (x1 - x0) / s.points.len().max(1) as f64;
    let points: Vec<IntervalPoint> = s
        .points
        .iter()
        .enumerate()
        .map(
            |(i, (version, slice, value, interval, words, flagged))| IntervalPoint {
                x: x0 + step * (i as f64 + 0.5),
                y: y(*value),
                value: *value,
                interval: interval.map(|(lo, hi)| (y(lo), y(hi))),
                label: format!("{} {slice}", &version[..version.len().min(6)]),
                title: format!("{version} {slice}: {words}"),
                flagged: *flagged,
            },
        )
        .collect();
    let rows = s
        .points
        .iter()
        .map(|(version, slice, value, _, words, flagged)| Row {
            class: flagged.then(|| "breach".to_string()),
            header: version.clone(),
            cells: vec![
                Cell::text(slice.clone()),
                Cell::number(words.clone(), value * s.scale),
                Cell::text(if *flagged { "breached" } else { "" }),
            ],
        })
        .collect();
    let by_value = |a: &&Point, b: &&Point| a.2.total_cmp(&b.2);
    let (low, high) = (
        s.points.iter().min_by(by_value),
        s.points.iter().max_by(by_value),
    );
    let flagged: Vec<String> = s
        .points
        .iter()
        .filter(|p| p.5)
        .map(|p| format!("{} {}", p.0, p.1))
        .collect();
    let summary = match (low, high) {
        // Short sentences, so that the takeaway reads at grade 9 or below.
        (Some(l), Some(h)) => format!(
            "{} for {} groups. The lowest is {}, for {} {}. The highest is {}, for {} {}.{}",
            s.caption,
            s.points.len(),
            l.4,
            l.0,
            l.1,
            h.4,
            h.0,
            h.1,
            match flagged.as_slice() {
                [] => " No group breached.".to_string(),
                [one] => format!(" {one} breached."),
                many => format!(" {} groups breached: {}.", many.len(), many.join(", ")),
            }
        ),
        _ => format!("{}: nothing to show.", s.caption),
    };
    IntervalChart {
        frame: FRAME,
        caption: s.caption.to_string(),
        summary,
        y_label: s.y_label.to_string(),
        y_ticks: ticks
            .iter()
            .map(|t| {
                (
                    y1 - t / top * (y1 - y0),
                    format!("{t:.decimals$}{}", s.unit),
                )
            })
            .collect(),
        points,
        legend: s.legend.to_string(),
        table: Table::mirror(s.id, s.caption, &s.headers, rows),
    }
}

fn ttft_part(report: &Report) -> Part {
    let points = groups(report)
        .into_iter()
        .filter_map(|(version, slice, s)| {
            let p99 = s.ttft_p99_ms?;
            let flagged = breached(report, &version, &slice, crate::LATENCY_DETECTOR);
            Some((version, slice, p99, None, format!("{p99:.2} ms"), flagged))
        })
        .collect();
    part(
        "obs-part-ttft",
        "Time to first token",
        vec![Block::Intervals(Box::new(interval_chart(Series {
            id: "obs-ttft-table",
            caption: "p99 time to first token per version and slice",
            y_label: "p99 TTFT (ms)",
            points,
            scale: 1.0,
            unit: "",
            legend: "● a version's p99 TTFT on all its runs and on each slice; × in red: the p99 TTFT detector fired there.",
            headers: ["version", "slice", "p99 TTFT", "detector"],
        })))],
    )
}

fn outcome_part(report: &Report) -> Part {
    let points = groups(report)
        .into_iter()
        .filter_map(|(version, slice, s)| {
            let o = &s.outcomes;
            let value = o.rate?;
            let flagged = breached(report, &version, &slice, "outcome rate");
            let words = format!("{} of {} joined", rate(o.rate, o.rate_95), o.joined);
            Some((version, slice, value, o.rate_95, words, flagged))
        })
        .collect();
    part(
        "obs-part-outcomes",
        "Mature outcomes",
        vec![Block::Intervals(Box::new(interval_chart(Series {
            id: "obs-outcomes-table",
            caption: "Outcome rate per version and slice, with its 95 % interval",
            y_label: "accepted (%)",
            points,
            scale: 100.0,
            unit: " %",
            legend: "● the share of joined outcomes accepted; line: its 95 % Wilson interval; × in red: the outcome detector fired there.",
            headers: ["version", "slice", "outcome rate (95 %)", "detector"],
        })))],
    )
}

fn drift_part(report: &Report) -> Part {
    let Some(drift) = &report.drift else {
        return part(
            "obs-part-drift",
            "Drift and verdict",
            vec![Block::Text(
                "Choose a baseline version to compare the others with it, slice by slice.".into(),
            )],
        );
    };
    let mut blocks = Vec::new();
    for c in &drift.candidates {
        blocks.push(Block::Text(format!(
            "{}: {}",
            c.version_id, c.verdict.words
        )));
        let rows = std::iter::once(&c.aggregate)
            .chain(&c.slices)
            .map(|s| {
                let diff = s.outcome_rate_diff.map_or("–".to_string(), |d| {
                    let interval = s.outcome_rate_diff_95.map_or(String::new(), |(lo, hi)| {
                        format!(" ({:+.1} to {:+.1})", 100.0 * lo, 100.0 * hi)
                    });
                    format!("{:+.1} points{interval}", 100.0 * d)
                });
                let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
                let psi = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
                let breaches: Vec<&str> = s.breaches.iter().map(|b| b.detector.as_str()).collect();
                Row {
                    class: (!s.breaches.is_empty()).then(|| "breach".to_string()),
                    header: s.slice.clone(),
                    cells: vec![
                        Cell::text(format!("{} / {}", s.runs, s.baseline_runs)),
                        Cell::text(diff),
                        Cell::text(format!(
                            "{} / {}",
                            ms(s.ttft_p99_ms),
                            ms(s.baseline_ttft_p99_ms)
                        )),
                        Cell::text(format!(
                            "{} / {} / {}",
                            psi(s.psi_entropy),
                            psi(s.psi_output_tokens),
                            psi(s.psi_ttft)
                        )),
                        Cell::text(if breaches.is_empty() {
                            "none".to_string()
                        } else {
                            breaches.join(", ")
                        }),
                    ],
                }
            })
            .collect();
        blocks.push(Block::Table(Table::mirror(
            &format!("obs-drift-{}", c.version_id),
            format!("{} against {}, per slice", c.version_id, drift.baseline),
            &[
                "slice",
                "runs (candidate / baseline)",
                "outcome rate difference (95 %)",
                "p99 TTFT ms (candidate / baseline)",
                "PSI entropy / output length / TTFT",
                "breached",
            ],
            rows,
        )));
    }
    let detectors = drift
        .detectors
        .iter()
        .map(|d| {
            Row::texts(&[
                d.name.clone(),
                d.threshold.clone(),
                d.owner.clone(),
                d.mitigation.clone(),
                d.stop_condition.clone(),
            ])
        })
        .collect();
    blocks.push(Block::Table(Table::mirror(
        "obs-detectors",
        "The playbook: each detector, its threshold, owner, mitigation and stop condition",
        &[
            "detector",
            "threshold",
            "owner",
            "mitigation",
            "stop condition",
        ],
        detectors,
    )));
    part(
        "obs-part-drift",
        &format!("Drift against the baseline {}", drift.baseline),
        blocks,
    )
}

fn inputs_part(report: &Report) -> Part {
    let rows = groups(report)
        .into_iter()
        .map(|(version, slice, s)| {
            let f = |v: Option<f64>, d: usize| v.map_or("–".to_string(), |v| format!("{v:.d$}"));
            let stops: Vec<String> = s
                .predictions
                .stop_reasons
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect();
            Row::texts(&[
                version,
                slice,
                f(s.input.mean_prompt_bytes, 1),
                f(s.input.bytes_per_token, 2),
                f(s.input.unseen_byte_share.map(|u| 100.0 * u), 1),
                f(s.predictions.mean_survivors, 1),
                stops.join(", "),
            ])
        })
        .collect();
    part(
        "obs-part-inputs",
        "Input quality and predictions",
        vec![Block::Table(Table::mirror(
            "obs-inputs-table",
            "Prompts and what the policy did with them, per version and slice",
            &[
                "version",
                "slice",
                "prompt bytes (mean)",
                "bytes per token",
                "unseen bytes (%)",
                "survivors per step (mean)",
                "stop reasons",
            ],
            rows,
        ))],
    )
}

fn rejected_part(report: &Report) -> Part {
    let rows = report
        .rejected
        .iter()
        .map(|r| Row::texts(&[r.source.clone(), r.line.to_string(), r.reason.clone()]))
        .collect();
    part(
        "obs-part-rejected",
        "Rejected lines",
        vec![
            Block::Text(format!(
                "{} lines were not counted: each is listed with its reason{}.",
                report.rejected_count,
                if report.rejected_count > report.rejected.len() as u64 {
                    format!(" (the first {})", report.rejected.len())
                } else {
                    String::new()
                }
            )),
            Block::Table(Table::mirror(
                "obs-rejected-table",
                "Lines that are not a run record whose digest and ids check",
                &["file", "line", "reason"],
                rows,
            )),
        ],
    )
}

/// What was read but not counted, that is no error: a run's line repeated (counted once),
/// runs after the cut-off, outcomes that match no run or came after the cut-off.
fn left_out_part(report: &Report) -> Part {
    let mut blocks = Vec::new();
    let said = [
        (
            report.duplicate_count,
            "lines repeat a run already read, each counted once",
        ),
        (
            report.runs_after_as_of,
            "runs arrived after the cut-off and are left out",
        ),
        (report.outcomes_unmatched, "outcomes match no run"),
        (
            report.outcomes_late,
            "outcomes arrived after the cut-off and are left out",
        ),
    ];
    for (count, what) in said.into_iter().filter(|(count, _)| *count > 0) {
        blocks.push(Block::Text(format!("{count} {what}.")));
    }
    if !report.duplicates.is_empty() {
        blocks.push(Block::List {
            class: "obs-duplicates".into(),
            items: report
                .duplicates
                .iter()
                .map(|d| {
                    format!(
                        "{} line {} is run {} of {} line {}.",
                        d.source, d.line, d.run_id, d.first_source, d.first_line
                    )
                })
                .collect(),
        });
    }
    part("obs-part-left-out", "Read but not counted", blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: the top is the first multiple of 1, 2 or 5 × 10^k, four steps or
    /// more, that holds the largest value.
    #[test]
    fn the_axis_is_round_and_holds_the_largest_value() {
        assert_eq!(axis(5.77), (6.0, vec![0.0, 2.0, 4.0, 6.0]));
        assert_eq!(axis(32.1), (40.0, vec![0.0, 10.0, 20.0, 30.0, 40.0]));
        assert_eq!(axis(0.0).0, 1.0);
        for max in [0.003, 0.7, 1.0, 9.99, 123.0, 4_567.0] {
            let (top, ticks) = axis(max);
            assert!(top >= max && top <= 2.5 * max, "{max}: {top}");
            assert!((2..=6).contains(&ticks.len()), "{max}: {ticks:?}");
        }
    }
}
