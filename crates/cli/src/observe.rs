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
/// Each outcome row of the JSONL file at `path`, checked by `observe`'s rule, in order; a
/// row that is not one is an error naming its line.
pub fn outcome_rows(
    path: &Path,
    mut each: impl FnMut(observe::Outcome) -> Result<(), CliError>,
) -> Result<(), CliError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(CliError::read(path))?;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| CliError::ReadLine {
            path: path.to_path_buf(),
            line: i + 1,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let outcome = observe::Outcome::parse(&line).map_err(|reason| CliError::OutcomeLine {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        })?;
        each(outcome)?;
    }
    Ok(())
}

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

/// The report for people: what was read in a sentence, then the `observe` crate's parts
/// ([`observe::parts`], as the lab's Observe panel draws them) as Markdown.
pub fn table(report: &Report) -> String {
    let parts = observe::parts::parts(report);
    format!(
        "{}\n\n{}",
        observe::parts::summary(report),
        report::markdown(&parts).trim_end()
    )
}
