//! The loss curve as a standalone SVG, drawn as text: axes with ticks and labels, one
//! polyline per series, told apart by dash pattern and marker shape (not by colour), and a
//! legend.

use std::fmt::Write;

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A solid line, no markers.
    Solid,
    /// A dashed line with a hollow circle at every point.
    DashedCircles,
    /// A dotted line with a filled square at every point.
    DottedSquares,
}

impl Mark {
    /// The line's `stroke-dasharray` attribute (with its leading space), or nothing.
    fn dash(self) -> &'static str {
        match self {
            Mark::Solid => "",
            Mark::DashedCircles => r#" stroke-dasharray="7 4""#,
            Mark::DottedSquares => r#" stroke-dasharray="2 3""#,
        }
    }
}

/// One named series of (x, y) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// A "nice" tick step (1, 2 or 5 times a power of ten) for about `target` ticks over `span`.
fn tick_step(span: f64, target: f64) -> f64 {
    let raw = (span / target).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let m = raw / power;
    power
        * if m < 1.5 {
            1.0
        } else if m < 3.5 {
            2.0
        } else if m < 7.5 {
            5.0
        } else {
            10.0
        }
}

fn ticks(lo: f64, hi: f64, target: f64) -> Vec<f64> {
    let step = tick_step(hi - lo, target);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 {
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

fn label(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if v.abs() >= 10_000.0 {
        format!("{}k", (v / 1000.0).round())
    } else {
        s.to_string()
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG line chart of `series`.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    if y1 - y0 < 1e-9 {
        y1 = y0 + 1.0;
    }
    let ystep = tick_step(y1 - y0, 6.0);
    let (y0, y1) = ((y0 / ystep).floor() * ystep, (y1 / ystep).ceil() * ystep);
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + (1.0 - (y - y0) / (y1 - y0)) * ph;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12" role="img" aria-labelledby="chart-title">"#
    );
    let _ = writeln!(svg, r#"<title id="chart-title">{}</title>"#, escape(title));
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    // Grid and ticks.
    for y in ticks(y0, y1, 6.0) {
        let py = sy(y);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            py + 4.0,
            label(y)
        );
    }
    for x in ticks(x0, x1, 8.0) {
        let px = sx(x);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/><line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="black"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph,
            TOP + ph + 5.0,
            TOP + ph + 18.0,
            label(x)
        );
    }
    // Axes and their labels.
    let _ = writeln!(
        svg,
        r#"<polyline points="{LEFT},{TOP} {LEFT},{b} {r},{b}" fill="none" stroke="black"/>"#,
        b = TOP + ph,
        r = LEFT + pw
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        HEIGHT - 18.0,
        escape(x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(y_label)
    );
    // Series.
    for s in series {
        let coords: Vec<String> = s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let dash = s.mark.dash();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="black" stroke-width="1.5"{dash}><title>{}</title></polyline>"#,
            coords.join(" "),
            escape(&s.label)
        );
        for &(x, y) in s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
        {
            marker(&mut svg, s.mark, sx(x), sy(y));
        }
    }
    // Legend, top right.
    for (i, s) in series.iter().enumerate() {
        let (lx, ly) = (LEFT + pw - 230.0, TOP + 16.0 + 20.0 * i as f64);
        let dash = s.mark.dash();
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="black" stroke-width="1.5"{dash}/>"#,
            lx + 36.0
        );
        marker(&mut svg, s.mark, lx + 18.0, ly);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 44.0,
            ly + 4.0,
            escape(&s.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn marker(svg: &mut String, mark: Mark, x: f64, y: f64) {
    match mark {
        Mark::Solid => {}
        Mark::DashedCircles => {
            let _ = writeln!(
                svg,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="white" stroke="black" stroke-width="1.5"/>"#
            );
        }
        Mark::DottedSquares => {
            let _ = writeln!(
                svg,
                r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="black"/>"#,
                x - 3.5,
                y - 3.5
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers_inside_the_range() {
        assert_eq!(
            ticks(0.0, 1000.0, 5.0),
            vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]
        );
        let t = ticks(1.3, 6.7, 6.0);
        assert_eq!(t.first(), Some(&2.0));
        assert_eq!(t.last(), Some(&6.0));
    }

    #[test]
    fn chart_names_its_axes_and_series() {
        let svg = line_chart(
            "Loss",
            "step",
            "loss (nats/token)",
            &[
                Series {
                    label: "train".into(),
                    points: vec![(0.0, 6.6), (10.0, 4.0)],
                    mark: Mark::Solid,
                },
                Series {
                    label: "valid <en>".into(),
                    points: vec![(10.0, 4.2)],
                    mark: Mark::DashedCircles,
                },
            ],
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains(">step<") && svg.contains(">loss (nats/token)<"));
        assert!(svg.contains("valid &lt;en&gt;"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
