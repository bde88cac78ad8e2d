//! Numbers in messages in their shortest round-trip form: `1e-310`, never 300 digits.

use std::fmt;

/// Displays a float as the shorter of Rust's plain (`{}`) and scientific (`{:e}`) forms.
/// Both print the fewest digits that read back as the same f64, so the text is exact; the
/// plain form wins ties (`0.5`, `100`). Width and alignment flags apply to the result.
///
/// ```
/// use policy::Shortest;
///
/// assert_eq!(Shortest(1e-310).to_string(), "1e-310");
/// assert_eq!(Shortest(-1e308).to_string(), "-1e308");
/// assert_eq!(Shortest(0.128).to_string(), "0.128");
/// assert_eq!(Shortest(100.0).to_string(), "100");
/// assert_eq!(Shortest(f64::INFINITY).to_string(), "inf");
/// ```
///
/// An f32 prints its own shortest form (`1e-5`, not the f64 widening's digits):
///
/// ```
/// use policy::Shortest;
///
/// assert_eq!(Shortest(1e-5f32).to_string(), "1e-5");
/// assert_eq!(Shortest(1e12f32).to_string(), "1e12");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shortest<T = f64>(pub T);

impl<T: fmt::Display + fmt::LowerExp> fmt::Display for Shortest<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plain = format!("{}", self.0);
        let scientific = format!("{:e}", self.0);
        f.pad(if scientific.len() < plain.len() {
            &scientific
        } else {
            &plain
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Shortest;

    #[test]
    fn every_form_reads_back_exactly_and_is_short() {
        for x in [
            0.0,
            -0.0,
            1.0,
            1.2,
            -7.25,
            123456789.0,
            1e15,
            1e16,
            1e21,
            1e-5,
            1e-7,
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1e-320,
            0.1 + 0.2,
        ] {
            let text = Shortest(x).to_string();
            assert_eq!(
                text.parse::<f64>().unwrap().to_bits(),
                x.to_bits(),
                "{text}"
            );
            assert!(text.len() <= 24, "{text} is too long");
        }
        assert_eq!(Shortest(f64::NAN).to_string(), "NaN");
        assert_eq!(format!("{:>7}", Shortest(1e-310)), " 1e-310");
    }
}
