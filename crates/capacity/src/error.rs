//! The crate's one error type: every variant names the offending value and what was expected,
//! with numbers in their shortest round-trip form ([`crate::shortest`]).

use thiserror::Error;

use crate::figures::shortest;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum CapacityError {
    /// A quantity that must be a finite number above zero (a rate, a bandwidth, a size).
    #[error("{what} must be a finite number above zero, got {}", shortest(*.value))]
    NotPositive { what: String, value: f64 },
    /// A quantity that must be a finite number at or above zero (an overhead, a cost).
    #[error("{what} must be a finite number at or above zero, got {}", shortest(*.value))]
    Negative { what: String, value: f64 },
    /// A share or fraction outside its range.
    #[error(
        "{what} must lie in [{}, {}], got {}",
        shortest(*.min),
        shortest(*.max),
        shortest(*.value)
    )]
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
    /// An owner's role that is empty or longer than [`crate::Owners::MAX_ROLE_CHARS`].
    #[error(
        "the {gate} owner {:?} must name a role of 1 to {} characters",
        policy::Excerpt(.role),
        crate::Owners::MAX_ROLE_CHARS
    )]
    Owner { gate: &'static str, role: String },
    /// A row of a trace file that cannot be read.
    #[error("trace line {line}: {reason}")]
    TraceRow { line: usize, reason: String },
    /// A request of a trace handed to the simulator that breaks the trace's rules (a
    /// hand-built or generated trace; a file's rows are checked, by line, when parsed).
    /// `request` counts from 1 in arrival order.
    #[error("request {request} of the trace: {reason}")]
    BadRequest { request: usize, reason: String },
    /// A trace whose arrivals span no time (one request, or all at the same instant): it
    /// has no arrival rate, so the plan can neither scale it nor size replicas by it.
    #[error(
        "the trace's {requests} request{} all arrive at {} s, so it has no arrival rate to scale or to size replicas by; a capacity plan needs at least two requests at different times",
        if *.requests == 1 { "" } else { "s" },
        shortest(*.arrival_s)
    )]
    NoArrivalRate { requests: usize, arrival_s: f64 },
    /// A trace (or a load scale of it) offering more requests per second than the planner
    /// takes, or a rate that is not a finite number.
    #[error(
        "{what} is {} requests/s, more than the planner's limit of {} requests/s",
        shortest(*.rate),
        shortest(*.limit)
    )]
    RateTooHigh { what: String, rate: f64, limit: f64 },
    /// Simulated time so far from 0 that an f64 no longer resolves one iteration.
    #[error(
        "the simulated clock would reach {} s, where a 64-bit float cannot resolve one iteration of {} s; {}",
        shortest(*.time_s),
        shortest(*.iteration_s),
        .hint
    )]
    ClockResolution {
        time_s: f64,
        iteration_s: f64,
        hint: String,
    },
    /// A figure of the report that came out infinite or NaN (a defect, reported rather
    /// than printed as `inf` or `null`).
    #[error("the report's figure {figure} is not a finite number; the plan is withheld")]
    NotFinite { figure: String },
    /// A slice of the trace with no quality data or no floor: its gate cannot be judged.
    #[error(
        "the trace has slice {:?}, but {reason}; every slice needs measured quality and a floor (give an eval that measures it, or leave the slice out of the trace)",
        policy::Excerpt(.slice)
    )]
    UngatedSlice { slice: String, reason: String },
    /// A plan whose sweep would simulate more requests than the planner's limit.
    #[error(
        "the sweep would simulate {points} configurations of {requests} requests, {} requests in all, more than the plan's limit of {}",
        shortest(*.points as f64 * *.requests as f64),
        shortest(*.limit as f64)
    )]
    TooMuchWork {
        points: usize,
        requests: usize,
        limit: u64,
    },
    /// A known-good plan file that cannot be read.
    #[error("known-good plan: {reason}")]
    KnownGood { reason: String },
    /// A trace (file or generated) with no requests.
    #[error("the trace holds no requests")]
    EmptyTrace,
    /// A request longer than the model's context. `request` is its index from 0; the
    /// message counts from 1, as [`CapacityError::BadRequest`] does.
    #[error(
        "request {} of the trace needs {tokens} tokens (prompt + output) but the model's context holds {context_len}",
        .request + 1
    )]
    RequestTooLong {
        request: usize,
        tokens: u64,
        context_len: u64,
    },
    /// The weights alone do not fit in the accelerator's memory.
    #[error(
        "the {weights} weights need {} bytes but the accelerator has {} usable bytes",
        byte_count(*.weight_bytes),
        byte_count(*.usable_bytes)
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
    /// Speculative decoding without what it needs: an acceptance rate per slice, a known
    /// decoding policy, a measured profile.
    #[error("speculative decoding: {reason}")]
    Speculation { reason: String },
    /// Output lengths from the decoding policy without a measured profile that fits.
    #[error("output lengths from the policy: {reason}")]
    Lengths { reason: String },
    /// A sweep with nothing to sweep.
    #[error("sweep: {reason}")]
    Sweep { reason: String },
    /// A preset name that is not known.
    #[error("unknown {kind} preset {:?}; known: {known}", policy::Excerpt(.name))]
    UnknownPreset {
        kind: String,
        name: String,
        known: String,
    },
    /// A plan request's knob whose value does not read or breaks a rule of the request:
    /// the knob's name (the CLI's flag), the value as typed, and why.
    #[error("{}: {why}", shown(.knob, .value))]
    Knob {
        knob: &'static str,
        value: String,
        why: String,
    },
    /// A plan request's knob whose value breaks one of the plan's rules.
    #[error("{}: {source}", shown(.knob, .value))]
    KnobRule {
        knob: &'static str,
        value: String,
        source: Box<CapacityError>,
    },
    /// Knobs given without the knob they shape (the last of `knobs`).
    #[error("{why}")]
    Knobs {
        knobs: Vec<&'static str>,
        why: String,
    },
    /// A key that is none of the plan request's knobs.
    #[error("a plan request has no knob {:?} (given {:?})", policy::Excerpt(.name), policy::Excerpt(.value))]
    UnknownKnob { name: String, value: String },
    /// A name that is not one of its kind's (a batching, a weight path): the `FromStr` of
    /// [`crate::Batching`] and [`crate::WeightPath`].
    #[error("unknown {kind} {:?}; expected {expected}", policy::Excerpt(.name))]
    UnknownName {
        kind: String,
        name: String,
        expected: String,
    },
}

/// `--name VALUE` as a message names it: the value as typed (cut to an excerpt), quoted
/// when it is empty or holds spaces.
pub fn shown(name: &str, value: &str) -> String {
    let value = policy::Excerpt(value);
    if value.0.is_empty() || value.0.chars().any(char::is_whitespace) {
        format!("--{name} {value:?}")
    } else {
        format!("--{name} {value}")
    }
}

/// A count of bytes: every digit while it is a whole number below 10^16 (`26000000000`),
/// else [`shortest`].
fn byte_count(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x}")
    } else {
        shortest(x)
    }
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
