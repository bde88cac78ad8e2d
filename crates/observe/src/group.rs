//! What one group of runs (a version, or one slice of it) adds up to: service health, input
//! quality, prediction distributions and mature outcomes, accumulated a run at a time in
//! memory that does not grow with the runs (see [`crate::quantiles`]); and a run's own
//! latencies ([`ttft_ms`], [`decode_us`], [`tpot_ms`]), which the Parquet export writes
//! by the same rule.

use std::collections::BTreeMap;

use policy::{BackendKind, RunRecord};
use serde::{Deserialize, Serialize};

use crate::bins::Bins;
use crate::outcome::Verdict;
use crate::quantiles::{Quantile, Quantiles};

/// The running sums of one group.
#[derive(Clone, Debug)]
pub struct Group {
    runs: u64,
    ttft_ms: Quantiles,
    tpot_ms: Quantiles,
    tokens: u64,
    seconds: f64,
    fallbacks: BTreeMap<String, u64>,
    prompt_bytes: u64,
    prompt_tokens: u64,
    unseen_bytes: u64,
    entropy: Bins,
    chosen_prob: Bins,
    survivors: Bins,
    output_tokens: Bins,
    ttft_bins: Bins,
    steps: u64,
    survivor_sum: u64,
    stops: BTreeMap<String, u64>,
    joined: u64,
    accepted: u64,
    /// Runs without an outcome, and the earliest and latest of their `at_s` tags.
    unjoined: u64,
    unjoined_at: Option<(f64, f64)>,
}

impl Default for Group {
    fn default() -> Group {
        Group {
            runs: 0,
            ttft_ms: Quantiles::default(),
            tpot_ms: Quantiles::default(),
            tokens: 0,
            seconds: 0.0,
            fallbacks: BTreeMap::new(),
            prompt_bytes: 0,
            prompt_tokens: 0,
            unseen_bytes: 0,
            // Entropy in nats: 0 to 8 covers any vocabulary up to e^8 ≈ 3,000 tokens at
            // uniform; past it lands in the last bin.
            entropy: Bins::linear(0.0, 0.5, 16),
            chosen_prob: Bins::linear(0.0, 0.1, 10),
            survivors: Bins::powers_of_two(18),
            output_tokens: Bins::powers_of_two(14),
            // Milliseconds, in powers of two from 1 ms to 32 s.
            ttft_bins: Bins::powers_of_two(16),
            steps: 0,
            survivor_sum: 0,
            stops: BTreeMap::new(),
            joined: 0,
            accepted: 0,
            unjoined: 0,
            unjoined_at: None,
        }
    }
}

/// One run as a group counts it.
pub struct RunFacts<'a> {
    pub record: &'a RunRecord,
    pub unseen_bytes: usize,
    pub outcome: Option<Verdict>,
    /// The run's `at_s` tag, when it has one.
    pub at_s: Option<f64>,
}

impl Group {
    pub fn add(&mut self, run: &RunFacts) {
        let r = run.record;
        self.runs += 1;
        let ttft = ttft_ms(r);
        self.ttft_ms.push(ttft);
        self.ttft_bins.push(ttft);
        if let Some(tpot) = tpot_ms(r) {
            self.tpot_ms.push(tpot);
        }
        self.tokens += r.steps.len() as u64;
        self.seconds += (r.ttft_us + decode_us(r)) / 1e6;
        if r.backend.name == BackendKind::CpuReference {
            if let Some(reason) = &r.degraded_reason {
                *self.fallbacks.entry(reason.clone()).or_insert(0) += 1;
            }
        }
        self.prompt_bytes += r.rendered_prompt.len() as u64;
        self.prompt_tokens += r.prompt_tokens.len() as u64;
        self.unseen_bytes += run.unseen_bytes as u64;
        for s in &r.steps {
            self.entropy.push(s.entropy);
            self.chosen_prob.push(s.prob);
            self.survivors.push(s.survivors as f64);
            self.survivor_sum += s.survivors as u64;
        }
        self.steps += r.steps.len() as u64;
        self.output_tokens.push(r.steps.len() as f64);
        *self
            .stops
            .entry(r.stop_reason.name().to_string())
            .or_insert(0) += 1;
        match run.outcome {
            Some(v) => {
                self.joined += 1;
                self.accepted += u64::from(v == Verdict::Accepted);
            }
            None => {
                self.unjoined += 1;
                if let Some(at) = run.at_s {
                    let (lo, hi) = self.unjoined_at.unwrap_or((at, at));
                    self.unjoined_at = Some((lo.min(at), hi.max(at)));
                }
            }
        }
    }

    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The group's figures, with the unjoined runs' ages measured at `now_s`.
    pub fn summary(&self, now_s: Option<f64>) -> Summary {
        let q = |qs: &Quantiles, p| qs.quantile(p);
        let per = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
        let ttft_p99 = q(&self.ttft_ms, 0.99);
        Summary {
            runs: self.runs,
            ttft_p99_ms: ttft_p99.map(|q| q.value),
            outcome_rate: per(self.accepted, self.joined),
            outcomes_joined: self.joined,
            health: Health {
                ttft_p50_ms: q(&self.ttft_ms, 0.5),
                ttft_p99_ms: ttft_p99,
                tpot_p50_ms: q(&self.tpot_ms, 0.5),
                tpot_p99_ms: q(&self.tpot_ms, 0.99),
                tokens_per_s: (self.seconds > 0.0).then(|| self.tokens as f64 / self.seconds),
                fallback_share: per(self.fallbacks.values().sum(), self.runs),
                fallback_reasons: self.fallbacks.clone(),
            },
            input: InputQuality {
                mean_prompt_bytes: per(self.prompt_bytes, self.runs),
                mean_prompt_tokens: per(self.prompt_tokens, self.runs),
                bytes_per_token: per(self.prompt_bytes, self.prompt_tokens),
                unseen_byte_share: per(self.unseen_bytes, self.prompt_bytes),
            },
            predictions: Predictions {
                steps: self.steps,
                entropy_nats: self.entropy.clone(),
                chosen_prob: self.chosen_prob.clone(),
                survivors: self.survivors.clone(),
                mean_survivors: per(self.survivor_sum, self.steps),
                output_tokens: self.output_tokens.clone(),
                ttft_ms: self.ttft_bins.clone(),
                stop_reasons: self.stops.clone(),
            },
            outcomes: OutcomeSummary {
                joined: self.joined,
                accepted: self.accepted,
                coverage: per(self.joined, self.runs),
                rate: per(self.accepted, self.joined),
                rate_95: wilson(self.accepted, self.joined),
                unjoined: self.unjoined,
                oldest_unjoined_s: now_s.zip(self.unjoined_at).map(|(now, (lo, _))| now - lo),
                newest_unjoined_s: now_s.zip(self.unjoined_at).map(|(now, (_, hi))| now - hi),
            },
        }
    }
}

/// A run's time to first token, in milliseconds.
pub fn ttft_ms(r: &RunRecord) -> f64 {
    r.ttft_us / 1e3
}

/// A run's decode time in microseconds: the latencies of every token after the first (the
/// first's wait is the TTFT).
pub fn decode_us(r: &RunRecord) -> f64 {
    decoded(r).iter().sum()
}

/// A run's time per output token in milliseconds: its decode time over the tokens after
/// the first; `None` for a run of one token or none.
pub fn tpot_ms(r: &RunRecord) -> Option<f64> {
    let later = decoded(r);
    (!later.is_empty()).then(|| decode_us(r) / later.len() as f64 / 1e3)
}

fn decoded(r: &RunRecord) -> &[f64] {
    r.token_latencies_us.get(1..).unwrap_or(&[])
}

/// The Wilson score interval of k successes in n at 95 % (z = 1.959964): unlike the normal
/// approximation, it stays within [0, 1] and is not empty at k = 0 or k = n.
pub fn wilson(k: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// A group's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub runs: u64,
    /// The headline figures, also in the sections below.
    pub ttft_p99_ms: Option<f64>,
    pub outcome_rate: Option<f64>,
    pub outcomes_joined: u64,
    pub health: Health,
    pub input: InputQuality,
    pub predictions: Predictions,
    pub outcomes: OutcomeSummary,
}

/// Service health: latency (nearest rank, milliseconds), speed and fallbacks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub ttft_p50_ms: Option<Quantile>,
    pub ttft_p99_ms: Option<Quantile>,
    /// Each run's mean time per output token after the first.
    pub tpot_p50_ms: Option<Quantile>,
    pub tpot_p99_ms: Option<Quantile>,
    /// Generated tokens over the runs' summed time.
    pub tokens_per_s: Option<f64>,
    /// Runs that fell back to `cpu-reference`, and why.
    pub fallback_share: Option<f64>,
    pub fallback_reasons: BTreeMap<String, u64>,
}

/// Input quality: the prompts' size and how much of them training never saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputQuality {
    pub mean_prompt_bytes: Option<f64>,
    pub mean_prompt_tokens: Option<f64>,
    pub bytes_per_token: Option<f64>,
    /// Prompt bytes in characters or n-grams the language identifier never saw in training.
    pub unseen_byte_share: Option<f64>,
}

/// Prediction distributions, over every step of every run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Predictions {
    pub steps: u64,
    pub entropy_nats: Bins,
    pub chosen_prob: Bins,
    pub survivors: Bins,
    pub mean_survivors: Option<f64>,
    /// Per run.
    pub output_tokens: Bins,
    pub ttft_ms: Bins,
    pub stop_reasons: BTreeMap<String, u64>,
}

/// Mature outcomes joined by run id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutcomeSummary {
    pub joined: u64,
    pub accepted: u64,
    /// Runs with an outcome, of all runs.
    pub coverage: Option<f64>,
    /// Accepted of joined, and its 95 % Wilson interval.
    pub rate: Option<f64>,
    pub rate_95: Option<(f64, f64)>,
    pub unjoined: u64,
    /// Ages of the oldest and newest unjoined runs at the observation's time (from their
    /// `at_s` tags).
    pub oldest_unjoined_s: Option<f64>,
    pub newest_unjoined_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_its_closed_form_values() {
        // k = 8 of n = 10: the textbook interval (0.4902, 0.9433).
        let (lo, hi) = wilson(8, 10).unwrap();
        assert!(
            (lo - 0.4902).abs() < 5e-5 && (hi - 0.9433).abs() < 5e-5,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson(0, 20).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.1611).abs() < 5e-5, "{hi}");
        assert_eq!(wilson(0, 0), None);
    }
}
