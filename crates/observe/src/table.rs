//! The report's figures in words, one row per version and per slice, for every reader: the
//! CLI prints the rows, the lab's Observe panel shows them as its table.

use crate::{Report, Summary};

/// The columns of [`rows`].
pub const COLUMNS: [&str; 9] = [
    "version",
    "slice",
    "runs",
    "TTFT p50 / p99 (ms)",
    "time per token p99 (ms)",
    "tokens/s",
    "fell back",
    "outcome rate (95 %)",
    "joined",
];

/// A version's rows: the whole version (slice `all`), then each slice.
pub fn rows(report: &Report) -> Vec<[String; 9]> {
    let mut out = Vec::new();
    for v in &report.versions {
        let groups = std::iter::once(("all", &v.summary))
            .chain(v.slices.iter().map(|s| (s.slice.as_str(), &s.summary)));
        for (slice, s) in groups {
            out.push(row(&v.version_id, slice, s));
        }
    }
    out
}

fn row(version: &str, slice: &str, s: &Summary) -> [String; 9] {
    let o = &s.outcomes;
    [
        version.to_string(),
        slice.to_string(),
        s.runs.to_string(),
        format!(
            "{} / {}",
            ms(s.health.ttft_p50_ms.map(|q| q.value)),
            ms(s.ttft_p99_ms)
        ),
        ms(s.health.tpot_p99_ms.map(|q| q.value)),
        s.health
            .tokens_per_s
            .map_or("–".into(), |t| format!("{t:.0}")),
        percent(s.health.fallback_share),
        rate(o.rate, o.rate_95),
        format!("{} of {}", o.joined, s.runs),
    ]
}

fn ms(q: Option<f64>) -> String {
    q.map_or("–".into(), |v| format!("{v:.2}"))
}

fn percent(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{:.1} %", v * 100.0))
}

/// A rate and its 95 % interval in percent: "25.1 % (19.3–32.1)".
pub fn rate(rate: Option<f64>, interval: Option<(f64, f64)>) -> String {
    let interval = interval.map_or(String::new(), |(lo, hi)| {
        format!(" ({:.1}–{:.1})", lo * 100.0, hi * 100.0)
    });
    format!("{}{interval}", percent(rate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcomes;
    use crate::{DriftRule, Inspector, Observation};

    struct English;
    impl Inspector for English {
        fn slice_of(&self, _: &str) -> String {
            "en".into()
        }
        fn unseen_bytes(&self, _: &str) -> usize {
            0
        }
    }

    /// Written out by hand: the words of a figure the row holds.
    #[test]
    fn a_rate_reads_with_its_interval_and_an_absent_one_as_a_dash() {
        assert_eq!(
            rate(Some(0.251), Some((0.193, 0.321))),
            "25.1 % (19.3–32.1)"
        );
        assert_eq!(rate(None, None), "–");
        assert_eq!(ms(Some(1.234)), "1.23");
    }

    #[test]
    fn an_empty_report_has_no_rows() {
        let report = Observation::new(&English, Outcomes::default(), None)
            .finish(None, &DriftRule::default())
            .unwrap();
        assert!(rows(&report).is_empty());
    }
}
