//! Why a job or an event did not cross the seam between the page and a worker:
//! [`LinkError`]. What the browser threw is kept as its text (the value's debug form, as the
//! page has always shown it); `Display` gives the sentence the panels show.

use std::error::Error;
use std::fmt;

/// Why a job or an event did not cross between the page and a worker.
#[derive(Debug)]
pub enum LinkError {
    /// A job or an event that could not be written as JSON text.
    Encode(serde_json::Error),
    /// A message that is not text, so not one of the protocol's.
    NotText,
    /// A message whose text is not one of the protocol's jobs or events.
    Decode(serde_json::Error),
    /// The worker `name` could not start; `thrown` is what the browser threw.
    Start { name: &'static str, thrown: String },
    /// A job for the worker `name` that could not be written.
    Send {
        name: &'static str,
        source: Box<LinkError>,
    },
    /// The worker `name` did not take the job; `thrown` is what the browser threw.
    Refused { name: &'static str, thrown: String },
    /// The worker `name` is not running.
    NotRunning { name: &'static str },
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Encode(e) | LinkError::Decode(e) => write!(f, "{e}"),
            LinkError::NotText => f.write_str("the message is not text"),
            LinkError::Start { name, thrown } => write!(f, "The {name} could not start: {thrown}."),
            LinkError::Send { name, source } => {
                write!(f, "A job could not be sent to the {name}: {source}.")
            }
            LinkError::Refused { name, thrown } => {
                write!(f, "The {name} did not take the job: {thrown}.")
            }
            LinkError::NotRunning { name } => write!(f, "The {name} is not running."),
        }
    }
}

impl Error for LinkError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            LinkError::Encode(e) | LinkError::Decode(e) => Some(e),
            LinkError::Send { source, .. } => Some(&**source),
            _ => None,
        }
    }
}
