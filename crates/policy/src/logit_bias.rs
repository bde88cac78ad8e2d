//! The logit-bias syntax that `decode-lab --bias` and the lab's `bias` field share:
//! `id:value` entries separated by commas, white space around each part ignored, empty
//! entries skipped (`2:-1.5, 0:+3`).

use crate::PolicyError;

/// Reads a logit bias, `2:-1.5, 0:+3`, into the `(token id, bias)` pairs of
/// [`Policy::logit_bias`](crate::Policy::logit_bias). The first entry that is not an id, a
/// `:` and a finite number is named in the error; whether the ids exist is the vocabulary's
/// business ([`Policy::validate`](crate::Policy::validate)).
///
/// ```
/// assert_eq!(policy::parse_logit_bias("2:-1.5, 0:+3")?, vec![(2, -1.5), (0, 3.0)]);
/// assert_eq!(
///     policy::parse_logit_bias("2=1").unwrap_err().to_string(),
///     "logit bias \"2=1\" is not of the form id:value, for example 2:-1.5"
/// );
/// # Ok::<(), policy::PolicyError>(())
/// ```
pub fn parse_logit_bias(text: &str) -> Result<Vec<(u32, f64)>, PolicyError> {
    text.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(entry)
        .collect()
}

fn entry(entry: &str) -> Result<(u32, f64), PolicyError> {
    let (id, value) = entry
        .split_once(':')
        .ok_or_else(|| PolicyError::LogitBiasEntry(entry.to_string()))?;
    let (id, value) = (id.trim(), value.trim());
    let id = id
        .parse()
        .map_err(|_| PolicyError::LogitBiasToken(id.to_string()))?;
    let bias: f64 = value.parse().map_err(|_| PolicyError::LogitBiasValue {
        id,
        value: value.to_string(),
    })?;
    // The same refusal `Policy::validate` gives a bias read from a record.
    if !bias.is_finite() {
        return Err(PolicyError::NonFiniteParameter {
            name: "logit bias",
            value: bias,
        });
    }
    Ok((id, bias))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_trimmed_and_empty_ones_skipped() {
        assert_eq!(
            parse_logit_bias(" 2 : -1.5 ,, 0:+3, ").unwrap(),
            vec![(2, -1.5), (0, 3.0)]
        );
        assert_eq!(parse_logit_bias(" , ").unwrap(), vec![]);
    }

    #[test]
    fn the_first_bad_entry_is_named() {
        for (text, message) in [
            (
                "0",
                "logit bias \"0\" is not of the form id:value, for example 2:-1.5",
            ),
            (
                "1:1, x:1",
                "logit bias token \"x\" is not a token id (a whole number)",
            ),
            (
                "-1:1",
                "logit bias token \"-1\" is not a token id (a whole number)",
            ),
            (
                "0:y",
                "logit bias for token 0 must be a finite number, but it is \"y\"",
            ),
            (
                "0:1:2",
                "logit bias for token 0 must be a finite number, but it is \"1:2\"",
            ),
            (
                "0:nan",
                "logit bias NaN is invalid: it must be a finite number",
            ),
            (
                "0:1e999",
                "logit bias inf is invalid: it must be a finite number",
            ),
        ] {
            assert_eq!(
                parse_logit_bias(text).unwrap_err().to_string(),
                message,
                "{text}"
            );
        }
    }
}
