//! Drift of each version against a baseline, slice by slice, and the verdict the playbook
//! draws from it: which detector breached on which slice, who owns it, and the rollback.
//!
//! Detectors (each with its owner, mitigation and stop condition, as the capacity plan's
//! playbook has them):
//! - **outcome rate**: a slice's acceptance rate fell more than
//!   [`DriftRule::max_rate_drop`] below the baseline's, and the fall is significant (the
//!   95 % Newcombe interval of the difference lies below 0). Judged only with at least
//!   [`DriftRule::min_outcomes`] joined outcomes on both sides.
//! - **p99 TTFT**: a slice's p99 time to first token rose more than
//!   [`DriftRule::max_ttft_rise`] (relative) above the baseline's, judged with at least
//!   [`DriftRule::min_runs_for_p99`] runs a side.
//! - **distribution shift** (watched, not stopping: a new version is meant to differ): the
//!   population stability index of per-step entropy, output length or TTFT at or above
//!   [`DriftRule::max_psi`].
//!
//! The aggregate is judged like a slice, so a candidate that improves the aggregate while
//! a rare slice degrades is stopped by the slice, and the verdict says both.

use serde::{Deserialize, Serialize};

use crate::group::{wilson, Summary};
use crate::VersionReport;

/// Thresholds and owners of the detectors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriftRule {
    pub max_rate_drop: f64,
    pub max_ttft_rise: f64,
    pub max_psi: f64,
    pub min_outcomes: u64,
    /// Runs a side before the p99 detector judges: fewer make p99 the maximum of a handful.
    pub min_runs_for_p99: u64,
    pub latency_owner: String,
    pub quality_owner: String,
}

impl Default for DriftRule {
    /// 5 points of outcome rate, 20 % of p99 TTFT, PSI 0.25 (the conventional "large
    /// shift"), 20 outcomes and 100 runs a side; the capacity plan's default owners.
    fn default() -> DriftRule {
        DriftRule {
            max_rate_drop: 0.05,
            max_ttft_rise: 0.2,
            max_psi: 0.25,
            min_outcomes: 20,
            min_runs_for_p99: 100,
            latency_owner: "serving on-call".into(),
            quality_owner: "model quality owner".into(),
        }
    }
}

/// Every candidate against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub baseline: String,
    pub detectors: Vec<Detector>,
    pub candidates: Vec<Candidate>,
}

/// A detector of the playbook.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Detector {
    pub name: String,
    pub threshold: String,
    pub owner: String,
    pub mitigation: String,
    pub stop_condition: String,
}

/// One version against the baseline: the aggregate, each shared slice, and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub version_id: String,
    pub aggregate: SliceDrift,
    pub slices: Vec<SliceDrift>,
    pub verdict: Verdict,
}

/// One slice (or the aggregate, named "all") against the baseline's same slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceDrift {
    pub slice: String,
    pub runs: u64,
    pub baseline_runs: u64,
    pub outcome_rate: Option<f64>,
    pub baseline_outcome_rate: Option<f64>,
    /// Candidate minus baseline, and its 95 % Newcombe (hybrid score) interval.
    pub outcome_rate_diff: Option<f64>,
    pub outcome_rate_diff_95: Option<(f64, f64)>,
    pub ttft_p99_ms: Option<f64>,
    pub baseline_ttft_p99_ms: Option<f64>,
    pub psi_entropy: Option<f64>,
    pub psi_output_tokens: Option<f64>,
    pub psi_ttft: Option<f64>,
    /// Whether both sides had enough joined outcomes for the outcome detector to judge.
    pub outcome_judged: bool,
    pub breaches: Vec<Breach>,
}

/// A detector that fired on a slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Breach {
    pub detector: String,
    pub slice: String,
    /// What was measured and the line it crossed, in words.
    pub measured: String,
    pub owner: String,
    pub mitigation: String,
    /// True for the detectors that stop a rollout; false for those that are watched.
    pub stops: bool,
}

/// What the playbook says of a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `stop`, `continue` or `insufficient-data`.
    pub decision: String,
    /// The version to roll back to when it stops: the baseline, the last known-good.
    pub rollback_to: Option<String>,
    pub words: String,
}

const OUTCOME: &str = "outcome rate";
/// The latency detector's name, as a [`Breach`] gives it.
pub const LATENCY_DETECTOR: &str = "p99 TTFT";
const SHIFT: &str = "distribution shift";

/// Each version but the baseline, against it.
pub(crate) fn compare(baseline: &str, versions: &[VersionReport], rule: &DriftRule) -> Drift {
    let base = versions
        .iter()
        .find(|v| v.version_id == baseline)
        .expect("the caller checked the baseline is observed");
    let stop = "stop the rollout at the first breach on any slice, the aggregate included";
    let detectors = vec![
        Detector {
            name: OUTCOME.into(),
            threshold: format!(
                "falls more than {} points below the baseline's, significantly (95 %), with at least {} outcomes a side",
                points(rule.max_rate_drop),
                rule.min_outcomes
            ),
            owner: rule.quality_owner.clone(),
            mitigation: format!("roll back to {baseline}, the last known-good version"),
            stop_condition: stop.into(),
        },
        Detector {
            name: LATENCY_DETECTOR.into(),
            threshold: format!(
                "rises more than {:.0} % above the baseline's, with at least {} runs a side",
                rule.max_ttft_rise * 100.0,
                rule.min_runs_for_p99
            ),
            owner: rule.latency_owner.clone(),
            mitigation: format!("roll back to {baseline}, or shed load until p99 returns"),
            stop_condition: stop.into(),
        },
        Detector {
            name: SHIFT.into(),
            threshold: format!("PSI of entropy, output length or TTFT at or above {}", rule.max_psi),
            owner: rule.quality_owner.clone(),
            mitigation: "inspect the slice's inputs and outputs; watched, does not stop".into(),
            stop_condition: "none: a new version is meant to differ".into(),
        },
    ];
    let candidates = versions
        .iter()
        .filter(|v| v.version_id != baseline)
        .map(|v| {
            let aggregate = slice_drift("all", &v.summary, &base.summary, rule, &detectors);
            let slices: Vec<SliceDrift> = v
                .slices
                .iter()
                .filter_map(|s| {
                    let b = base.slices.iter().find(|b| b.slice == s.slice)?;
                    Some(slice_drift(
                        &s.slice, &s.summary, &b.summary, rule, &detectors,
                    ))
                })
                .collect();
            let verdict = verdict(baseline, &aggregate, &slices, rule);
            Candidate {
                version_id: v.version_id.clone(),
                aggregate,
                slices,
                verdict,
            }
        })
        .collect();
    Drift {
        baseline: baseline.to_string(),
        detectors,
        candidates,
    }
}

fn points(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

fn signed_points(x: f64) -> String {
    format!(
        "{}{:.1}",
        if x < 0.0 { "−" } else { "+" },
        (x * 100.0).abs()
    )
}

/// The 95 % Newcombe hybrid score interval of p1 − p2 (Newcombe 1998, method 10), from
/// each side's Wilson interval.
pub fn newcombe(k1: u64, n1: u64, k2: u64, n2: u64) -> Option<(f64, f64)> {
    let (l1, u1) = wilson(k1, n1)?;
    let (l2, u2) = wilson(k2, n2)?;
    let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
    let d = p1 - p2;
    Some((
        d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(),
        d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt(),
    ))
}

fn slice_drift(
    slice: &str,
    c: &Summary,
    b: &Summary,
    rule: &DriftRule,
    detectors: &[Detector],
) -> SliceDrift {
    let (co, bo) = (&c.outcomes, &b.outcomes);
    let diff = co.rate.zip(bo.rate).map(|(x, y)| x - y);
    let diff_95 = newcombe(co.accepted, co.joined, bo.accepted, bo.joined);
    let ttft = c.health.ttft_p99_ms.map(|q| q.value);
    let base_ttft = b.health.ttft_p99_ms.map(|q| q.value);
    let (cp, bp) = (&c.predictions, &b.predictions);
    let mut drift = SliceDrift {
        slice: slice.to_string(),
        runs: c.runs,
        baseline_runs: b.runs,
        outcome_rate: co.rate,
        baseline_outcome_rate: bo.rate,
        outcome_rate_diff: diff,
        outcome_rate_diff_95: diff_95,
        ttft_p99_ms: ttft,
        baseline_ttft_p99_ms: base_ttft,
        psi_entropy: cp.entropy_nats.psi(&bp.entropy_nats),
        psi_output_tokens: cp.output_tokens.psi(&bp.output_tokens),
        psi_ttft: cp.ttft_ms.psi(&bp.ttft_ms),
        outcome_judged: co.joined >= rule.min_outcomes && bo.joined >= rule.min_outcomes,
        breaches: Vec::new(),
    };
    let breach = |d: &Detector, measured: String, stops: bool| Breach {
        detector: d.name.clone(),
        slice: slice.to_string(),
        measured,
        owner: d.owner.clone(),
        mitigation: d.mitigation.clone(),
        stops,
    };
    if let (true, Some(d), Some((_, hi))) = (drift.outcome_judged, diff, diff_95) {
        if d < -rule.max_rate_drop && hi < 0.0 {
            drift.breaches.push(breach(
                &detectors[0],
                format!(
                    "outcome rate {} points (95 %: {} to {}), past −{}",
                    signed_points(d),
                    signed_points(diff_95.map_or(d, |i| i.0)),
                    signed_points(hi),
                    points(rule.max_rate_drop)
                ),
                true,
            ));
        }
    }
    let p99_judged = c.runs >= rule.min_runs_for_p99 && b.runs >= rule.min_runs_for_p99;
    if let (true, Some(t), Some(bt)) = (p99_judged, ttft, base_ttft) {
        if bt > 0.0 && t > bt * (1.0 + rule.max_ttft_rise) {
            drift.breaches.push(breach(
                &detectors[1],
                format!(
                    "p99 TTFT {t:.3} ms against {bt:.3} ms ({:+.0} %), past +{:.0} %",
                    (t / bt - 1.0) * 100.0,
                    rule.max_ttft_rise * 100.0
                ),
                true,
            ));
        }
    }
    for (what, psi) in [
        ("entropy", drift.psi_entropy),
        ("output length", drift.psi_output_tokens),
        ("TTFT", drift.psi_ttft),
    ] {
        if let Some(psi) = psi.filter(|p| *p >= rule.max_psi) {
            drift.breaches.push(breach(
                &detectors[2],
                format!("PSI of {what} {psi:.3}, at or above {}", rule.max_psi),
                false,
            ));
        }
    }
    drift
}

fn verdict(
    baseline: &str,
    aggregate: &SliceDrift,
    slices: &[SliceDrift],
    rule: &DriftRule,
) -> Verdict {
    let judged: Vec<&SliceDrift> = std::iter::once(aggregate).chain(slices).collect();
    let rates: Vec<String> = judged
        .iter()
        .filter_map(|s| {
            s.outcome_rate_diff
                .map(|d| format!("{} {}", label(&s.slice), signed_points(d)))
        })
        .collect();
    let stops: Vec<&Breach> = judged
        .iter()
        .flat_map(|s| &s.breaches)
        .filter(|b| b.stops)
        .collect();
    let thin: Vec<String> = judged
        .iter()
        .filter(|s| !s.outcome_judged)
        .map(|s| label(&s.slice).to_string())
        .collect();
    let rates = if rates.is_empty() {
        "no outcomes to compare".to_string()
    } else {
        format!("outcome rate {} points", rates.join(", "))
    };
    if !stops.is_empty() {
        let named: Vec<String> = stops
            .iter()
            .map(|b| {
                format!(
                    "{} on {} ({}; owner: {})",
                    b.detector,
                    label(&b.slice),
                    b.measured,
                    b.owner
                )
            })
            .collect();
        return Verdict {
            decision: "stop".into(),
            rollback_to: Some(baseline.to_string()),
            words: format!(
                "{rates}: stop. Breached: {}. Roll back to {baseline}, the last known-good version.",
                named.join("; ")
            ),
        };
    }
    let unjudged = if thin.is_empty() {
        String::new()
    } else {
        format!(
            " Too few outcomes to judge {} (at least {} a side).",
            thin.join(", "),
            rule.min_outcomes
        )
    };
    if thin.len() == judged.len() {
        return Verdict {
            decision: "insufficient-data".into(),
            rollback_to: None,
            words: format!(
                "{rates}: nothing judged yet.{unjudged} Keep the canary small and wait."
            ),
        };
    }
    Verdict {
        decision: "continue".into(),
        rollback_to: None,
        words: format!("{rates}: no stopping detector breached; continue.{unjudged}"),
    }
}

/// "aggregate" for the whole version, else the slice's name.
fn label(slice: &str) -> &str {
    if slice == "all" {
        "aggregate"
    } else {
        slice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newcombe_matches_the_published_example() {
        // Newcombe (1998), table II, example (a): 56/70 against 48/80, hybrid score
        // interval 0.0524 to 0.3339.
        let (lo, hi) = newcombe(56, 70, 48, 80).unwrap();
        assert!(
            (lo - 0.0524).abs() < 5e-5 && (hi - 0.3339).abs() < 5e-5,
            "{lo} {hi}"
        );
    }
}
