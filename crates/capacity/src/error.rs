//! The crate's one error type: every variant names the offending value and what was expected.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum CapacityError {
    /// A quantity that must be a finite number above zero (a rate, a bandwidth, a size).
    #[error("{what} must be a finite number above zero, got {value}")]
    NotPositive { what: String, value: f64 },
    /// A quantity that must be a finite number at or above zero (an overhead, a cost).
    #[error("{what} must be a finite number at or above zero, got {value}")]
    Negative { what: String, value: f64 },
    /// A share or fraction outside its range.
    #[error("{what} must lie in [{min}, {max}], got {value}")]
    OutOfRange {
        what: String,
        value: f64,
        min: f64,
        max: f64,
    },
    /// A count that must be at least one (sequences, blocks, tokens).
    #[error("{what} must be at least 1, got {value}")]
    ZeroCount { what: String, value: u64 },
    /// A length distribution whose bounds are inverted or empty.
    #[error("{what}: minimum {min} is above maximum {max}")]
    EmptyRange { what: String, min: u64, max: u64 },
    /// The slice mix is empty, names a slice twice, or its shares do not sum to 1.
    #[error("slice mix: {reason}")]
    SliceMix { reason: String },
    /// A row of a trace file that cannot be read.
    #[error("trace line {line}: {reason}")]
    TraceRow { line: usize, reason: String },
    /// A trace (file or generated) with no requests.
    #[error("the trace holds no requests")]
    EmptyTrace,
    /// A request longer than the model's context.
    #[error(
        "request {request} needs {tokens} tokens (prompt + output) but the model's context holds {context_len}"
    )]
    RequestTooLong {
        request: usize,
        tokens: u64,
        context_len: u64,
    },
    /// The weights alone do not fit in the accelerator's memory.
    #[error(
        "the {weights} weights need {weight_bytes} bytes but the accelerator has {usable_bytes} usable bytes"
    )]
    WeightsTooLarge {
        weights: String,
        weight_bytes: f64,
        usable_bytes: f64,
    },
    /// The paged KV cache cannot hold even one sequence of the trace.
    #[error(
        "the KV cache is too small for one sequence: it needs {needed_blocks} blocks but memory leaves {available_blocks}"
    )]
    KvTooSmall {
        needed_blocks: u64,
        available_blocks: u64,
    },
    /// A serving policy that could never admit a request.
    #[error("the policy can never admit a request: {reason}")]
    NeverAdmits { reason: String },
    /// The simulation ran past its bound (a defect of the simulator, reported, never a hang).
    #[error("the simulation passed its bound of {limit} iterations without finishing")]
    IterationLimit { limit: u64 },
    /// A trace too large to simulate in one run.
    #[error("the trace holds {requests} requests, more than the limit of {limit}")]
    TooManyRequests { requests: usize, limit: usize },
    /// A quality profile that cannot be read, or that lacks a slice or weight path.
    #[error("quality profile: {reason}")]
    Quality { reason: String },
    /// Calibration points that cannot determine the fit.
    #[error("calibration: {reason}")]
    Calibration { reason: String },
    /// A sweep with nothing to sweep.
    #[error("sweep: {reason}")]
    Sweep { reason: String },
    /// A preset name that is not known.
    #[error("unknown {kind} preset {name:?}; known: {known}")]
    UnknownPreset {
        kind: String,
        name: String,
        known: String,
    },
}

pub(crate) fn positive(what: &str, value: f64) -> Result<f64, CapacityError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(CapacityError::NotPositive {
            what: what.into(),
            value,
        })
    }
}

pub(crate) fn non_negative(what: &str, value: f64) -> Result<f64, CapacityError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(CapacityError::Negative {
            what: what.into(),
            value,
        })
    }
}

pub(crate) fn in_range(what: &str, value: f64, min: f64, max: f64) -> Result<f64, CapacityError> {
    if value.is_finite() && value >= min && value <= max {
        Ok(value)
    } else {
        Err(CapacityError::OutOfRange {
            what: what.into(),
            value,
            min,
            max,
        })
    }
}

pub(crate) fn at_least_one(what: &str, value: u64) -> Result<u64, CapacityError> {
    if value >= 1 {
        Ok(value)
    } else {
        Err(CapacityError::ZeroCount {
            what: what.into(),
            value,
        })
    }
}
