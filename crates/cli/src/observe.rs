//! `decode-lab observe`: run records and mature outcomes joined by exact version, per slice,
//! with drift against a baseline version. The rules live in the `observe` crate; this
//! module reads the files (JSONL, or the Parquet tables of `export --parquet`), names the
//! language identifier, and prints.

use std::path::{Path, PathBuf};

use langid::LangId;
use observe::{DriftRule, Observation, Outcomes, Report, RunLineError};
use runs_parquet::{RecordLines, Table};

use crate::error::CliError;
use crate::files;

/// What `observe` was asked.
pub struct Request<'a> {
    pub runs: &'a [PathBuf],
    pub outcomes: Option<&'a Path>,
    pub baseline: Option<&'a str>,
    pub as_of_s: Option<f64>,
    pub identifier: &'a Path,
}

/// The shipped language identifier at `path`.
pub fn identifier(path: &Path) -> Result<LangId, CliError> {
    let bytes = std::fs::read(path).map_err(CliError::read(path))?;
    LangId::from_bytes(&bytes).map_err(|e| CliError::in_file(path, e))
}

pub fn observe(request: &Request) -> Result<Report, CliError> {
    if let Some(t) = request.as_of_s.filter(|t| !t.is_finite()) {
        return Err(CliError::Flag {
            flag: "--as-of",
            value: t.to_string(),
            why: "expected a finite number of seconds".into(),
        });
    }
    let identifier = identifier(request.identifier)?;
    let as_of_s = request.as_of_s.unwrap_or(f64::INFINITY);
    let outcomes = match request.outcomes {
        Some(path) => match runs_parquet::parquet_path(path, Table::Outcomes) {
            Some(parquet) => runs_parquet::read_outcomes(&parquet, as_of_s)?,
            None => {
                let text = files::read_text(path)?;
                Outcomes::parse(&text, as_of_s).map_err(|e| CliError::in_file(path, e))?
            }
        },
        None => Outcomes::default(),
    };
    let mut observation = Observation::new(&identifier, outcomes, request.as_of_s);
    for path in request.runs {
        let (source, lines) = run_lines(path)?;
        check_lines(lines, |number, _, read| {
            observation.add_read(&source, number, read);
            Ok(())
        })?;
    }
    Ok(observation.finish(request.baseline, &DriftRule::default())?)
}

/// Numbered run lines: a row's record text, or a line of JSONL.
pub type Lines = Box<dyn Iterator<Item = Result<(usize, String), CliError>>>;

/// The run lines of a path given on the command line, and the source its rejected lines
/// are named by: the `record` column of a Parquet runs table (a `.parquet` file, or the
/// `runs.parquet` of an export's directory), numbered by row; else the non-blank lines of
/// a JSONL file, numbered by line.
pub fn run_lines(path: &Path) -> Result<(String, Lines), CliError> {
    use std::io::BufRead;
    if let Some(parquet) = runs_parquet::parquet_path(path, Table::Runs) {
        let rows = RecordLines::open(&parquet)?;
        let source = parquet.display().to_string();
        return Ok((source, Box::new(rows.map(|r| r.map_err(CliError::from)))));
    }
    let source = path.display().to_string();
    let file = std::fs::File::open(path).map_err(CliError::read(path))?;
    let shown = path.to_path_buf();
    let lines = std::io::BufReader::new(file)
        .lines()
        .enumerate()
        .map(move |(i, line)| {
            line.map(|l| (i + 1, l))
                .map_err(|source| CliError::ReadLine {
                    path: shown.clone(),
                    line: i + 1,
                    source,
                })
        })
        .filter(|l| !matches!(l, Ok((_, text)) if text.trim().is_empty()));
    Ok((source, Box::new(lines)))
}

/// Lines read and checked at a time: enough to keep both cores busy, few enough that
/// memory holds a batch, not a file.
const BATCH: usize = 8_192;

/// Reads and checks (JSON, digest, ids: [`observe::read_run`]) a batch of lines at a time
/// on every core, then hands each line, its text and what it read to `each`, in order. What
/// it read is `observe::read_run`'s: the record, or the reason the line is rejected, which
/// is no failure of the command (`observe` and `export` count and name such lines).
pub fn check_lines(
    mut lines: Lines,
    mut each: impl FnMut(usize, &str, Result<policy::RunRecord, RunLineError>) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    loop {
        let batch = lines
            .by_ref()
            .take(BATCH)
            .collect::<Result<Vec<(usize, String)>, CliError>>()?;
        if batch.is_empty() {
            return Ok(());
        }
        let chunk = batch.len().div_ceil(threads).max(1);
        let read_part = |part: &[(usize, String)]| {
            part.iter()
                .map(|(_, line)| observe::read_run(line))
                .collect::<Vec<_>>()
        };
        let read = std::thread::scope(|scope| {
            let mut parts = batch.chunks(chunk);
            // This thread reads the first part itself, the others one part each beside it.
            let first = parts.next().unwrap_or_default();
            let others: Vec<_> = parts
                .map(|part| (part.len(), scope.spawn(move || read_part(part))))
                .collect();
            let mut read = read_part(first);
            for (n, handle) in others {
                // A reader that panicked names each of its lines rather than drop them.
                read.extend(
                    handle
                        .join()
                        .unwrap_or_else(|_| vec![Err(RunLineError::ReaderFailed); n]),
                );
            }
            read
        });
        for ((number, line), result) in batch.iter().zip(read) {
            each(*number, line, result)?;
        }
    }
}

/// The report for people: a row per version and per slice, then what was rejected, then
/// the drift verdict.
pub fn table(report: &Report) -> String {
    let mut out = format!(
        "{} runs in {} versions; {} lines rejected\n\n{}\n",
        report.runs,
        report.versions.len(),
        report.rejected_count,
        observe::table::COLUMNS.join(" | ")
    );
    for row in observe::table::rows(report) {
        out += &row.join(" | ");
        out += "\n";
    }
    for r in &report.rejected {
        out += &format!("rejected: {} line {}: {}\n", r.source, r.line, r.reason);
    }
    if report.duplicate_count > 0 {
        out += &format!(
            "{} lines repeat a run already read, each counted once\n",
            report.duplicate_count
        );
    }
    for d in &report.duplicates {
        out += &format!(
            "duplicate: {} line {} is run {} of {} line {}\n",
            d.source, d.line, d.run_id, d.first_source, d.first_line
        );
    }
    if report.runs_after_as_of > 0 {
        out += &format!(
            "{} runs arrived after the cut-off and are left out\n",
            report.runs_after_as_of
        );
    }
    if report.outcomes_unmatched > 0 || report.outcomes_late > 0 {
        out += &format!(
            "outcomes: {} match no run; {} arrived after the cut-off\n",
            report.outcomes_unmatched, report.outcomes_late
        );
    }
    if let Some(verdict) = &report.verdict {
        out += &format!("\n{verdict}\n");
    }
    out
}
