//! Output lengths in the plan, from the decoding policy: where each answer stops when the
//! policy decides, measured, not assumed.
//!
//! `decode-lab lengths --planner` starts the tiny model at the top of held-out pages of
//! each slice (the end-of-text token, then the page's first line) and generates under
//! greedy, temperature 0.7 and temperature 1.5, recording where each run stopped: at the
//! end-of-text token, or at its token budget. Greedy decoding tends to loop until the
//! budget; sampling reaches the end of a page sooner.
//!
//! In a plan, a request's output length in the trace is read as its budget (the
//! `max_tokens` its client sent), and the policy decides where under it the request stops:
//! each request draws one measured run of its slice under the plan's decoding policy and
//! keeps the share of the budget that run used ([`LengthProfile::apply`]).

use policy::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::error::CapacityError;
use crate::measured::{find_policy, per_slice, policy_names, PolicyMeasure, SliceMeasure};
use crate::trace::Trace;

/// The committed measurement for the lab's tiny model.
pub const TINY_LENGTHS_JSON: &str = include_str!("../../../models/decode-lab-tiny-v1/lengths.json");

/// The stream the draws come from, so the same trace always gets the same lengths.
const LENGTH_STREAM: u64 = 0x6c65_6e67_7468_7321;

/// What `decode-lab lengths --planner` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LengthProfile {
    pub model: String,
    /// The tokens each run could generate at most (less where the prompt left less of the
    /// context).
    pub max_new_tokens: u32,
    pub policies: Vec<PolicyLengths>,
}

/// One decoding policy's runs, per slice.
pub type PolicyLengths = PolicyMeasure<SliceLengths>;

/// One slice's runs ("en: English").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceLengths {
    pub slice: String,
    pub runs: Vec<LengthRun>,
}

impl SliceMeasure for SliceLengths {
    fn slice(&self) -> &str {
        &self.slice
    }
}

/// Where one run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LengthRun {
    /// Tokens generated, the end-of-text token included when it ended the run.
    pub tokens: u32,
    /// Tokens the run could have generated.
    pub budget: u32,
    /// True when the model chose end-of-text; false when the budget ran out.
    pub eos: bool,
}

impl LengthRun {
    /// The share of its budget the run used, in (0, 1].
    pub fn share(&self) -> f64 {
        self.tokens as f64 / self.budget as f64
    }
}

/// How the policy's lengths changed one slice of a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceLengthChange {
    pub slice: String,
    /// Measured runs the draws come from, and the share of them that chose end-of-text.
    pub runs: u64,
    pub eos_share: f64,
    /// Mean share of the budget a measured run used.
    pub mean_budget_share: f64,
    /// Mean output tokens of the slice's requests: the trace's budgets, then as served.
    pub mean_budget_tokens: f64,
    pub mean_output_tokens: f64,
}

impl LengthProfile {
    /// The tiny model's committed measurement.
    pub fn tiny() -> Result<LengthProfile, CapacityError> {
        LengthProfile::from_json(TINY_LENGTHS_JSON)
    }

    /// Reads and checks a profile: at least one policy; every slice with runs, each run
    /// within its budget and the budget within `max_new_tokens`, and a run that did not
    /// choose end-of-text at its budget.
    pub fn from_json(text: &str) -> Result<LengthProfile, CapacityError> {
        let profile: LengthProfile = serde_json::from_str(text).map_err(|e| {
            lengths_error(format!(
                "not the JSON of `decode-lab lengths --planner`: {e}"
            ))
        })?;
        if profile.policies.is_empty() {
            return Err(lengths_error(
                "the profile measures no decoding policy".into(),
            ));
        }
        for p in &profile.policies {
            for s in &p.slices {
                if s.runs.is_empty() {
                    return Err(lengths_error(format!(
                        "slice {:?} under {} has no runs",
                        s.slice, p.policy
                    )));
                }
                for (i, r) in s.runs.iter().enumerate() {
                    let wrong = if r.budget == 0 || r.budget > profile.max_new_tokens {
                        Some(format!(
                            "a budget of {} tokens, outside 1 to max_new_tokens {}",
                            r.budget, profile.max_new_tokens
                        ))
                    } else if r.tokens == 0 || r.tokens > r.budget {
                        Some(format!(
                            "{} tokens, outside 1 to its budget {}",
                            r.tokens, r.budget
                        ))
                    } else if !r.eos && r.tokens != r.budget {
                        Some(format!(
                            "{} tokens of a budget of {} without choosing end-of-text",
                            r.tokens, r.budget
                        ))
                    } else {
                        None
                    };
                    if let Some(wrong) = wrong {
                        return Err(lengths_error(format!(
                            "run {i} of slice {:?} under {} has {wrong}",
                            s.slice, p.policy
                        )));
                    }
                }
            }
        }
        Ok(profile)
    }

    /// The policies measured, for messages.
    pub fn policy_names(&self) -> String {
        policy_names(&self.policies)
    }

    /// The runs of the decoding policy `decoding` ([`crate::decoding_name`]), if measured.
    pub fn policy(&self, decoding: &str) -> Option<&PolicyLengths> {
        find_policy(&self.policies, decoding.trim())
    }

    /// The measured runs of each of `slices` (trace slice codes, "en") under `decoding`
    /// ([`crate::decoding_name`]): an error names a policy or a slice the profile does not measure.
    pub fn runs(
        &self,
        decoding: &str,
        slices: &[String],
    ) -> Result<Vec<&[LengthRun]>, CapacityError> {
        per_slice(
            &self.policies,
            decoding,
            slices,
            "lengths",
            lengths_error,
            |s| s.runs.as_slice(),
        )
    }

    /// Serves `trace` under `decoding`: each request's output length becomes its budget
    /// times the share of one measured run of its slice, drawn from a fixed stream (at
    /// least 1 token). Returns what changed, per slice of the trace.
    pub fn apply(
        &self,
        decoding: &str,
        trace: &mut Trace,
    ) -> Result<Vec<SliceLengthChange>, CapacityError> {
        let runs = self.runs(decoding, &trace.slices)?;
        let n = trace.slices.len();
        let (mut budgets, mut served, mut count) = (vec![0.0; n], vec![0.0; n], vec![0u64; n]);
        let mut rng = SplitMix64::new(LENGTH_STREAM);
        for r in &mut trace.requests {
            let slice = usize::from(r.slice);
            let measured = runs[slice];
            let run = measured[rng.below(measured.len() as u64) as usize];
            let output = ((r.output_tokens as f64 * run.share()).round() as u32).max(1);
            budgets[slice] += f64::from(r.output_tokens);
            served[slice] += f64::from(output);
            count[slice] += 1;
            r.output_tokens = output;
        }
        Ok(trace
            .slices
            .iter()
            .enumerate()
            .map(|(i, slice)| {
                let measured = runs[i];
                let m = measured.len() as f64;
                let per = |sum: f64| {
                    if count[i] == 0 {
                        0.0
                    } else {
                        sum / count[i] as f64
                    }
                };
                SliceLengthChange {
                    slice: slice.clone(),
                    runs: measured.len() as u64,
                    eos_share: measured.iter().filter(|r| r.eos).count() as f64 / m,
                    mean_budget_share: measured.iter().map(LengthRun::share).sum::<f64>() / m,
                    mean_budget_tokens: per(budgets[i]),
                    mean_output_tokens: per(served[i]),
                }
            })
            .collect())
    }
}

/// Output lengths from the decoding policy in a plan: the policy and the measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LengthInputs {
    pub decoding: String,
    pub profile: LengthProfile,
}

fn lengths_error(reason: String) -> CapacityError {
    CapacityError::Lengths { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceSpec;

    #[test]
    fn the_committed_profile_reads_and_names_what_it_lacks() {
        let p = LengthProfile::tiny().unwrap();
        let slices = ["en".to_string(), "eu".to_string()];
        for policy in ["greedy", "temperature-0.7", "temperature 1.5"] {
            assert!(p
                .runs(policy, &slices)
                .unwrap()
                .iter()
                .all(|r| !r.is_empty()));
        }
        let err = p.runs("top-p 0.9", &slices).unwrap_err().to_string();
        assert!(
            err.contains("is not measured; the profile has greedy, temperature 0.7"),
            "{err}"
        );
        let err = p.runs("greedy", &["fr".into()]).unwrap_err().to_string();
        assert!(
            err.contains("slice \"fr\" has no measured lengths under greedy"),
            "{err}"
        );
    }

    #[test]
    fn a_damaged_profile_is_an_error_naming_the_run() {
        let profile = |runs: &str| {
            format!(
                r#"{{"model":"m","max_new_tokens":10,"policies":[{{"policy":"greedy","slices":[{{"slice":"en: English","runs":[{runs}]}}]}}]}}"#
            )
        };
        assert!(
            LengthProfile::from_json(&profile(r#"{"tokens":4,"budget":10,"eos":true}"#)).is_ok()
        );
        for (runs, says) in [
            (
                r#"{"tokens":11,"budget":12,"eos":true}"#,
                "a budget of 12 tokens",
            ),
            (
                r#"{"tokens":0,"budget":10,"eos":true}"#,
                "0 tokens, outside 1 to its budget 10",
            ),
            (
                r#"{"tokens":4,"budget":10,"eos":false}"#,
                "without choosing end-of-text",
            ),
            ("", "has no runs"),
        ] {
            let err = LengthProfile::from_json(&profile(runs))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{runs}: {err}");
        }
        assert!(LengthProfile::from_json("{}").is_err());
    }

    #[test]
    fn each_request_keeps_the_share_of_its_budget_a_measured_run_used() {
        // One slice whose runs all used a quarter of their budget, one that ran to the end.
        let mut trace = TraceSpec::preset("poisson").unwrap().generate().unwrap();
        trace.requests.truncate(400);
        let budgets: Vec<u32> = trace.requests.iter().map(|r| r.output_tokens).collect();
        let run = |tokens, eos| LengthRun {
            tokens,
            budget: 8,
            eos,
        };
        let profile = LengthProfile {
            model: "m".into(),
            max_new_tokens: 8,
            policies: vec![PolicyLengths {
                policy: "temperature 0.7".into(),
                slices: vec![
                    SliceLengths {
                        slice: "en: English".into(),
                        runs: vec![run(2, true)],
                    },
                    SliceLengths {
                        slice: "eu: Basque".into(),
                        runs: vec![run(8, false)],
                    },
                ],
            }],
        };
        let changes = profile.apply("temperature-0.7", &mut trace).unwrap();
        for (r, budget) in trace.requests.iter().zip(budgets) {
            let expected = if trace.slices[usize::from(r.slice)] == "en" {
                ((budget as f64 / 4.0).round() as u32).max(1)
            } else {
                budget
            };
            assert_eq!(r.output_tokens, expected);
        }
        let en = &changes[0];
        assert_eq!((en.slice.as_str(), en.runs, en.eos_share), ("en", 1, 1.0));
        assert!((en.mean_output_tokens - en.mean_budget_tokens / 4.0).abs() < 1.0);
        assert_eq!(changes[1].mean_output_tokens, changes[1].mean_budget_tokens);
    }
}
