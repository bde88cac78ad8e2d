//! Telemetry joined by exact version: run records and their mature outcomes, grouped by
//! `version_id` and then by slice, with drift against a baseline version and a verdict.
//!
//! The chapter asks to "join service health, input quality, prediction distributions, slice
//! behavior, and mature outcomes by exact version". An [`Observation`] reads the outcomes
//! first ([`Outcomes`]), then streams run lines past them: each line is a run record
//! (`policy::RunRecord`) whose digest and ids are checked; a line that is not one is a
//! [`Rejected`] entry naming its source, line and reason, never dropped in silence. A run's
//! slice is its `slice` tag, or what the [`Inspector`] (the project's language identifier)
//! says of its prompt. Memory grows with versions and slices, not with runs
//! ([`quantiles`]); [`Observation::finish`] gives the [`Report`], and [`parts`] its report
//! as `report` parts for the CLI (Markdown) and the lab (HTML).
//!
//! Pure like `policy`: no I/O, no clock; the CLI and the lab's worker feed it text.

#![forbid(unsafe_code)]

pub mod bins;
pub mod chrf;
mod drift;
mod error;
pub mod group;
pub mod otlp;
pub mod outcome;
pub mod parts;
pub mod quantiles;
mod seen;
pub mod table;

use std::collections::BTreeMap;

use policy::{RunRecord, VersionKey};
use serde::{Deserialize, Serialize};

pub use drift::{
    newcombe, Breach, Drift, DriftRule, SliceDrift, Verdict as DriftVerdict, LATENCY_DETECTOR,
};
pub use error::{ObserveError, OutcomeError, RunLineError};
pub use group::{Group, Summary};
pub use outcome::{Outcome, OutcomeRows, Outcomes, Verdict};
pub use seen::{Duplicate, Seen, SeenRuns};

/// The tag that names a run's slice, and the one that says when it ran (seconds).
pub const SLICE_TAG: &str = "slice";
pub const AT_TAG: &str = "at_s";

/// What the observation asks of a prompt without a `slice` tag.
pub trait Inspector {
    /// The slice (a language code) the prompt belongs to.
    fn slice_of(&self, prompt: &str) -> String;
    /// Bytes of the prompt in characters or n-grams never seen in training.
    fn unseen_bytes(&self, prompt: &str) -> usize;
}

/// The project's language identifier as the inspector: a prompt's slice is the language it
/// names, and its unseen bytes those no n-gram it kept covers. The CLI and the lab's worker
/// both observe with it.
impl Inspector for langid::LangId {
    fn slice_of(&self, prompt: &str) -> String {
        self.classify(prompt).label().to_string()
    }

    fn unseen_bytes(&self, prompt: &str) -> usize {
        self.novelty(prompt).unseen_ngram_bytes
    }
}

/// A run line that is not counted, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    pub source: String,
    pub line: usize,
    pub reason: String,
}

/// Runs of one version: its key, and a group per slice beside the whole.
struct VersionRuns {
    key: VersionKey,
    all: Group,
    slices: BTreeMap<String, Group>,
}

/// An observation in progress.
pub struct Observation<'a> {
    inspector: &'a dyn Inspector,
    outcomes: Outcomes,
    versions: BTreeMap<String, VersionRuns>,
    rejected: Vec<Rejected>,
    rejected_count: u64,
    seen: SeenRuns,
    duplicates: Vec<Duplicate>,
    duplicate_count: u64,
    as_of_s: Option<f64>,
    after_as_of: u64,
    earliest_s: Option<f64>,
    latest_s: Option<f64>,
}

/// Rejected lines kept word for word; past it they are counted.
pub const MAX_REJECTED_LISTED: usize = 1_000;

impl<'a> Observation<'a> {
    /// Starts with the outcomes known at `as_of_s` (all of them when `None`).
    pub fn new(
        inspector: &'a dyn Inspector,
        outcomes: Outcomes,
        as_of_s: Option<f64>,
    ) -> Observation<'a> {
        Observation {
            inspector,
            latest_s: outcomes.latest_s(),
            outcomes,
            versions: BTreeMap::new(),
            rejected: Vec::new(),
            rejected_count: 0,
            seen: SeenRuns::default(),
            duplicates: Vec::new(),
            duplicate_count: 0,
            as_of_s,
            after_as_of: 0,
            earliest_s: None,
        }
    }

    /// Adds every line of `text` (JSONL run records; blank lines skipped), naming `source`
    /// in what it rejects.
    pub fn add_lines(&mut self, source: &str, text: &str) {
        for (i, line) in text.lines().enumerate() {
            if !line.trim().is_empty() {
                self.add_line(source, i + 1, line);
            }
        }
    }

    /// Adds one run line.
    pub fn add_line(&mut self, source: &str, line: usize, text: &str) {
        self.add_read(source, line, read_run(text));
    }

    /// Adds a line already read with [`read_run`] (which is where the time goes, so a caller
    /// with threads reads lines in parallel and adds them in order). A run that arrived
    /// after the cut-off is left out and counted; a run already counted is a
    /// [`Duplicate`], and one whose id repeats with other timings is rejected ([`SeenRuns`]).
    pub fn add_read(&mut self, source: &str, line: usize, read: Result<RunRecord, RunLineError>) {
        let record = match read {
            Ok(record) => record,
            Err(reason) => return self.reject(source, line, reason.to_string()),
        };
        let at_s = at_s_of(&record);
        if let Some(at) = at_s {
            self.earliest_s = Some(self.earliest_s.map_or(at, |e| e.min(at)));
            if self.as_of_s.is_some_and(|cut| at > cut) {
                self.after_as_of += 1;
                return;
            }
        }
        match self.seen.see(&record, source, line) {
            Seen::First => self.add_run(&record, at_s),
            Seen::Again(duplicate) => {
                self.duplicate_count += 1;
                if self.duplicates.len() < MAX_REJECTED_LISTED {
                    self.duplicates.push(duplicate);
                }
            }
            Seen::Conflict(reason) => self.reject(source, line, reason.to_string()),
        }
    }

    fn reject(&mut self, source: &str, line: usize, reason: String) {
        self.rejected_count += 1;
        if self.rejected.len() < MAX_REJECTED_LISTED {
            self.rejected.push(Rejected {
                source: source.to_string(),
                line,
                reason,
            });
        }
    }

    /// Counts a run record already read, checked and seen for the first time.
    fn add_run(&mut self, record: &RunRecord, at_s: Option<f64>) {
        let prompt = &record.config.prompt;
        let slice = slice_of(record, self.inspector);
        if let Some(at) = at_s {
            self.latest_s = Some(self.latest_s.map_or(at, |l| l.max(at)));
        }
        let run_id = record
            .run_id
            .clone()
            .unwrap_or_else(|| record.computed_run_id());
        let facts = group::RunFacts {
            record,
            unseen_bytes: self.inspector.unseen_bytes(prompt),
            outcome: self.outcomes.join(&run_id),
            at_s,
        };
        let version = record
            .version_id
            .clone()
            .unwrap_or_else(|| record.computed_version_id());
        let runs = self.versions.entry(version).or_insert_with(|| VersionRuns {
            key: VersionKey::of(record),
            all: Group::default(),
            slices: BTreeMap::new(),
        });
        runs.all.add(&facts);
        runs.slices.entry(slice).or_default().add(&facts);
    }

    /// The report, with drift against `baseline` (a version id) when given.
    pub fn finish(self, baseline: Option<&str>, rule: &DriftRule) -> Result<Report, ObserveError> {
        if let (Some(as_of_s), Some(first_s)) = (self.as_of_s, self.earliest_s) {
            if as_of_s < first_s {
                return Err(ObserveError::AsOfBeforeRuns { as_of_s, first_s });
            }
        }
        let now = self.as_of_s.filter(|t| t.is_finite()).or(self.latest_s);
        let versions: Vec<VersionReport> = self
            .versions
            .iter()
            .map(|(id, v)| VersionReport {
                version_id: id.clone(),
                key: v.key.clone(),
                summary: v.all.summary(now),
                slices: v
                    .slices
                    .iter()
                    .map(|(slice, g)| SliceReport {
                        slice: slice.clone(),
                        summary: g.summary(now),
                    })
                    .collect(),
            })
            .collect();
        let drift = match baseline {
            Some(b) => {
                if !self.versions.contains_key(b) {
                    return Err(ObserveError::UnknownBaseline(
                        b.to_string(),
                        self.versions.keys().cloned().collect::<Vec<_>>().join(", "),
                    ));
                }
                Some(drift::compare(b, &versions, rule))
            }
            None => None,
        };
        let verdict = drift.as_ref().map(|d| {
            d.candidates
                .iter()
                .map(|c| format!("{}: {}", c.version_id, c.verdict.words))
                .collect::<Vec<_>>()
                .join("\n")
        });
        Ok(Report {
            runs: versions.iter().map(|v| v.summary.runs).sum(),
            rejected_count: self.rejected_count,
            rejected: self.rejected,
            duplicate_count: self.duplicate_count,
            duplicates: self.duplicates,
            runs_after_as_of: self.after_as_of,
            outcomes_unmatched: self.outcomes.unmatched(),
            outcomes_late: self.outcomes.late,
            as_of_s: now,
            versions,
            drift,
            verdict,
        })
    }
}

/// The slice a run belongs to: its `slice` tag, else what `inspector` says of its prompt.
pub fn slice_of(record: &RunRecord, inspector: &dyn Inspector) -> String {
    match record.tags.get(SLICE_TAG) {
        Some(slice) => slice.clone(),
        None => inspector.slice_of(&record.config.prompt),
    }
}

/// When a run ran: its `at_s` tag, when that is a finite number of seconds.
pub fn at_s_of(record: &RunRecord) -> Option<f64> {
    record
        .tags
        .get(AT_TAG)
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite())
}

/// A run line as a checked record: JSON, an unaltered digest, ids its content gives, and
/// a record a run could have written; else the reason the line is rejected.
pub fn read_run(text: &str) -> Result<RunRecord, RunLineError> {
    let mut records = policy::parse_records(text)?;
    if records.len() != 1 {
        return Err(RunLineError::Records {
            count: records.len(),
        });
    }
    let record = records.remove(0);
    record.audit().map_err(RunLineError::Audit)?;
    Ok(record)
}

/// What the observation found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub runs: u64,
    pub versions: Vec<VersionReport>,
    /// Lines not counted (the first [`MAX_REJECTED_LISTED`]), and how many in all.
    pub rejected: Vec<Rejected>,
    pub rejected_count: u64,
    /// Lines that repeat a run already counted (the first [`MAX_REJECTED_LISTED`]), and how
    /// many in all: each run is counted once.
    #[serde(default)]
    pub duplicates: Vec<Duplicate>,
    #[serde(default)]
    pub duplicate_count: u64,
    /// Runs that arrived after `--as-of`, left out.
    #[serde(default)]
    pub runs_after_as_of: u64,
    /// Outcomes whose run never appeared, and outcomes after the cut-off.
    pub outcomes_unmatched: u64,
    pub outcomes_late: u64,
    /// The time the unjoined runs' ages are measured at.
    pub as_of_s: Option<f64>,
    pub drift: Option<Drift>,
    /// Each candidate's verdict in words, prefixed by its version (absent without a baseline).
    pub verdict: Option<String>,
}

/// One version: its exact key, its figures, and each slice's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionReport {
    pub version_id: String,
    pub key: VersionKey,
    #[serde(flatten)]
    pub summary: Summary,
    pub slices: Vec<SliceReport>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceReport {
    pub slice: String,
    #[serde(flatten)]
    pub summary: Summary,
}
