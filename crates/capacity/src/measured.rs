//! What the two measured profiles share (the acceptance rates of `decode-lab speculate
//! --planner` and the output lengths of `decode-lab lengths --planner`): each holds, per
//! decoding policy, one measurement per slice, and a plan looks up its decoding policy and
//! the trace's slices in it the same way.

use serde::{Deserialize, Serialize};

use crate::error::CapacityError;

/// One decoding policy's measurement, per slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyMeasure<S> {
    /// "greedy", "temperature 0.7", "temperature 1.5".
    pub policy: String,
    pub slices: Vec<S>,
}

/// A slice's measurement, named as the profile names the slice ("en: English").
pub(crate) trait SliceMeasure {
    fn slice(&self) -> &str;
}

/// The profile's name of a decoding policy as the CLI and the lab take it: `-` reads as a
/// space ("temperature-0.7" is "temperature 0.7").
pub fn decoding_name(decoding: &str) -> String {
    decoding.replace('-', " ")
}

/// The code of a profile's slice name ("en" of "en: English"), as a trace names its slices.
pub(crate) fn slice_code(name: &str) -> &str {
    name.split(':').next().map_or(name, str::trim)
}

/// The policies measured, for messages.
pub(crate) fn policy_names<S>(policies: &[PolicyMeasure<S>]) -> String {
    policies
        .iter()
        .map(|p| p.policy.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The measurement of the decoding policy `decoding` ([`decoding_name`]), if any.
pub(crate) fn find_policy<'a, S>(
    policies: &'a [PolicyMeasure<S>],
    decoding: &str,
) -> Option<&'a PolicyMeasure<S>> {
    let wanted = decoding_name(decoding);
    policies.iter().find(|p| p.policy == wanted)
}

/// What `value` reads of each of `slices` (trace slice codes, "en") under `decoding`
/// ([`decoding_name`], trimmed): a policy or a slice the profile does not measure is an
/// `error`, which names the measurement as `what` ("acceptance", "lengths").
pub(crate) fn per_slice<'a, S: SliceMeasure, T>(
    policies: &'a [PolicyMeasure<S>],
    decoding: &str,
    slices: &[String],
    what: &str,
    error: impl Fn(String) -> CapacityError,
    value: impl Fn(&'a S) -> T,
) -> Result<Vec<T>, CapacityError> {
    let policy = find_policy(policies, decoding.trim()).ok_or_else(|| {
        error(format!(
            "decoding policy {decoding:?} is not measured; the profile has {}",
            policy_names(policies)
        ))
    })?;
    slices
        .iter()
        .map(|code| {
            policy
                .slices
                .iter()
                .find(|s| slice_code(s.slice()) == code)
                .map(&value)
                .ok_or_else(|| {
                    error(format!(
                        "the trace's slice {code:?} has no measured {what} under {}",
                        policy.policy
                    ))
                })
        })
        .collect()
}
