//! The failure playbook and a rollout that can be stopped.
//!
//! The chapter's failure mode: pushing aggregate tokens/s hurts p99 TTFT and the
//! rare-language slice. The playbook turns every gate of the shipped configuration into a
//! detector (metric, threshold, window), an owner (a role the inputs name), a mitigation
//! and a stop condition. The rollout simulates the release as a canary: from `t0` the
//! candidate serves a share of the requests, a detector evaluates each gate over tumbling
//! windows of first-token times, and when one is breached the canary's traffic returns to
//! the fallback (the last known-good, else the named baseline) after the mitigation delay.
//!
//! Both sides serve the rollout trace at the candidate's planned load (each simulated on
//! the whole trace; the canary is a seeded sample of its requests), so the detector sees
//! the candidate's latencies under the per-replica load it was sized for, and the
//! requests after the stop get the fallback's. A window judges a slice only when it holds
//! at least [`MIN_SAMPLES`] of its requests: a p99 of three requests is their maximum.

use policy::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::error::{in_range, CapacityError};
use crate::figures::figure;
use crate::gates::{Gate, GateResult};
use crate::metrics::Percentiles;
use crate::sim::{SimOutcome, Slo};
use crate::trace::Trace;

/// The fewest requests of a slice in a window for its detector to judge it.
pub const MIN_SAMPLES: usize = 10;

/// A slice with less than this share of the traffic is the rare slice a replica can be
/// reserved for.
const RARE_SHARE: f64 = 0.1;

/// The seed of the canary's sample of requests.
const CANARY_SEED: u64 = 0xCA9A_121E;

/// Who owns each kind of gate: roles, not people.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Owners {
    pub latency: String,
    pub quality: String,
}

impl Owners {
    /// The longest role a playbook names: a role, not a paragraph.
    pub const MAX_ROLE_CHARS: usize = 80;

    /// Each role named, in 1 to [`Owners::MAX_ROLE_CHARS`] characters.
    pub fn validate(&self) -> Result<(), CapacityError> {
        for (gate, role) in [("latency", &self.latency), ("quality", &self.quality)] {
            let chars = role.trim().chars().count();
            if chars == 0 || chars > Owners::MAX_ROLE_CHARS {
                return Err(CapacityError::Owner {
                    gate,
                    role: role.clone(),
                });
            }
        }
        Ok(())
    }
}

impl Default for Owners {
    fn default() -> Owners {
        Owners {
            latency: "serving on-call".into(),
            quality: "model quality owner".into(),
        }
    }
}

/// A canary release: `fraction` of the requests go to the candidate from `start_share` of
/// the trace's arrival span; the detector judges `windows` tumbling windows over the span;
/// the fallback takes over `mitigation_delay_s` after a detection (None: one window).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutInputs {
    pub fraction: f64,
    pub start_share: f64,
    pub windows: u32,
    pub mitigation_delay_s: Option<f64>,
}

impl RolloutInputs {
    /// A canary of `fraction` from 10 % of the span, 20 windows, one window's delay.
    pub fn canary(fraction: f64) -> RolloutInputs {
        RolloutInputs {
            fraction,
            start_share: 0.1,
            windows: 20,
            mitigation_delay_s: None,
        }
    }

    pub fn validate(&self) -> Result<(), CapacityError> {
        in_range("canary fraction", self.fraction, 1e-6, 1.0)?;
        in_range(
            "canary start (share of the span)",
            self.start_share,
            0.0,
            0.9,
        )?;
        in_range("detector windows", self.windows as f64, 2.0, 10_000.0)?;
        if let Some(d) = self.mitigation_delay_s {
            in_range("mitigation delay (s)", d, 0.0, 1e9)?;
        }
        Ok(())
    }
}

/// One detector of the playbook.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlaybookEntry {
    /// "p99 TTFT of eu over 0.3 s windows > 50 ms".
    pub detector: String,
    pub gate: Gate,
    pub slice: String,
    pub threshold: f64,
    pub window_s: f64,
    pub owner: String,
    pub mitigation: String,
    pub stop_condition: String,
}

/// One detector window of the rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutWindow {
    pub start_s: f64,
    pub end_s: f64,
    /// Canary requests whose first token came in the window, and their p99 TTFT.
    pub canary_requests: u64,
    pub canary_ttft_p99_s: f64,
    /// The gates the window breached, in words ("p99 TTFT of eu 81 ms > 50 ms").
    pub breached: Vec<String>,
}

/// What the canary did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutReport {
    pub candidate: String,
    pub fallback: String,
    pub fraction: f64,
    pub start_s: f64,
    pub window_s: f64,
    pub mitigation_delay_s: f64,
    /// When the first detector fired (None: the canary ran to the end of the trace), and
    /// every gate its window breached.
    pub detected_at_s: Option<f64>,
    pub detector: Option<String>,
    /// When the canary's traffic returned to the fallback.
    pub stopped_at_s: Option<f64>,
    pub stop_condition_fired: bool,
    pub canary_requests: u64,
    /// Canary requests that missed the SLO, overall and per slice: (slice, missed, of).
    pub missed_slo: u64,
    pub missed_by_slice: Vec<(String, u64, u64)>,
    /// The canary's share of requests after the stop, which the fallback served, and how
    /// many of them missed the SLO.
    pub after_stop_requests: u64,
    pub after_stop_missed: u64,
    pub timeline: Vec<RolloutWindow>,
}

/// The playbook: a detector for every gate of the shipped configuration.
pub fn playbook(
    gates: &[GateResult],
    trace: &Trace,
    window_s: f64,
    owners: &Owners,
    fallback: &str,
) -> Vec<PlaybookEntry> {
    let share = |slice: &str| {
        let Some(s) = trace.slices.iter().position(|n| n == slice) else {
            return 1.0;
        };
        let n = trace
            .requests
            .iter()
            .filter(|r| r.slice as usize == s)
            .count();
        n as f64 / trace.requests.len().max(1) as f64
    };
    gates
        .iter()
        .map(|g| {
            let (owner, mitigation) = match g.gate {
                Gate::Quality => (
                    owners.quality.clone(),
                    format!("roll back to {fallback}, whose weights passed this floor"),
                ),
                _ if g.slice == "all" => (
                    owners.latency.clone(),
                    format!("shed load at admission (cap each replica's queue), then roll back to {fallback}"),
                ),
                _ if share(&g.slice) < RARE_SHARE => (
                    owners.latency.clone(),
                    format!(
                        "reserve a replica for the {} slice (route it alone), else roll back to {fallback}",
                        g.slice
                    ),
                ),
                _ => (owners.latency.clone(), format!("roll back to {fallback}")),
            };
            let unit = |x: f64| match g.gate {
                Gate::Quality => format!("{} bits/byte", figure(x)),
                _ => format!("{} ms", figure(x * 1e3)),
            };
            let detector = match g.gate {
                Gate::Quality => format!(
                    "bits/byte of {} on the shipped weights > {} (checked at release, offline)",
                    g.slice,
                    unit(g.limit)
                ),
                _ => format!(
                    "{} of {} over {} s windows (at least {MIN_SAMPLES} requests) > {}",
                    g.gate,
                    g.slice,
                    figure(window_s),
                    unit(g.limit)
                ),
            };
            PlaybookEntry {
                detector,
                gate: g.gate,
                slice: g.slice.clone(),
                threshold: g.limit,
                window_s,
                owner,
                mitigation,
                stop_condition: "the canary stops when one window breaches the threshold; the rollout resumes only after a new plan passes every gate".into(),
            }
        })
        .collect()
}

/// The canary: `candidate` and `fallback` are both sides' outcomes on `trace`.
pub fn rollout(
    inputs: &RolloutInputs,
    trace: &Trace,
    slo: &Slo,
    (candidate_name, candidate): (&str, &SimOutcome),
    (fallback_name, fallback): (&str, &SimOutcome),
) -> Result<RolloutReport, CapacityError> {
    inputs.validate()?;
    let n = trace.requests.len();
    let first = trace.requests.first().map_or(0.0, |r| r.arrival_s);
    let last = trace.requests.last().map_or(0.0, |r| r.arrival_s);
    let span = (last - first).max(f64::MIN_POSITIVE);
    let start_s = first + inputs.start_share * span;
    let window_s = span / inputs.windows as f64;
    let delay = inputs.mitigation_delay_s.unwrap_or(window_s);
    let mut rng = SplitMix64::new(CANARY_SEED);
    let sampled: Vec<bool> = trace
        .requests
        .iter()
        .map(|r| rng.uniform() < inputs.fraction && r.arrival_s >= start_s)
        .collect();
    let first_token = |i: usize| trace.requests[i].arrival_s + candidate.ttft_s[i];
    // The detector, window by window, on the canary's requests by first-token time.
    let mut timeline = Vec::new();
    let mut detected: Option<(f64, String)> = None;
    let mut scratch = Vec::new();
    let mut w = 0;
    loop {
        let (lo, hi) = (
            start_s + w as f64 * window_s,
            start_s + (w + 1) as f64 * window_s,
        );
        if lo > last + window_s || timeline.len() >= 2 * inputs.windows as usize {
            break;
        }
        // Requests the canary still served: sampled, and arrived before any stop.
        let stop = detected.as_ref().map_or(f64::INFINITY, |(t, _)| t + delay);
        let in_window = |i: usize| {
            sampled[i] && trace.requests[i].arrival_s < stop && {
                let t = first_token(i);
                t >= lo && t < hi
            }
        };
        let ids: Vec<usize> = (0..n).filter(|&i| in_window(i)).collect();
        let ttft = |ids: &[usize], scratch: &mut Vec<f64>| {
            Percentiles::of(ids.iter().map(|&i| candidate.ttft_s[i]), scratch)
        };
        let mut breached = Vec::new();
        let mut judge = |slice: &str, ids: &[usize]| {
            if ids.len() < MIN_SAMPLES {
                return;
            }
            let p99 = ttft(ids, &mut scratch).p99;
            if p99 > slo.ttft_p99_s {
                breached.push(format!(
                    "{} of {slice} {} ms > {} ms",
                    Gate::TtftP99,
                    figure(p99 * 1e3),
                    figure(slo.ttft_p99_s * 1e3)
                ));
            }
            let tpot = Percentiles::of(ids.iter().map(|&i| candidate.tpot_s[i]), &mut scratch);
            if tpot.count as usize >= MIN_SAMPLES && tpot.p99 > slo.tpot_p99_s {
                breached.push(format!(
                    "{} of {slice} {} ms > {} ms",
                    Gate::TpotP99,
                    figure(tpot.p99 * 1e3),
                    figure(slo.tpot_p99_s * 1e3)
                ));
            }
        };
        judge("all", &ids);
        for (s, name) in trace.slices.iter().enumerate() {
            let of: Vec<usize> = ids
                .iter()
                .copied()
                .filter(|&i| trace.requests[i].slice as usize == s)
                .collect();
            judge(name, &of);
        }
        let p99 = ttft(&ids, &mut scratch).p99;
        if detected.is_none() && !breached.is_empty() {
            detected = Some((hi, breached.join("; ")));
        }
        timeline.push(RolloutWindow {
            start_s: lo,
            end_s: hi,
            canary_requests: ids.len() as u64,
            canary_ttft_p99_s: p99,
            breached,
        });
        w += 1;
    }
    let stopped_at = detected.as_ref().map(|(t, _)| t + delay);
    let served =
        |i: usize| sampled[i] && trace.requests[i].arrival_s < stopped_at.unwrap_or(f64::INFINITY);
    let missed = |i: usize, out: &SimOutcome| {
        !(out.ttft_s[i] <= slo.ttft_p99_s
            && (out.tpot_s[i].is_nan() || out.tpot_s[i] <= slo.tpot_p99_s))
    };
    let mut by_slice = Vec::new();
    for (s, name) in trace.slices.iter().enumerate() {
        let ids: Vec<usize> = (0..n)
            .filter(|&i| served(i) && trace.requests[i].slice as usize == s)
            .collect();
        let m = ids.iter().filter(|&&i| missed(i, candidate)).count() as u64;
        by_slice.push((name.clone(), m, ids.len() as u64));
    }
    let after: Vec<usize> = (0..n)
        .filter(|&i| sampled[i] && stopped_at.is_some_and(|t| trace.requests[i].arrival_s >= t))
        .collect();
    Ok(RolloutReport {
        candidate: candidate_name.into(),
        fallback: fallback_name.into(),
        fraction: inputs.fraction,
        start_s,
        window_s,
        mitigation_delay_s: delay,
        detected_at_s: detected.as_ref().map(|(t, _)| *t),
        detector: detected.map(|(_, d)| d),
        stopped_at_s: stopped_at,
        stop_condition_fired: stopped_at.is_some(),
        canary_requests: (0..n).filter(|&i| served(i)).count() as u64,
        missed_slo: by_slice.iter().map(|(_, m, _)| m).sum(),
        missed_by_slice: by_slice,
        after_stop_requests: after.len() as u64,
        after_stop_missed: after.iter().filter(|&&i| missed(i, fallback)).count() as u64,
        timeline,
    })
}
