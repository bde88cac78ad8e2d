//! What stops an export or a read of one. A run line that is not a valid record is not an
//! error here: the caller rejects it by `observe`'s rule and names it.

use parquet::errors::ParquetError;
use thiserror::Error;

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
        reason: String,
    },
    /// Row `line` of an outcomes table that is not an outcome: a field of another type, or
    /// a row `observe` refuses ([`observe::OutcomeError`]), in words.
    #[error("{path}: outcomes line {line}: {reason}")]
    OutcomeRow {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("{path}: {source}")]
    Outcomes {
        path: String,
        source: observe::ObserveError,
    },
}
