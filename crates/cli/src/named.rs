//! A file as a command's messages name it: the flag that gave it and its path. The write
//! rule ([`crate::files`]) and the errors ([`crate::error`]) both speak of files this way.

use std::fmt;
use std::path::PathBuf;

/// A path a command reads or writes, and the flag (or what the command calls it) that named
/// it.
#[derive(Clone, Debug)]
pub struct Named {
    pub flag: String,
    pub path: PathBuf,
}

impl Named {
    pub fn new(flag: impl Into<String>, path: impl Into<PathBuf>) -> Named {
        Named {
            flag: flag.into(),
            path: path.into(),
        }
    }
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.flag, self.path.display())
    }
}
