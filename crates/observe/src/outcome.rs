//! Mature outcomes: what happened to a run's answer, known only later
//! (`{"run_id": …, "outcome": "accepted"|"rejected", "at_s": …}`, one JSON object a line).
//!
//! An outcome names its run by `run_id`. Outcomes are read first and held by run id, so
//! that the runs can then stream past them: the join costs memory per outcome, not per run.
//! A run line seen twice (an event logged twice) meets the same outcome twice.
//! A run id given twice is an error that names it (two verdicts on one answer cannot both be
//! true); an outcome later than the observation's cut-off (`as_of_s`) is not yet known, and
//! is counted as late; an outcome whose run never appears is counted as unmatched.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{ObserveError, OutcomeError};

/// What happened to a run's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Accepted,
    Rejected,
}

/// One outcome row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub run_id: String,
    pub outcome: Verdict,
    /// When the outcome became known, in seconds on the same clock as the runs' `at_s` tag.
    pub at_s: f64,
}

impl Verdict {
    /// The verdict's name in an outcome row: `accepted` or `rejected`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Accepted => "accepted",
            Verdict::Rejected => "rejected",
        }
    }
}

impl Outcome {
    /// One JSON outcome row, checked; else the reason.
    pub fn parse(line: &str) -> Result<Outcome, OutcomeError> {
        serde_json::from_str::<Outcome>(line)
            .map_err(OutcomeError::Row)?
            .checked()
    }

    /// An outcome row of a table, its verdict by name (the names a JSON row uses), checked.
    pub fn from_fields(run_id: String, outcome: &str, at_s: f64) -> Result<Outcome, OutcomeError> {
        let outcome = serde_json::from_value(serde_json::Value::String(outcome.to_string()))
            .map_err(OutcomeError::Verdict)?;
        Outcome {
            run_id,
            outcome,
            at_s,
        }
        .checked()
    }

    fn checked(self) -> Result<Outcome, OutcomeError> {
        if self.at_s.is_finite() {
            Ok(self)
        } else {
            Err(OutcomeError::NotFinite { at_s: self.at_s })
        }
    }
}

/// Outcome rows being gathered, one at a time, from JSONL or a table: a run id given twice
/// is an error naming both lines; rows after the cut-off are counted as late.
pub struct OutcomeRows {
    outcomes: Outcomes,
    first_line: HashMap<String, usize>,
    as_of_s: f64,
}

impl OutcomeRows {
    /// Gathers the outcomes known at `as_of_s`.
    pub fn new(as_of_s: f64) -> OutcomeRows {
        OutcomeRows {
            outcomes: Outcomes::default(),
            first_line: HashMap::new(),
            as_of_s,
        }
    }

    /// Adds the checked row of line (or table row) `line`, 1-based.
    pub fn add(&mut self, line: usize, row: Outcome) -> Result<(), ObserveError> {
        if let Some(&first) = self.first_line.get(&row.run_id) {
            return Err(ObserveError::DuplicateOutcome {
                run_id: row.run_id,
                first,
                again: line,
            });
        }
        self.first_line.insert(row.run_id.clone(), line);
        if row.at_s > self.as_of_s {
            self.outcomes.late += 1;
        } else {
            self.outcomes
                .by_run
                .insert(row.run_id, (row.outcome, row.at_s, false));
        }
        Ok(())
    }

    pub fn finish(self) -> Outcomes {
        self.outcomes
    }
}

/// The outcomes known at the cut-off, by run id.
#[derive(Debug, Default)]
pub struct Outcomes {
    /// The verdict, when it became known, and whether a run met it.
    by_run: HashMap<String, (Verdict, f64, bool)>,
    /// Outcomes after the cut-off: not yet known, not joined.
    pub late: u64,
}

impl Outcomes {
    /// Reads outcome rows (blank lines skipped): a malformed row is an error naming its
    /// line; so is a run id given twice, with both lines. Rows after `as_of_s` are counted
    /// as late and left out.
    pub fn parse(text: &str, as_of_s: f64) -> Result<Outcomes, ObserveError> {
        let mut rows = OutcomeRows::new(as_of_s);
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let row = Outcome::parse(line).map_err(|reason| ObserveError::Outcome {
                line: line_no,
                reason,
            })?;
            rows.add(line_no, row)?;
        }
        Ok(rows.finish())
    }

    /// The outcome of `run_id`, if known; the outcome counts as matched.
    pub fn join(&mut self, run_id: &str) -> Option<Verdict> {
        let (verdict, _, matched) = self.by_run.get_mut(run_id)?;
        *matched = true;
        Some(*verdict)
    }

    /// Outcomes no run has met.
    pub fn unmatched(&self) -> u64 {
        self.by_run.values().filter(|(_, _, m)| !m).count() as u64
    }

    /// The latest time an outcome became known.
    pub fn latest_s(&self) -> Option<f64> {
        self.by_run.values().map(|(_, at, _)| *at).reduce(f64::max)
    }

    /// Outcomes known at the cut-off.
    pub fn len(&self) -> usize {
        self.by_run.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_run.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_late_ones_wait_and_a_duplicate_is_named() {
        let text = r#"{"run_id":"a","outcome":"accepted","at_s":1}

{"run_id":"b","outcome":"rejected","at_s":5}
{"run_id":"c","outcome":"accepted","at_s":9.5}
"#;
        let mut o = Outcomes::parse(text, 6.0).unwrap();
        assert_eq!((o.len(), o.late), (2, 1));
        assert_eq!(o.unmatched(), 2);
        assert_eq!(o.join("a"), Some(Verdict::Accepted));
        assert_eq!(o.join("a"), Some(Verdict::Accepted), "a run logged twice");
        assert_eq!(o.join("c"), None, "late: not known at the cut-off");
        assert_eq!(o.unmatched(), 1);
        assert_eq!(o.latest_s(), Some(5.0));

        let dup = format!(
            "{text}{}",
            r#"{"run_id":"b","outcome":"accepted","at_s":7}"#
        );
        assert_eq!(
            Outcomes::parse(&dup, f64::INFINITY)
                .unwrap_err()
                .to_string(),
            "outcome for run_id \"b\" on line 5 repeats the one on line 3: a run has one outcome"
        );
        let bad = r#"{"run_id":"a","outcome":"maybe","at_s":1}"#;
        let err = Outcomes::parse(bad, f64::INFINITY).unwrap_err().to_string();
        assert!(
            err.starts_with("outcomes line 1: unknown variant `maybe`"),
            "{err}"
        );
    }

    #[test]
    fn a_table_row_reads_as_its_json_row_does() {
        for v in [Verdict::Accepted, Verdict::Rejected] {
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                format!("\"{}\"", v.name())
            );
        }
        let json = Outcome::parse(r#"{"run_id":"a","outcome":"rejected","at_s":2.5}"#).unwrap();
        assert_eq!(
            Outcome::from_fields("a".into(), "rejected", 2.5).unwrap(),
            json
        );
        let unknown = Outcome::from_fields("a".into(), "maybe", 1.0)
            .unwrap_err()
            .to_string();
        assert!(unknown.starts_with("unknown variant `maybe`"), "{unknown}");
        assert_eq!(
            Outcome::from_fields("a".into(), "accepted", f64::INFINITY)
                .unwrap_err()
                .to_string(),
            "at_s inf is not a finite number of seconds"
        );
    }
}
