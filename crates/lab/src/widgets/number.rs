//! The one way a panel reads a number from a field, and the one phrasing of what is wrong
//! with it: the field's label, what it must be, and what it holds ("Top-k must be a whole
//! number of at least 0, but it is \"-3\"."). Rules that belong to the domain (a
//! temperature's range, a plan's bounds) stay in the crate that owns them; these only read,
//! or check a bound the form itself states ([`number_in`]).

use std::ops::{Bound, RangeBounds};

use policy::Policy;

/// `text` as a finite number.
pub fn number(text: &str, label: &str) -> Result<f64, String> {
    let t = text.trim();
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("{label} must be a number, but it is \"{t}\"."))
}

/// `text` as a finite number within `range`, whose ends are written out in the message: "at
/// least 0" or "greater than 0" for the start, "at most 1" or "below 100" for the end ("from
/// 0 to 1" when both are included, as [`whole_in`] says it). A start it excludes is written
/// `(Bound::Excluded(0.0), Bound::Unbounded)`, which std's range syntax cannot.
pub fn number_in(text: &str, label: &str, range: impl RangeBounds<f64>) -> Result<f64, String> {
    let t = text.trim();
    let ends = match (range.start_bound(), range.end_bound()) {
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
    let what = match ends.as_slice() {
        [] => "a number".to_string(),
        ends => format!("a number {}", ends.join(" and ")),
    };
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && range.contains(v))
        .ok_or_else(|| format!("{label} must be {what}, but it is \"{t}\"."))
}

/// `text` as a whole number of at least 0.
pub fn whole(text: &str, label: &str) -> Result<u64, String> {
    whole_in(text, label, 0, u64::MAX)
}

/// `text` as a whole number from `min` to `max` (no upper bound when `max` is `u64::MAX`).
pub fn whole_in(text: &str, label: &str, min: u64, max: u64) -> Result<u64, String> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ if max == u64::MAX => Err(format!(
            "{label} must be a whole number of at least {min}, but it is \"{t}\"."
        )),
        _ => Err(format!(
            "{label} must be a whole number from {min} to {max}, but it is \"{t}\"."
        )),
    }
}

/// `text` as a decoding-policy parameter: a number that the policy core's own rule for it
/// accepts (`Policy::validate` on a default policy with only that parameter `set`), so no
/// panel states a range of its own.
pub fn policy_number(text: &str, label: &str, set: fn(&mut Policy, f64)) -> Result<f64, String> {
    engine_number(text, label, policy::Engine::Lab, set)
}

/// [`policy_number`] under an engine's ranges ([`policy::Engine`]): llama.cpp takes a top-p
/// of 0, vLLM no typical sampling at all.
pub fn engine_number(
    text: &str,
    label: &str,
    engine: policy::Engine,
    set: fn(&mut Policy, f64),
) -> Result<f64, String> {
    let value = number(text, label)?;
    let mut policy = Policy {
        engine,
        ..Policy::default()
    };
    set(&mut policy, value);
    policy
        .validate(usize::MAX)
        .map(|()| value)
        .map_err(|e| sentence(e.to_string()))
}

/// A message from a domain crate as a sentence: capitalised, ending in one full stop.
pub fn sentence(message: impl Into<String>) -> String {
    let message = message.into();
    let trimmed = message.trim_end().trim_end_matches('.');
    let mut chars = trimmed.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_names_the_field_and_the_value() {
        assert_eq!(number(" 0.5 ", "Top-p"), Ok(0.5));
        assert_eq!(
            number("abc", "Temperature").unwrap_err(),
            "Temperature must be a number, but it is \"abc\"."
        );
        assert_eq!(
            number("inf", "Temperature").unwrap_err(),
            "Temperature must be a number, but it is \"inf\"."
        );
        assert_eq!(
            whole("-3", "Top-k").unwrap_err(),
            "Top-k must be a whole number of at least 0, but it is \"-3\"."
        );
        assert_eq!(
            whole_in("0", "Blocks", 1, 200).unwrap_err(),
            "Blocks must be a whole number from 1 to 200, but it is \"0\"."
        );
        assert_eq!(whole_in("200", "Blocks", 1, 200), Ok(200));
        assert_eq!(
            whole_in("0", "Replicas", 1, u64::MAX).unwrap_err(),
            "Replicas must be a whole number of at least 1, but it is \"0\"."
        );
    }

    #[test]
    fn a_number_in_a_range_states_both_ends() {
        assert_eq!(number_in("0", "Reserve (%)", 0.0..100.0), Ok(0.0));
        assert_eq!(
            number_in("100", "Reserve (%)", 0.0..100.0).unwrap_err(),
            "Reserve (%) must be a number of at least 0 and below 100, but it is \"100\"."
        );
        let above_zero = (Bound::Excluded(0.0), Bound::Unbounded);
        assert_eq!(
            number_in("0", "Device memory (GB)", above_zero).unwrap_err(),
            "Device memory (GB) must be a number greater than 0, but it is \"0\"."
        );
        assert_eq!(
            number_in(" 0.5 ", "Device memory (GB)", above_zero),
            Ok(0.5)
        );
        assert_eq!(
            number_in("-1", "Weights (GB)", 0.0..).unwrap_err(),
            "Weights (GB) must be a number of at least 0, but it is \"-1\"."
        );
        assert_eq!(
            number_in("NaN", "Weights (GB)", 0.0..).unwrap_err(),
            "Weights (GB) must be a number of at least 0, but it is \"NaN\"."
        );
        assert_eq!(
            number_in("1.5", "Top-p", 0.0..=1.0).unwrap_err(),
            "Top-p must be a number from 0 to 1, but it is \"1.5\"."
        );
        assert_eq!(
            number_in("2", "Share", ..1.0).unwrap_err(),
            "Share must be a number below 1, but it is \"2\"."
        );
        assert_eq!(
            number_in("inf", "Temperature", ..).unwrap_err(),
            number("inf", "Temperature").unwrap_err(),
            "with no bounds it is number()"
        );
    }

    #[test]
    fn a_sentence_has_one_capital_and_one_full_stop() {
        assert_eq!(sentence("top-p 2 is invalid."), "Top-p 2 is invalid.");
        assert_eq!(sentence("min-p 3 is invalid"), "Min-p 3 is invalid.");
        assert_eq!(sentence(""), "");
    }
}
