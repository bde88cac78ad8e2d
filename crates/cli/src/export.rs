//! `decode-lab export --parquet`: run records and their outcomes as the Parquet tables of
//! the `runs-parquet` crate (`runs.parquet`, `steps.parquet`, `outcomes.parquet` in the
//! output directory), for DuckDB, Spark or Trino to join by `version_id` and `run_id`.
//!
//! Run lines are read and checked as `observe` reads them ([`crate::observe::check_lines`]).
//! A line that is not a valid record (bad JSON, a digest or an id its content does not give)
//! is skipped, named on standard error (`rejected: SOURCE line N: reason`) and counted, and
//! the export then exits with 1: the tables hold every valid record, and a script learns
//! that some lines were left out. An outcome row that is not one is an error naming its
//! line, as in `observe`, and the old tables are left as they were: the new ones are staged
//! and moved into place together ([`crate::files`]), and no output may be, or hold, a file
//! the export reads. Each run is written once: a line that repeats a run already written
//! (the same file given twice, a JSONL file beside its own export) is named on standard
//! error and left out, and one whose run id repeats with other timings is rejected
//! ([`observe::SeenRuns`], 32 bytes a run). A run id given twice among the outcomes is
//! found by whoever reads them (`observe` names it).

use std::path::Path;
use std::process::ExitCode;

use policy::RunRecord;
use runs_parquet::{Export, Table, Written};

use crate::error::CliError;
use crate::files::{self, StagedDir};
use crate::named::Named;
use crate::observe::{check_lines, identifier, outcome_rows, run_lines};
use crate::output;
use crate::{model_dir, ExportArgs};

/// Rejected lines named one by one; past it they are counted.
const NAMED_REJECTIONS: u64 = observe::MAX_REJECTED_LISTED as u64;

pub fn run(args: &ExportArgs) -> Result<ExitCode, CliError> {
    // `--parquet` requires `--out` (clap checks it).
    let out_dir = args.out.clone().unwrap_or_default();
    let (langid, inputs) = inputs(args);
    let tables = [Table::Runs, Table::Steps, Table::Outcomes];
    let out = Named::new("--out", &out_dir);
    let mut outputs = vec![out.clone()];
    outputs.extend(tables.map(|t| Named::new("--out", t.file_in(&out_dir))));
    files::check(&outputs, &inputs)?;
    let identifier = identifier(&langid)?;
    // The tables are written in a staging directory and moved into place only when all
    // three are whole: a failed export leaves the old ones as they were.
    let stage = StagedDir::new(&out)?;
    let mut export = Export::create(stage.path())?;
    let left = write(&mut export, args, &identifier)?;
    let written = export.finish()?;
    let names = tables.map(|t| format!("{}.parquet", t.name()));
    stage.commit(&names.each_ref().map(String::as_str))?;
    output::print_line(&summary(&written, &left, &out_dir))?;
    Ok(left.exit_code())
}

/// The language identifier an export slices with, and every file it reads (the runs, the
/// outcomes, the identifier), which no output may be or hold.
pub fn inputs(args: &ExportArgs) -> (std::path::PathBuf, Vec<Named>) {
    let dir = args.model.clone().unwrap_or_else(model_dir::default_dir);
    let langid = args
        .langid
        .clone()
        .unwrap_or_else(|| dir.join(model_dir::LANGID_FILE));
    let mut inputs = Vec::new();
    for runs in &args.runs {
        inputs.push(Named::new("RUNS", runs));
        inputs.extend(files::files_in("RUNS", runs));
    }
    if let Some(outcomes) = &args.outcomes {
        inputs.push(Named::new("--outcomes", outcomes));
        inputs.extend(files::files_in("--outcomes", outcomes));
    }
    inputs.push(Named::new("--langid", &langid));
    (langid, inputs)
}

/// What the export left out: lines rejected, and lines that repeat a run already written.
#[derive(Default)]
pub struct LeftOut {
    pub rejected: u64,
    pub duplicates: u64,
}

impl LeftOut {
    /// What was left out, in words to follow a summary (`; …`), or nothing.
    pub fn words(&self) -> String {
        let mut text = String::new();
        let rejected = self.rejected;
        if rejected > 0 {
            let plural = if rejected == 1 { "" } else { "s" };
            text += &format!("; {rejected} line{plural} rejected and left out");
            if rejected > NAMED_REJECTIONS {
                text += &format!(" (the first {NAMED_REJECTIONS} named above)");
            }
        }
        if self.duplicates > 0 {
            text += &format!(
                "; {} line{} repeated a run already written, which is written once",
                self.duplicates,
                if self.duplicates == 1 { "" } else { "s" }
            );
        }
        text
    }

    /// Exit code 1 when a line was rejected: the output holds every valid record, and a
    /// script learns that some lines were left out.
    pub fn exit_code(&self) -> ExitCode {
        match self.rejected {
            0 => ExitCode::SUCCESS,
            _ => ExitCode::from(1),
        }
    }
}

/// Hands `each` every run of the export's RUNS once ([`observe::SeenRuns`]), with its line
/// and its slice; a line that is not a sound record, or that repeats a run, is named on
/// standard error (the first [`NAMED_REJECTIONS`] of each) and counted.
pub fn each_run(
    args: &ExportArgs,
    identifier: &langid::LangId,
    mut each: impl FnMut(&str, &RunRecord, &str) -> Result<(), CliError>,
) -> Result<LeftOut, CliError> {
    let mut left = LeftOut::default();
    let mut seen = observe::SeenRuns::default();
    for path in &args.runs {
        let (source, lines) = run_lines(path)?;
        check_lines(lines, |number, line, read| {
            let kept = read.and_then(|record| match seen.see(&record, &source, number) {
                observe::Seen::First => Ok(Some(record)),
                observe::Seen::Again(d) => {
                    left.duplicates += 1;
                    if left.duplicates <= NAMED_REJECTIONS {
                        output::note(&format!(
                            "duplicate: {source} line {number} is run {} of {} line {}; written once",
                            d.run_id, d.first_source, d.first_line
                        ));
                    }
                    Ok(None)
                }
                observe::Seen::Conflict(reason) => Err(reason),
            });
            match kept {
                Ok(Some(record)) => {
                    let slice = observe::slice_of(&record, identifier);
                    each(line.trim(), &record, &slice)
                }
                Ok(None) => Ok(()),
                Err(reason) => {
                    left.rejected += 1;
                    if left.rejected <= NAMED_REJECTIONS {
                        output::note(&format!("rejected: {source} line {number}: {reason}"));
                    }
                    Ok(())
                }
            }
        })?;
    }
    Ok(left)
}

/// Writes the outcomes, then the runs.
fn write(
    export: &mut Export,
    args: &ExportArgs,
    identifier: &langid::LangId,
) -> Result<LeftOut, CliError> {
    if let Some(path) = &args.outcomes {
        write_outcomes(export, path)?;
    }
    each_run(args, identifier, |line, record, slice| {
        Ok(export.add_run(line, record, slice)?)
    })
}

/// Outcome rows of a JSONL file, each checked by `observe`'s rule and written in order.
fn write_outcomes(export: &mut Export, path: &Path) -> Result<(), CliError> {
    outcome_rows(path, |outcome| Ok(export.add_outcome(&outcome)?))
}

fn summary(written: &Written, left: &LeftOut, out: &Path) -> String {
    let mut text = format!(
        "wrote {} runs, {} steps and {} outcomes to {} ({}, {}, {})",
        written.runs,
        written.steps,
        written.outcomes,
        out.display(),
        Table::Runs.file_in(out).display(),
        Table::Steps.file_in(out).display(),
        Table::Outcomes.file_in(out).display(),
    );
    text += &left.words();
    text
}
