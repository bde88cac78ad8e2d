//! How the planner writes numbers: [`shortest`] for values in messages (exact, read back to
//! the same f64), [`figure`] for the report's figures (four significant figures),
//! [`percent`] for shares, `pct` for signed ones, and [`seconds`] for times. [`figure`] is `policy`'s, which every lab panel writes with too.

/// `x` in its shortest round-trip form ([`policy::Shortest`]: `0.25`, `1e-300` (never 300
/// digits), `1.5e308`, `inf`, `NaN`), except that up to six characters the plain form is
/// kept (`1000` and `0.001`, not `1e3` and `1e-3`): a planner's values read as quantities
/// first. Either form reads back to the same f64.
pub fn shortest(x: f64) -> String {
    let plain = format!("{x}");
    if plain.len() <= 6 {
        plain
    } else {
        policy::Shortest(x).to_string()
    }
}

pub use policy::figure;

/// A share as a percentage with one decimal: "12.5 %".
pub fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// A time in the unit that reads best, to four significant figures at most: "1 ms",
/// "10 s", "100 µs".
pub fn seconds(t: f64) -> String {
    if t >= 1.0 {
        format!("{} s", policy::figure_short(t))
    } else if t >= 1e-3 {
        format!("{} ms", policy::figure_short(t * 1e3))
    } else {
        format!("{} µs", policy::figure_short(t * 1e6))
    }
}

/// A signed percentage; small ones keep three decimals so that they do not read as 0.
pub(crate) fn pct(share: f64) -> String {
    if share.abs() < 0.01 {
        format!("{:+.3} %", share * 100.0)
    } else if share.abs() < 1e4 {
        format!("{:+.1} %", share * 100.0)
    } else {
        // A million percent and more: four figures and an exponent, never 300 digits.
        let sign = if share < 0.0 { "-" } else { "+" };
        format!("{sign}{} %", figure(share.abs() * 100.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_plain_form_up_to_six_characters() {
        for (x, text) in [
            (1000.0, "1000"),
            (100000.0, "100000"),
            (0.001, "0.001"),
            (0.25, "0.25"),
            (-0.05, "-0.05"),
            (1e6, "1e6"),
            (0.0001, "0.0001"),
            (0.00012, "1.2e-4"),
            (1234567.0, "1234567"),
            (1e-300, "1e-300"),
            (1.5e308, "1.5e308"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(shortest(x), text);
            if x.is_finite() {
                assert_eq!(shortest(x).parse::<f64>().unwrap(), x);
            }
        }
    }

    #[test]
    fn percentages_and_figures_stay_short() {
        assert_eq!(pct(0.5), "+50.0 %");
        assert_eq!(pct(0.0001), "+0.010 %");
        assert_eq!(pct(3e15), "+3.000e17 %");
        assert_eq!(pct(-3e15), "-3.000e17 %");
        assert_eq!(figure(1e-300), "1.000e-300");
        assert_eq!(figure(1234.5678), "1235");
        assert_eq!(figure(0.000_123_45), "0.0001234");
    }
}
