//! `decode-lab observe`: run records and mature outcomes joined by exact version, per slice,
//! with drift against a baseline version. The rules live in the `observe` crate; this
//! module reads the files, names the language identifier, and prints.

use std::path::{Path, PathBuf};

use langid::LangId;
use observe::{DriftRule, Observation, Outcomes, Report};

/// What `observe` was asked.
pub struct Request<'a> {
    pub runs: &'a [PathBuf],
    pub outcomes: Option<&'a Path>,
    pub baseline: Option<&'a str>,
    pub as_of_s: Option<f64>,
    pub identifier: &'a Path,
}

pub fn observe(request: &Request) -> Result<Report, String> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    if let Some(t) = request.as_of_s.filter(|t| !t.is_finite()) {
        return Err(format!("--as-of {t}: expected a finite number of seconds"));
    }
    let bytes = std::fs::read(request.identifier)
        .map_err(|e| format!("cannot read {}: {e}", request.identifier.display()))?;
    let identifier =
        LangId::from_bytes(&bytes).map_err(|e| format!("{}: {e}", request.identifier.display()))?;
    let outcomes = match request.outcomes {
        Some(path) => Outcomes::parse(&read(path)?, request.as_of_s.unwrap_or(f64::INFINITY))
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => Outcomes::default(),
    };
    let mut observation = Observation::new(&identifier, outcomes, request.as_of_s);
    for path in request.runs {
        stream(&mut observation, path)?;
    }
    observation
        .finish(request.baseline, &DriftRule::default())
        .map_err(|e| e.to_string())
}

/// Lines read and checked at a time: enough to keep both cores busy, few enough that
/// memory holds a batch, not a file.
const BATCH: usize = 8_192;

/// Streams the run lines of `path` into the observation: a batch of lines at a time, read
/// and checked (JSON, digest, ids) on every core, then added in their order.
fn stream(observation: &mut Observation, path: &Path) -> Result<(), String> {
    use std::io::BufRead;
    let source = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {source}: {e}"))?;
    let mut lines = std::io::BufReader::new(file).lines();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut number, mut done) = (0, false);
    while !done {
        let mut batch = Vec::with_capacity(BATCH);
        let mut taken = 0;
        for line in lines.by_ref().take(BATCH) {
            taken += 1;
            number += 1;
            let line = line.map_err(|e| format!("cannot read {source} at line {number}: {e}"))?;
            if !line.trim().is_empty() {
                batch.push((number, line));
            }
        }
        done = taken < BATCH;
        let chunk = batch.len().div_ceil(threads).max(1);
        let read_part = |part: &[(usize, String)]| -> Vec<Result<policy::RunRecord, String>> {
            part.iter()
                .map(|(_, line)| observe::read_run(line))
                .collect()
        };
        let read: Vec<Result<policy::RunRecord, String>> = std::thread::scope(|scope| {
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
                        .unwrap_or_else(|_| vec![Err("the line's reader failed".to_string()); n]),
                );
            }
            read
        });
        for ((n, _), result) in batch.iter().zip(read) {
            observation.add_read(&source, *n, result);
        }
    }
    Ok(())
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
