//! Figures for reading, not for reading back: four significant figures
//! ([`figure`]), and the same without trailing zeros ([`figure_short`]) for axis labels,
//! option texts and sizes. The capacity plan's report and every lab panel write their
//! figures with these; values in messages use [`crate::Shortest`], which is exact.

/// A number with four significant figures, no exponent for everyday magnitudes (10^-4 to
/// 10^9): `1235`, `0.0001234`, `1.000e-300`.
///
/// ```
/// assert_eq!(policy::figure(1234.5678), "1235");
/// assert_eq!(policy::figure(0.000_123_45), "0.0001234");
/// assert_eq!(policy::figure(1e-300), "1.000e-300");
/// assert_eq!(policy::figure(1.5e10), "1.500e10");
/// ```
pub fn figure(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    if !(-4..9).contains(&magnitude) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - magnitude).max(0) as usize;
    format!("{x:.decimals$}")
}

/// [`figure`] without trailing zeros: `50`, `0.5`, `1.25`, `0.0004883`; an exponent form
/// keeps its digits (`1.500e10`).
///
/// ```
/// assert_eq!(policy::figure_short(50.0), "50");
/// assert_eq!(policy::figure_short(0.5), "0.5");
/// assert_eq!(policy::figure_short(12345.6), "12346");
/// assert_eq!(policy::figure_short(0.00048828125), "0.0004883");
/// ```
pub fn figure_short(x: f64) -> String {
    let text = figure(x);
    if text.contains('.') && !text.contains('e') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}
