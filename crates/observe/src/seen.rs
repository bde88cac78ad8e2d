//! Each run counted once. A run is known by its `run_id`, which its digest gives, so the same
//! id is the same generation: seen again (the same file given twice, a JSONL file beside its
//! own Parquet export, a line logged twice) it is a duplicate, counted once and named with
//! both places. The digest does not cover the timings, so the same id with other timings is
//! two stories of one run, and the later line is rejected.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use policy::RunRecord;
use serde::{Deserialize, Serialize};

use crate::error::RunLineError;

/// A run line that repeats a run already counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    pub run_id: String,
    pub source: String,
    pub line: usize,
    pub first_source: String,
    pub first_line: usize,
}

/// What a run line is, against those seen before it.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    /// The run's first line: count it.
    First,
    /// The same run again, timings and all.
    Again(Duplicate),
    /// The same run id with other timings: the reason to reject the line
    /// ([`RunLineError::Conflict`]).
    Conflict(RunLineError),
}

/// Where a run was first seen, and its timings' fingerprint.
struct First {
    timings: u64,
    source: u32,
    line: usize,
}

/// The runs seen so far: 8 bytes of id and 24 of place a run, so a million runs take tens of
/// megabytes, not their records.
#[derive(Default)]
pub struct SeenRuns {
    runs: HashMap<u64, First>,
    sources: Vec<String>,
}

impl SeenRuns {
    /// Notes the run of `record`, read at `source` line `line`.
    pub fn see(&mut self, record: &RunRecord, source: &str, line: usize) -> Seen {
        let run_id = record
            .run_id
            .clone()
            .unwrap_or_else(|| record.computed_run_id());
        let key = u64::from_str_radix(&run_id, 16).unwrap_or_else(|_| hash(&run_id));
        let timings = timings(record);
        if let Some(first) = self.runs.get(&key) {
            let first_source = self.sources[first.source as usize].clone();
            return if first.timings == timings {
                Seen::Again(Duplicate {
                    run_id,
                    source: source.to_string(),
                    line,
                    first_source,
                    first_line: first.line,
                })
            } else {
                Seen::Conflict(RunLineError::Conflict {
                    run_id,
                    first_source,
                    first_line: first.line,
                })
            };
        }
        if self.sources.last().is_none_or(|s| s != source) {
            self.sources.push(source.to_string());
        }
        let source = (self.sources.len() - 1) as u32;
        self.runs.insert(
            key,
            First {
                timings,
                source,
                line,
            },
        );
        Seen::First
    }
}

fn hash(value: impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// The timings' bits, hashed: what the digest leaves out.
fn timings(record: &RunRecord) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    record.ttft_us.to_bits().hash(&mut hasher);
    for t in &record.token_latencies_us {
        t.to_bits().hash(&mut hasher);
    }
    for s in &record.steps {
        (s.model_us.to_bits(), s.policy_us.to_bits()).hash(&mut hasher);
    }
    hasher.finish()
}
