//! The one rule for every file a command writes: no output is, or holds, a file the command
//! reads, and every write lands whole or not at all.
//!
//! A command names what it reads and what it writes, each with its flag, and calls
//! [`check`] before any work: every path is resolved (its canonical path, then its device
//! and inode), so a symbolic link, `..`, a relative path or a hard link to an input is caught,
//! and the message names both flags and both paths. [`write`] then puts a file in place
//! through a temporary file in the same directory, renamed over the old one only once all of
//! it is written; [`StagedDir`] does the same for a directory of files (`export`'s tables).
//! A command that fails leaves the old file, or the old directory's files, as they were.
//! [`read_text`] is how a command reads a text file it was given, the error naming the path.
//!
//! Nothing else in the command line writes a file: `tests/writes.rs` fails on any other
//! `std::fs::write`, `File::create` or rename in its source.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use crate::error::{CliError, OutputAction};
use crate::named::Named;

/// The text of the file at `path`; the error names the path.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(CliError::read(path))
}

/// The text of the file at `path`, refused when it holds more than `limit` bytes (read
/// no further than that); the error names the path.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, CliError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(CliError::read(path))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(CliError::read(path))?;
    if bytes.len() as u64 > limit {
        return Err(CliError::FileTooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|_| CliError::NotUtf8 {
        path: path.to_path_buf(),
    })
}

/// Every regular file directly in `dir` as an input named by `flag` (a corpus directory,
/// read file by file); nothing when `dir` cannot be listed (the command that reads it says
/// why).
pub fn files_in(flag: &str, dir: &Path) -> Vec<Named> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<Named> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| Named::new(flag, p))
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// Where a path leads: its canonical path when it exists, else the canonical path of its
/// nearest existing ancestor with the rest of it appended (`..` taken lexically there).
fn resolve(path: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut rest = Vec::new();
    let mut base = absolute.as_path();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(base) {
            let mut resolved = canonical;
            for part in rest.iter().rev() {
                match part {
                    Component::ParentDir => {
                        resolved.pop();
                    }
                    Component::CurDir => {}
                    part => resolved.push(part),
                }
            }
            return resolved;
        }
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                base = parent;
            }
            _ => return absolute,
        }
    }
}

/// The device and inode of an existing file or directory.
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_: &Path) -> Option<(u64, u64)> {
    None
}

/// A resolved path and, when it exists, its identity.
struct Resolved {
    named: Named,
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl Resolved {
    fn of(named: &Named) -> Resolved {
        Resolved {
            named: named.clone(),
            path: resolve(&named.path),
            id: identity(&named.path),
        }
    }

    /// Whether both are one file (or directory): the same identity, or the same path.
    fn is(&self, other: &Resolved) -> bool {
        match (self.id, other.id) {
            (Some(a), Some(b)) => a == b,
            _ => self.path == other.path,
        }
    }
}

/// Refuses, before any work, an output that is an input (by any path), or a directory that
/// holds one, and two outputs that are one file. `outputs` lists what the command writes:
/// for a directory, the directory and every file it puts there.
pub fn check(outputs: &[Named], inputs: &[Named]) -> Result<(), CliError> {
    let inputs: Vec<Resolved> = inputs
        .iter()
        .filter(|i| i.path.exists())
        .map(Resolved::of)
        .collect();
    let outputs: Vec<Resolved> = outputs.iter().map(Resolved::of).collect();
    for (n, output) in outputs.iter().enumerate() {
        for input in &inputs {
            if output.is(input) {
                return Err(CliError::OutputIsInput {
                    output: output.named.clone(),
                    input: input.named.clone(),
                });
            }
            if input.path.starts_with(&output.path) {
                return Err(CliError::OutputHoldsInput {
                    output: output.named.clone(),
                    input: input.path.clone(),
                    flag: input.named.flag.clone(),
                });
            }
        }
        for earlier in &outputs[..n] {
            if output.is(earlier) && output.named.flag != earlier.named.flag {
                return Err(CliError::SameOutput {
                    first: earlier.named.clone(),
                    second: output.named.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The directory a file at `path` is put in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A temporary name beside `target`, hidden and unique to this process.
fn temporary(target: &Path, what: &str) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    directory_of(target).join(format!(".{name}.{}.{what}", std::process::id()))
}

/// Where a file output lands, if it can: the file a symbolic link leads to (or the path
/// itself when nothing is there yet), refused when it is a directory or its directory does
/// not exist. [`write`] calls it; a command whose work is long calls it before the work too.
pub fn writable(output: &Named) -> Result<PathBuf, CliError> {
    let target = if output.path.exists() {
        resolve(&output.path)
    } else {
        output.path.clone()
    };
    if target.is_dir() {
        return Err(CliError::OutputIsDirectory {
            output: output.clone(),
        });
    }
    let directory = directory_of(&target);
    if !directory.is_dir() {
        return Err(CliError::NoOutputDirectory {
            output: output.clone(),
            directory: directory.to_path_buf(),
        });
    }
    Ok(target)
}

/// `output` could not have `action` done to it.
fn failed(output: &Named, action: OutputAction) -> impl FnOnce(std::io::Error) -> CliError {
    let output = output.clone();
    move |source| CliError::Output {
        output,
        action,
        source,
    }
}

/// Writes `bytes` to `output` ([`writable`]): into a temporary file beside it, flushed to
/// disk, then renamed over it, so the old file stays whole until the new one is. A symbolic
/// link is followed: the file it leads to is replaced, not the link.
pub fn write(output: &Named, bytes: &[u8]) -> Result<(), CliError> {
    let target = writable(output)?;
    // A device or a pipe (`/dev/stdout`, `/dev/null`, a FIFO) is written into: renaming a
    // file over it would replace the device, not write to it.
    if target.exists() && !target.is_file() {
        return std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .and_then(|mut file| file.write_all(bytes))
            .map_err(failed(output, OutputAction::Write));
    }
    let temporary = temporary(&target, "tmp");
    let written = (|| {
        let mut file = std::fs::File::create_new(&temporary)?;
        file.write_all(bytes)?;
        // The new file keeps the old one's permissions.
        if let Ok(old) = std::fs::metadata(&target) {
            file.set_permissions(old.permissions())?;
        }
        file.sync_all()?;
        std::fs::rename(&temporary, &target)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        failed(output, OutputAction::Write)(e)
    })
}

/// A directory of files written in a staging directory and moved into place together by
/// [`StagedDir::commit`]; dropped without it, it leaves no trace. A new directory is staged
/// beside it and renamed into place; into an existing one, the files are staged in a hidden
/// directory inside it and each renamed over its old namesake (the directory's other files
/// are left alone).
pub struct StagedDir {
    output: Named,
    target: PathBuf,
    stage: PathBuf,
    existed: bool,
    committed: bool,
}

impl StagedDir {
    pub fn new(output: &Named) -> Result<StagedDir, CliError> {
        let existed = output.path.exists();
        if existed && !output.path.is_dir() {
            return Err(CliError::OutputIsFile {
                output: output.clone(),
            });
        }
        let target = if existed {
            resolve(&output.path)
        } else {
            output.path.clone()
        };
        let stage = if existed {
            target.join(format!(".decode-lab.{}.staging", std::process::id()))
        } else {
            std::fs::create_dir_all(directory_of(&target))
                .map_err(failed(output, OutputAction::MakeParent))?;
            temporary(&target, "staging")
        };
        // A stage left by a process of the same id that was killed is ours to clear.
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir(&stage).map_err(failed(output, OutputAction::MakeStage))?;
        Ok(StagedDir {
            output: output.clone(),
            target,
            stage,
            existed,
            committed: false,
        })
    }

    /// Where the files are written until [`commit`](Self::commit).
    pub fn path(&self) -> &Path {
        &self.stage
    }

    /// A new file `name` in the stage, for a writer that streams it.
    pub fn create(&self, name: &str) -> Result<std::fs::File, CliError> {
        std::fs::File::create_new(self.stage.join(name))
            .map_err(failed(&self.output, OutputAction::Write))
    }

    /// Moves the staged files (`names`, in the stage) into the directory.
    pub fn commit(mut self, names: &[&str]) -> Result<(), CliError> {
        let moved = if self.existed {
            names
                .iter()
                .try_for_each(|name| std::fs::rename(self.stage.join(name), self.target.join(name)))
        } else {
            std::fs::rename(&self.stage, &self.target)
        };
        moved.map_err(failed(&self.output, OutputAction::MoveIntoPlace))?;
        self.committed = true;
        if self.existed {
            let _ = std::fs::remove_dir_all(&self.stage);
        }
        Ok(())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.stage);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("decode-lab-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn every_alias_of_an_input_is_refused() {
        let dir = scratch("alias");
        let input = dir.join("in.txt");
        std::fs::write(&input, "kept").unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::hard_link(&input, dir.join("hard.txt")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&dir, dir.join("link")).unwrap();
        let inputs = [Named::new("--corpus", &input)];
        let mut aliases = vec![
            input.clone(),
            dir.join("sub/../in.txt"),
            dir.join("hard.txt"),
            dir.clone(),
        ];
        #[cfg(unix)]
        aliases.push(dir.join("link/in.txt"));
        for alias in aliases {
            let message = check(&[Named::new("--out", &alias)], &inputs)
                .unwrap_err()
                .to_string();
            assert!(message.contains("--corpus"), "{alias:?}: {message}");
            assert!(message.contains("--out"), "{alias:?}: {message}");
        }
        check(&[Named::new("--out", dir.join("new.txt"))], &inputs).unwrap();
        check(
            &[Named::new("--out", dir.join("sub/x/../new.txt"))],
            &inputs,
        )
        .unwrap();
        let both = [
            Named::new("--out", dir.join("a.txt")),
            Named::new("--outcomes", dir.join("sub/../a.txt")),
        ];
        assert!(check(&both, &inputs)
            .unwrap_err()
            .to_string()
            .contains("one file"));
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "kept");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = scratch("write");
        let path = dir.join("out.json");
        std::fs::write(&path, "old").unwrap();
        write(&Named::new("--out", &path), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let message = write(&Named::new("--out", dir.join("missing/out.json")), b"x")
            .unwrap_err()
            .to_string();
        assert!(message.contains("does not exist"), "{message}");
        let message = write(&Named::new("--out", &dir), b"x")
            .unwrap_err()
            .to_string();
        assert!(message.contains("is a directory"), "{message}");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.json"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A pipe is written into, not replaced by a file (as `/dev/null` or `/dev/stdout`
    /// would be).
    #[cfg(unix)]
    #[test]
    fn a_pipe_is_written_into_not_replaced() {
        use std::io::Read;
        let dir = scratch("fifo");
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                std::fs::File::open(&fifo)
                    .unwrap()
                    .read_to_string(&mut text)
                    .unwrap();
                text
            })
        };
        write(&Named::new("--out", &fifo), b"through").unwrap();
        assert_eq!(reader.join().unwrap(), "through");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_staged_directory_is_all_or_nothing() {
        let dir = scratch("staged");
        let out = Named::new("--out", dir.join("tables"));
        // Dropped before commit: nothing appears.
        {
            let stage = StagedDir::new(&out).unwrap();
            std::fs::write(stage.path().join("a"), "1").unwrap();
        }
        assert!(!out.path.exists());
        let stage = StagedDir::new(&out).unwrap();
        std::fs::write(stage.path().join("a"), "1").unwrap();
        stage.commit(&["a"]).unwrap();
        assert_eq!(std::fs::read_to_string(out.path.join("a")).unwrap(), "1");
        // Into an existing directory: the old file stays until the commit, others stay.
        std::fs::write(out.path.join("other"), "mine").unwrap();
        {
            let stage = StagedDir::new(&out).unwrap();
            std::fs::write(stage.path().join("a"), "2").unwrap();
        }
        assert_eq!(std::fs::read_to_string(out.path.join("a")).unwrap(), "1");
        let stage = StagedDir::new(&out).unwrap();
        std::fs::write(stage.path().join("a"), "2").unwrap();
        stage.commit(&["a"]).unwrap();
        assert_eq!(std::fs::read_to_string(out.path.join("a")).unwrap(), "2");
        let mut names: Vec<_> = std::fs::read_dir(&out.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a", "other"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
