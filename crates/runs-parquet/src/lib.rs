//! Run records, their steps and their mature outcomes as Parquet: the tables that
//! `decode-lab export --parquet` writes for DuckDB, Spark or Trino, and that `observe` reads
//! back.
//!
//! Parquet holds one table a file, so an export is a directory of three files, each
//! joined to the others by `run_id`:
//!
//! | file | a row is | columns |
//! | --- | --- | --- |
//! | `runs.parquet` | a run | see below |
//! | `steps.parquet` | a decoding step | `run_id`, `version_id`, `step`, `token`, `text`, `prob`, `logprob`, `entropy` (nats), `survivors`, `draw` (null when greedy), `model_prob` and `model_logprob` (the chosen token under the model's own softmax, before the policy; null in records made before them), `model_us`, `policy_us` |
//! | `outcomes.parquet` | a mature outcome | `run_id`, `outcome` (`accepted` or `rejected`), `at_s` |
//!
//! `runs.parquet`, one row per run:
//! - ids: `run_id`, `version_id`;
//! - the version key's fields: `app_version`, `policy_version`, `model_name`, `model_hash`,
//!   `tokenizer_name`, `tokenizer_hash`, `prompt_template_hash`, `precision` (`f32`,
//!   `int8`, or null in records made before it was recorded), `backend` (`cpu-reference` or
//!   `webgpu`), the scalar sampling parameters `temperature`, `top_k`, `top_p`, `min_p`,
//!   `repetition_penalty`, `frequency_penalty`, `presence_penalty`, `no_repeat_ngram`,
//!   `min_new_tokens`, `eos_token` (null when none), `stage_order` (the fixed order's name,
//!   or a sampler chain as `--samplers` takes it), `max_tokens`, and the
//!   whole key as JSON in `version_key` (its lists: forbidden tokens, logit biases, stop
//!   strings and tokens);
//! - `slice`: the slice `observe` puts the run in (its `slice` tag, else the language
//!   identifier's label, given by the exporter), and `tags`, every tag as a
//!   `MAP<VARCHAR, VARCHAR>`;
//! - the run: `seed` (unsigned), `prompt_bytes` (of the rendered prompt), `prompt_tokens`,
//!   `output_tokens`, `ttft_ms`, `decode_ms` (the latencies of every token after the first),
//!   `tpot_ms` (`decode_ms` over those tokens; null for a run of one token or none),
//!   `stop_reason`, `stop_string`, `degraded_reason` (why a run that asked for a GPU fell
//!   back to `cpu-reference`; null when it did not), `at_s` (the `at_s` tag, when it is a
//!   number);
//! - `record`: the run record itself, as the exact JSON line it was read from, so that a
//!   reader re-checks its digest and ids ([`observe::read_run`]) rather than trust the
//!   columns.
//!
//! The columns derive from the record by `observe`'s own rules ([`observe::slice_of`],
//! [`observe::at_s_of`], the TTFT and time per output token of `observe::group`), so SQL
//! over them gives what `observe` reports. Files are Snappy-compressed; each names its table
//! and schema version in its key-value metadata (`decode-lab.table`).
//!
//! [`Export`] streams: it holds one row group per table (at most [`RUNS_PER_GROUP`] runs or
//! [`RECORD_BYTES_PER_GROUP`] bytes of records, [`ROWS_PER_GROUP`] steps or outcomes, or
//! other [`GroupLimits`]), never a file. [`RecordLines`] reads the `record` column back a
//! row group at a time, and [`read_outcomes`] the outcome rows, through `observe`'s own row
//! rules.
//!
//! Native only: this crate links the `parquet` crate's column writer, which the page's wasm
//! never needs.

#![forbid(unsafe_code)]

mod columns;
mod error;
mod read;
mod write;

use std::path::{Path, PathBuf};

pub use error::{FieldError, OutcomeRowError, RunsParquetError};
pub use read::{read_outcomes, RecordLines};
pub use write::{
    Export, GroupLimits, Written, RECORD_BYTES_PER_GROUP, ROWS_PER_GROUP, RUNS_PER_GROUP,
};

/// The three tables of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Runs,
    Steps,
    Outcomes,
}

impl Table {
    /// The table's name, in its file's metadata and (with `.parquet`) its file name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Runs => "runs",
            Table::Steps => "steps",
            Table::Outcomes => "outcomes",
        }
    }

    /// The table's file in an export directory.
    pub fn file_in(self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.parquet", self.name()))
    }
}

/// Where the Parquet of `table` is for a path given on the command line: the path itself
/// when it ends in `.parquet`, the table's file when it is a directory (an export), and
/// `None` when it is neither (a JSONL file). The one rule by which `observe` tells Parquet
/// from JSONL.
pub fn parquet_path(path: &Path, table: Table) -> Option<PathBuf> {
    if path.extension().is_some_and(|e| e == "parquet") {
        Some(path.to_path_buf())
    } else if path.is_dir() {
        Some(table.file_in(path))
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
