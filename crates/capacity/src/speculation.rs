//! Speculative decoding in the plan: the acceptance rate α of each slice under the plan's
//! decoding policy, measured by `decode-lab speculate --planner` (the tiny model against
//! its n-gram draft, on the held-out pages of each slice), not assumed.
//!
//! A drafted token is accepted with probability min(1, p(x)/q(x)) under the target's and
//! the draft's final distributions (Leviathan et al., 2023), so α depends on the decoding
//! policy: the measured file holds greedy, temperature 0.7 and temperature 1.5. A step
//! that drafts k tokens emits E = (1 − α^(k+1)) / (1 − α) on average; the simulator draws
//! each acceptance ([`crate::simulate_speculative`]), so the closed form is a check, not
//! an input.

use serde::{Deserialize, Serialize};

use crate::error::{in_range, CapacityError};
use crate::measured::{find_policy, per_slice, policy_names, PolicyMeasure, SliceMeasure};

/// The committed measurement for the lab's tiny model and its n-gram draft.
pub const TINY_SPECULATE_JSON: &str =
    include_str!("../../../models/decode-lab-tiny-v1/speculate.json");

/// Seconds per drafted token of the n-gram draft on the lab's CPU: its next-token
/// distribution, 3.44 µs (criterion median, `cargo bench -p ngram --bench draft`; the
/// decoding policy's pass over it is the same for target and draft and is not counted).
pub const NGRAM_DRAFT_S_PER_TOKEN: f64 = 3.44e-6;

/// What `decode-lab speculate --planner` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeculationProfile {
    pub model: String,
    pub draft: String,
    /// The k its `expected_tokens_per_verify` are for (α does not depend on k).
    pub k: u32,
    pub policies: Vec<PolicyAcceptance>,
}

/// The measured acceptance of one decoding policy, per slice.
pub type PolicyAcceptance = PolicyMeasure<SliceAcceptance>;

/// One slice's measured acceptance ("en: English").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceAcceptance {
    pub slice: String,
    pub tokens: u64,
    pub acceptance_rate: f64,
    pub expected_tokens_per_verify: f64,
}

impl SliceMeasure for SliceAcceptance {
    fn slice(&self) -> &str {
        &self.slice
    }
}

/// E = (1 − α^(k+1)) / (1 − α): tokens a step that drafts k emits on average (k + 1 at
/// α = 1).
pub fn expected_tokens_per_step(alpha: f64, k: u32) -> f64 {
    if alpha >= 1.0 {
        return k as f64 + 1.0;
    }
    (1.0 - alpha.powi(k as i32 + 1)) / (1.0 - alpha)
}

impl SpeculationProfile {
    /// The tiny model's committed measurement.
    pub fn tiny() -> Result<SpeculationProfile, CapacityError> {
        SpeculationProfile::from_json(TINY_SPECULATE_JSON)
    }

    /// Reads and checks a profile: at least one policy, each slice's rate within [0, 1].
    pub fn from_json(text: &str) -> Result<SpeculationProfile, CapacityError> {
        let profile: SpeculationProfile =
            serde_json::from_str(text).map_err(|e| CapacityError::Speculation {
                reason: format!("not the JSON of `decode-lab speculate --planner`: {e}"),
            })?;
        if profile.policies.is_empty() {
            return Err(CapacityError::Speculation {
                reason: "the profile measures no decoding policy".into(),
            });
        }
        for p in &profile.policies {
            for s in &p.slices {
                in_range(
                    &format!("acceptance rate of slice {:?} under {}", s.slice, p.policy),
                    s.acceptance_rate,
                    0.0,
                    1.0,
                )?;
            }
        }
        Ok(profile)
    }

    /// The policies measured, for messages.
    pub fn policy_names(&self) -> String {
        policy_names(&self.policies)
    }

    /// The measurement of the decoding policy `decoding` ([`crate::decoding_name`]), if any.
    pub fn policy(&self, decoding: &str) -> Option<&PolicyAcceptance> {
        find_policy(&self.policies, decoding)
    }

    /// α of each of `slices` (trace slice codes, "en") under `decoding` ("greedy",
    /// "temperature 0.7"; `-` reads as a space): an error names a policy or a slice the
    /// profile does not measure.
    pub fn acceptance(&self, decoding: &str, slices: &[String]) -> Result<Vec<f64>, CapacityError> {
        per_slice(
            &self.policies,
            decoding,
            slices,
            "acceptance",
            |reason| CapacityError::Speculation { reason },
            |s| s.acceptance_rate,
        )
    }
}

/// Speculative decoding in a plan (the tokens drafted per step are the sweep's,
/// [`crate::FleetSweep::speculative_k`]): the decoding policy whose measured α applies,
/// the measurement, and the draft's cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeculationInputs {
    pub decoding: String,
    pub profile: SpeculationProfile,
    pub draft_s_per_token: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_profile_reads_and_names_what_it_lacks() {
        let p = SpeculationProfile::tiny().unwrap();
        let slices = ["en".to_string(), "eu".to_string()];
        let greedy = p.acceptance("greedy", &slices).unwrap();
        let hot = p.acceptance("temperature-1.5", &slices).unwrap();
        assert!(greedy.iter().chain(&hot).all(|a| (0.0..=1.0).contains(a)));
        // Its own E at its own k is the closed form of its α.
        for policy in &p.policies {
            for s in &policy.slices {
                let e = expected_tokens_per_step(s.acceptance_rate, p.k);
                assert!((e - s.expected_tokens_per_verify).abs() < 1e-12);
            }
        }
        assert!(p
            .acceptance("top-p 0.9", &slices)
            .unwrap_err()
            .to_string()
            .contains("is not measured; the profile has greedy, temperature 0.7, temperature 1.5"));
        assert!(p
            .acceptance("greedy", &["fr".to_string()])
            .unwrap_err()
            .to_string()
            .contains("slice \"fr\" has no measured acceptance"));
        assert!(SpeculationProfile::from_json("{}").is_err());
    }

    #[test]
    fn expected_tokens_per_step_is_leviathans_closed_form() {
        assert_eq!(expected_tokens_per_step(0.0, 4), 1.0);
        assert_eq!(expected_tokens_per_step(1.0, 4), 5.0);
        // α = 0.5, k = 2: 1 + 0.5 + 0.25.
        assert!((expected_tokens_per_step(0.5, 2) - 1.75).abs() < 1e-15);
    }
}
