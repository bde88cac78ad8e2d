//! Standard output and standard error as a Unix tool treats them: a reader that has gone
//! away (`decode-lab capacity | head -1`) ends the program quietly, any other write error
//! (`> /dev/full`) is one `error:` line and exit code 1, and nothing panics in `println!`.

use std::fmt;
use std::io::{self, ErrorKind, Write};

/// Why a command did not finish.
#[derive(Debug)]
pub enum Failure {
    /// Bad input: a flag, a value or a file the user gave. Exit code 2.
    Input(String),
    /// Standard output could not be written. A closed pipe ends the program quietly with
    /// exit code 0; any other error is exit code 1.
    Write(io::Error),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Input(message)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Write(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Input(message) => f.write_str(message),
            Failure::Write(e) => write!(f, "cannot write to standard output: {e}"),
        }
    }
}

/// Whether a write error means the reader has gone, which is no error for a filter.
pub fn reader_gone(e: &io::Error) -> bool {
    e.kind() == ErrorKind::BrokenPipe
}

/// `text` and a newline on standard output, flushed, so that a full disk is reported here
/// and not lost when the buffer is dropped at exit.
pub fn print_line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

/// A line on standard error. Standard error carries notes beside the output; when it
/// cannot be written there is nowhere left to say so, and the run goes on.
pub fn note(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
}
