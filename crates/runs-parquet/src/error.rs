//! What stops an export or a read of one. A run line that is not a valid record is not an
//! error here: the caller rejects it by `observe`'s rule and names it.

use parquet::errors::ParquetError;
use thiserror::Error;

/// A row's field that is not what its column holds.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FieldError {
    #[error("{column} is null")]
    Null { column: &'static str },
    /// `found` is the field as Parquet prints it.
    #[error("{column} is {found}, not {expected}")]
    WrongType {
        column: &'static str,
        found: String,
        expected: &'static str,
    },
}

/// Why a row of an outcomes table is not an outcome.
#[derive(Debug, Error, PartialEq)]
pub enum OutcomeRowError {
    #[error(transparent)]
    Field(#[from] FieldError),
    #[error(transparent)]
    Outcome(#[from] observe::OutcomeError),
}

#[derive(Debug, Error)]
pub enum RunsParquetError {
    #[error("cannot write {path}: {source}")]
    Create {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parquet { path: String, source: ParquetError },
    /// The buffered columns and the table's schema disagree: a defect of this crate, named
    /// rather than written as a corrupt file.
    #[error(
        "{path}: column {position} of the schema is {expected}, but the row group holds {found}"
    )]
    Schema {
        path: String,
        position: usize,
        expected: String,
        found: String,
    },
    #[error("{path} has no {column} column: it is not the {table} table of an export")]
    MissingColumn {
        path: String,
        column: &'static str,
        table: &'static str,
    },
    #[error("{path} row {row}: {reason}")]
    Row {
        path: String,
        row: usize,
        reason: FieldError,
    },
    /// Row `line` of an outcomes table that is not an outcome: a field of another type, or
    /// a row `observe` refuses.
    #[error("{path}: outcomes line {line}: {reason}")]
    OutcomeRow {
        path: String,
        line: usize,
        reason: OutcomeRowError,
    },
    #[error("{path}: {source}")]
    Outcomes {
        path: String,
        source: observe::ObserveError,
    },
}
