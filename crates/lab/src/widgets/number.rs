//! The one way a panel reads a number from a field, and the one phrasing of what is wrong
//! with it: the field's label, what it must be, and what it holds ("Top-k must be a whole
//! number of at least 0, but it is \"-3\"."). Rules that belong to the domain (a
//! temperature's range, a plan's bounds) stay in the crate that owns them; these only read.

/// `text` as a finite number.
pub fn number(text: &str, label: &str) -> Result<f64, String> {
    let t = text.trim();
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("{label} must be a number, but it is \"{t}\"."))
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
    fn a_sentence_has_one_capital_and_one_full_stop() {
        assert_eq!(sentence("top-p 2 is invalid."), "Top-p 2 is invalid.");
        assert_eq!(sentence("min-p 3 is invalid"), "Min-p 3 is invalid.");
        assert_eq!(sentence(""), "");
    }
}
