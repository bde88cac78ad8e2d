//! Why an observation did not finish, or the alternatives' table did not read:
//! [`ObserverError`]. Each variant names the file and carries the error that refused it;
//! `Display` gives the sentence the Observe panel shows.

use std::error::Error;
use std::fmt;
use std::string::FromUtf8Error;

use langid::LangIdError;
use observe::ObserveError;

use crate::link::fetch::FetchError;

/// Why an observation did not finish (or a file beside it did not read).
#[derive(Debug)]
pub enum ObserverError {
    /// A file that could not be fetched.
    Fetch(FetchError),
    /// A source (`name`) whose bytes are not UTF-8 text.
    NotUtf8 { name: String, source: FromUtf8Error },
    /// A shipped JSON file (`file`) that is not what it should hold.
    Json {
        file: &'static str,
        source: serde_json::Error,
    },
    /// The shipped language identifier (`file`), refused by the langid crate.
    LangId {
        file: &'static str,
        source: LangIdError,
    },
    /// The outcome files (`names`, joined) refused by the observe crate.
    Outcomes { names: String, source: ObserveError },
    /// The observation's report refused (a baseline never observed, a cut-off too early).
    Report(ObserveError),
}

impl fmt::Display for ObserverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObserverError::Fetch(e) => write!(f, "{e}"),
            ObserverError::NotUtf8 { name, source } => {
                write!(f, "{name} is not UTF-8 text: {source}.")
            }
            ObserverError::Json { file, source } => write!(f, "{file} does not read: {source}."),
            ObserverError::LangId { file, source } => {
                write!(f, "{file} does not read: {source}.")
            }
            ObserverError::Outcomes { names, source } => {
                write!(f, "The outcomes ({names}) do not read: {source}.")
            }
            ObserverError::Report(e) => write!(f, "{e}."),
        }
    }
}

impl Error for ObserverError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ObserverError::Fetch(e) => Some(e),
            ObserverError::NotUtf8 { source, .. } => Some(source),
            ObserverError::Json { source, .. } => Some(source),
            ObserverError::LangId { source, .. } => Some(source),
            ObserverError::Outcomes { source, .. } | ObserverError::Report(source) => Some(source),
        }
    }
}

/// `?` carries a failed fetch here whole.
impl From<FetchError> for ObserverError {
    fn from(e: FetchError) -> ObserverError {
        ObserverError::Fetch(e)
    }
}
