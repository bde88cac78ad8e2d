//! The one way a panel reads a number from a field, and the one phrasing of what is wrong
//! with it: the field's label, what it must be, and what it holds ("Top-k must be a whole
//! number of at least 0, but it is \"-3\"."). What is wrong is a [`FieldError`], the lab's
//! one enum of what a field's text can be wrong with; its `Display` is the sentence shown at
//! the field. Rules that belong to the domain (a temperature's range, a plan's bounds) stay
//! in the crate that owns them; these only read, or check a bound the form itself states
//! ([`number_in`]).

use std::error::Error;
use std::fmt;
use std::ops::{Bound, RangeBounds};

use policy::{KnobError, PolicyError};
use report::sentence;

/// What is wrong with a field's text: the field's label, what it must be, and what it holds.
/// Its `Display` is the sentence the panel shows at the field.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldError {
    /// `text` is not a finite number within `range` (unbounded both ways: any number).
    Number {
        label: String,
        text: String,
        range: (Bound<f64>, Bound<f64>),
    },
    /// `text` is not a whole number from `min` to `max` (no upper bound at `u64::MAX`).
    Whole {
        label: String,
        text: String,
        min: u64,
        max: u64,
    },
    /// A value the policy core's own rule for its parameter refuses.
    Policy(PolicyError),
    /// A policy knob's text the policy core cannot read (a list of ids with an empty
    /// entry), or a rule between knobs.
    Knob(KnobError),
    /// A first seed so large that `seeds` consecutive seeds from it overflow a u64.
    NoRoomForSeeds { first: u64, seeds: u64 },
    /// A logit (`text`) in the Step panel's list that is not a number.
    Logit { text: String },
    /// The Step panel's list of logits, empty.
    NoLogits,
    /// A token id field (`label`) whose `text` is not a whole number.
    TokenId { label: String, text: String },
    /// A token id (`label`) not among the `vocab` logits.
    NotInVocab {
        label: String,
        id: u32,
        vocab: usize,
    },
    /// The capacity planner's weight paths (`label`): `text` is neither `both` nor a path.
    WeightPaths { label: String, text: String },
    /// The capacity planner's batchings: `text` names none of them.
    Batching { text: String },
    /// The capacity planner's batchings: none ticked.
    NoBatching,
    /// A field of one side's policy (`a` or `b`) in the Compare panel.
    Side {
        side: String,
        source: Box<FieldError>,
    },
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::Number { label, text, range } => write!(
                f,
                "{label} must be {}, but it is \"{text}\".",
                number_range(*range)
            ),
            FieldError::Whole {
                label,
                text,
                min,
                max,
            } if *max == u64::MAX => write!(
                f,
                "{label} must be a whole number of at least {min}, but it is \"{text}\"."
            ),
            FieldError::Whole {
                label,
                text,
                min,
                max,
            } => write!(
                f,
                "{label} must be a whole number from {min} to {max}, but it is \"{text}\"."
            ),
            FieldError::Policy(e) => f.write_str(&sentence(e.to_string())),
            FieldError::Knob(e) => write!(f, "{e}"),
            FieldError::NoRoomForSeeds { first, seeds } => write!(
                f,
                "First seed {first} leaves no room for {seeds} consecutive seeds; use a smaller one."
            ),
            FieldError::Logit { text } => write!(f, "Logit \"{text}\" is not a number."),
            FieldError::NoLogits => {
                f.write_str("Type at least one logit, for example 1.2, 0.1, 2.4, 1.7.")
            }
            FieldError::TokenId { label, text } => {
                write!(f, "{label} \"{text}\" is not a token id (a whole number).")
            }
            FieldError::NotInVocab { label, id, vocab } => write!(
                f,
                "{label} {id} is not a token here: the logits have ids 0 to {}.",
                vocab - 1
            ),
            FieldError::WeightPaths { label, text } => write!(
                f,
                "The {label} must be both, {}, but they are \"{text}\".",
                capacity::WeightPath::EXPECTED
            ),
            FieldError::Batching { text } => write!(
                f,
                "The batching \"{text}\" is not one of static, continuous or chunked."
            ),
            FieldError::NoBatching => f.write_str("Choose at least one batching to sweep."),
            FieldError::Side { side, source } => write!(f, "Policy {side}: {source}"),
        }
    }
}

impl Error for FieldError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            FieldError::Policy(e) => Some(e),
            FieldError::Side { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

/// A range's ends in words: "a number of at least 0", "a number greater than 0", "a
/// number at most 1" or "below 100", "a number from 0 to 1" when both are included, and
/// "a number" when it has none.
fn number_range((start, end): (Bound<f64>, Bound<f64>)) -> String {
    let ends = match (start, end) {
        (Bound::Included(min), Bound::Included(max)) => vec![format!("from {min} to {max}")],
        (start, end) => {
            let start = match start {
                Bound::Included(min) => Some(format!("of at least {min}")),
                Bound::Excluded(min) => Some(format!("greater than {min}")),
                Bound::Unbounded => None,
            };
            let end = match end {
                Bound::Included(max) => Some(format!("at most {max}")),
                Bound::Excluded(max) => Some(format!("below {max}")),
                Bound::Unbounded => None,
            };
            start.into_iter().chain(end).collect()
        }
    };
    match ends.as_slice() {
        [] => "a number".to_string(),
        ends => format!("a number {}", ends.join(" and ")),
    }
}

/// `text` as a finite number.
pub fn number(text: &str, label: &str) -> Result<f64, FieldError> {
    number_in(text, label, ..)
}

/// `text` as a finite number within `range`, whose ends are written out in the message: "at
/// least 0" or "greater than 0" for the start, "at most 1" or "below 100" for the end ("from
/// 0 to 1" when both are included, as [`whole_in`] says it). A start it excludes is written
/// `(Bound::Excluded(0.0), Bound::Unbounded)`, which std's range syntax cannot.
pub fn number_in(text: &str, label: &str, range: impl RangeBounds<f64>) -> Result<f64, FieldError> {
    let t = text.trim();
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && range.contains(v))
        .ok_or_else(|| FieldError::Number {
            label: label.to_string(),
            text: t.to_string(),
            range: (range.start_bound().cloned(), range.end_bound().cloned()),
        })
}

/// `text` as a whole number of at least 0.
pub fn whole(text: &str, label: &str) -> Result<u64, FieldError> {
    whole_in(text, label, 0, u64::MAX)
}

/// `text` as a whole number from `min` to `max` (no upper bound when `max` is `u64::MAX`).
pub fn whole_in(text: &str, label: &str, min: u64, max: u64) -> Result<u64, FieldError> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(FieldError::Whole {
            label: label.to_string(),
            text: t.to_string(),
            min,
            max,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_names_the_field_and_the_value() {
        assert_eq!(number(" 0.5 ", "Top-p"), Ok(0.5));
        assert_eq!(
            number("abc", "Temperature").unwrap_err().to_string(),
            "Temperature must be a number, but it is \"abc\"."
        );
        assert_eq!(
            number("inf", "Temperature").unwrap_err().to_string(),
            "Temperature must be a number, but it is \"inf\"."
        );
        assert_eq!(
            whole("-3", "Top-k").unwrap_err().to_string(),
            "Top-k must be a whole number of at least 0, but it is \"-3\"."
        );
        assert_eq!(
            whole_in("0", "Blocks", 1, 200).unwrap_err().to_string(),
            "Blocks must be a whole number from 1 to 200, but it is \"0\"."
        );
        assert_eq!(whole_in("200", "Blocks", 1, 200), Ok(200));
        assert_eq!(
            whole_in("0", "Replicas", 1, u64::MAX)
                .unwrap_err()
                .to_string(),
            "Replicas must be a whole number of at least 1, but it is \"0\"."
        );
    }

    #[test]
    fn a_number_in_a_range_states_both_ends() {
        assert_eq!(number_in("0", "Reserve (%)", 0.0..100.0), Ok(0.0));
        assert_eq!(
            number_in("100", "Reserve (%)", 0.0..100.0)
                .unwrap_err()
                .to_string(),
            "Reserve (%) must be a number of at least 0 and below 100, but it is \"100\"."
        );
        let above_zero = (Bound::Excluded(0.0), Bound::Unbounded);
        assert_eq!(
            number_in("0", "Device memory (GB)", above_zero)
                .unwrap_err()
                .to_string(),
            "Device memory (GB) must be a number greater than 0, but it is \"0\"."
        );
        assert_eq!(
            number_in(" 0.5 ", "Device memory (GB)", above_zero),
            Ok(0.5)
        );
        assert_eq!(
            number_in("-1", "Weights (GB)", 0.0..)
                .unwrap_err()
                .to_string(),
            "Weights (GB) must be a number of at least 0, but it is \"-1\"."
        );
        assert_eq!(
            number_in("NaN", "Weights (GB)", 0.0..)
                .unwrap_err()
                .to_string(),
            "Weights (GB) must be a number of at least 0, but it is \"NaN\"."
        );
        assert_eq!(
            number_in("1.5", "Top-p", 0.0..=1.0)
                .unwrap_err()
                .to_string(),
            "Top-p must be a number from 0 to 1, but it is \"1.5\"."
        );
        assert_eq!(
            number_in("2", "Share", ..1.0).unwrap_err().to_string(),
            "Share must be a number below 1, but it is \"2\"."
        );
        assert_eq!(
            number_in("inf", "Temperature", ..).unwrap_err().to_string(),
            number("inf", "Temperature").unwrap_err().to_string(),
            "with no bounds it is number()"
        );
    }
}
