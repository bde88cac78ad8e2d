//! Reading an export back: the `record` column of a runs table, a row at a time, and the
//! rows of an outcomes table through `observe`'s own outcome rules. Only the columns read
//! are decoded; a file written by another engine serves as long as it has them.

use std::fs::File;
use std::path::Path;

use observe::{Outcome, OutcomeRows, Outcomes};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::record::reader::RowIter;
use parquet::record::{Field, Row};
use parquet::schema::types::Type;

use crate::error::{FieldError, OutcomeRowError, RunsParquetError};
use crate::Table;

/// The rows of `columns` of the Parquet file at `path`, a row group at a time.
fn rows(
    path: &Path,
    table: Table,
    columns: &[&'static str],
) -> Result<RowIter<'static>, RunsParquetError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| RunsParquetError::Open {
        path: shown.clone(),
        source,
    })?;
    let parquet = |source| RunsParquetError::Parquet {
        path: shown.clone(),
        source,
    };
    let reader = SerializedFileReader::new(file).map_err(parquet)?;
    let root = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema();
    let fields = columns
        .iter()
        .map(|&column| {
            root.get_fields()
                .iter()
                .find(|f| f.name() == column)
                .cloned()
                .ok_or_else(|| RunsParquetError::MissingColumn {
                    path: shown.clone(),
                    column,
                    table: table.name(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let projection = Type::group_type_builder(root.name())
        .with_fields(fields)
        .build()
        .map_err(parquet)?;
    RowIter::from_file_into(Box::new(reader))
        .project(Some(projection))
        .map_err(parquet)
}

/// Row `row`'s field `i` as text; else what it is instead.
fn text(row: &Row, i: usize, column: &'static str) -> Result<String, FieldError> {
    match row.get_column_iter().nth(i).map(|(_, f)| f) {
        Some(Field::Str(s)) => Ok(s.clone()),
        Some(Field::Null) | None => Err(FieldError::Null { column }),
        Some(other) => Err(FieldError::WrongType {
            column,
            found: other.to_string(),
            expected: "text",
        }),
    }
}

/// The `record` column of a runs table: each row's run record as its JSON line, with the
/// row's number (1-based), for [`observe::read_run`] to check like any line of JSONL.
pub struct RecordLines {
    path: String,
    rows: RowIter<'static>,
    row: usize,
}

impl RecordLines {
    pub fn open(path: &Path) -> Result<RecordLines, RunsParquetError> {
        Ok(RecordLines {
            path: path.display().to_string(),
            rows: rows(path, Table::Runs, &["record"])?,
            row: 0,
        })
    }
}

impl Iterator for RecordLines {
    /// A row's number and its record's text; an error ends the file.
    type Item = Result<(usize, String), RunsParquetError>;

    fn next(&mut self) -> Option<Self::Item> {
        let row = self.rows.next()?;
        self.row += 1;
        let path = &self.path;
        Some(match row {
            Ok(row) => text(&row, 0, "record")
                .map(|line| (self.row, line))
                .map_err(|reason| RunsParquetError::Row {
                    path: path.clone(),
                    row: self.row,
                    reason,
                }),
            Err(source) => Err(RunsParquetError::Parquet {
                path: path.clone(),
                source,
            }),
        })
    }
}

/// The outcomes of an outcomes table known at `as_of_s`, read row by row by the rules of
/// JSONL outcome rows ([`Outcome::from_fields`], [`OutcomeRows`]): a row that is not an
/// outcome, or a run id given twice, is an error naming the row.
pub fn read_outcomes(path: &Path, as_of_s: f64) -> Result<Outcomes, RunsParquetError> {
    let shown = path.display().to_string();
    let mut gathered = OutcomeRows::new(as_of_s);
    for (i, row) in rows(path, Table::Outcomes, &["run_id", "outcome", "at_s"])?.enumerate() {
        let line = i + 1;
        let row = row.map_err(|source| RunsParquetError::Parquet {
            path: shown.clone(),
            source,
        })?;
        let outcome = outcome(&row).map_err(|reason| RunsParquetError::OutcomeRow {
            path: shown.clone(),
            line,
            reason,
        })?;
        gathered
            .add(line, outcome)
            .map_err(|source| RunsParquetError::Outcomes {
                path: shown.clone(),
                source,
            })?;
    }
    Ok(gathered.finish())
}

/// An outcome row's fields (`run_id`, `outcome`, `at_s`) as a checked outcome.
fn outcome(row: &Row) -> Result<Outcome, OutcomeRowError> {
    let column = "at_s";
    let at_s = match row.get_column_iter().nth(2).map(|(_, f)| f) {
        Some(Field::Double(x)) => *x,
        Some(Field::Null) | None => return Err(FieldError::Null { column }.into()),
        Some(other) => {
            return Err(FieldError::WrongType {
                column,
                found: other.to_string(),
                expected: "a double",
            }
            .into())
        }
    };
    Ok(Outcome::from_fields(
        text(row, 0, "run_id")?,
        &text(row, 1, "outcome")?,
        at_s,
    )?)
}
