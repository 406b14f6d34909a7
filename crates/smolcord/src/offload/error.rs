//! The one error type of `offload`.
//!
//! Every variant names what it was doing and to which file or program, so a
//! log line alone says where to look. Command arguments are never included:
//! they may carry user text or secrets; the program name is enough.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A failed `offload` operation, naming the operation and the path or program.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed.
    Io {
        /// What was being done, e.g. `"write"`, `"fsync directory"`.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file did not hold valid JSON of the expected shape.
    BadJson {
        /// The file that was read.
        path: PathBuf,
        /// Where and why parsing failed (line and column included).
        source: serde_json::Error,
    },
    /// A value could not be serialised to JSON (e.g. a map with non-string keys).
    Serialize {
        /// The file the value was meant for.
        path: PathBuf,
        /// The serialiser's complaint.
        source: serde_json::Error,
    },
    /// A path cannot be written atomically (it has no file name, e.g. `/` or `..`).
    InvalidPath {
        /// The path as given.
        path: PathBuf,
    },
    /// A command could not be started.
    Spawn {
        /// The program (`argv[0]`).
        program: String,
        /// The working directory asked for, if any (a missing one fails like a missing program).
        cwd: Option<PathBuf>,
        /// The underlying error (`NotFound`, `PermissionDenied`, ...).
        source: io::Error,
    },
    /// A started command could not be supervised (waiting or piping failed).
    Command {
        /// The program (`argv[0]`).
        program: String,
        /// What was being done, e.g. `"read stdout of"`.
        op: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// A command spec had an empty `argv` or an empty program name.
    EmptyArgv,
    /// A file was larger than the most the caller reads (nothing past the
    /// limit was read).
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, bytes.
        limit: u64,
    },
    /// A file that must be a regular file is something else (a symbolic
    /// link, a FIFO, a device); it was not read.
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead, e.g. `"a symbolic link"`.
        what: &'static str,
    },
    /// Another process holds the state dir's lock (a bridge runs there).
    Locked {
        /// The state dir.
        dir: PathBuf,
        /// The holder's pid, as it wrote it in the lock file.
        pid: Option<u32>,
    },
}

impl Error {
    /// The `io::ErrorKind` behind this error, if it came from the OS.
    ///
    /// Lets callers tell, say, "program not found" from "permission denied"
    /// without matching on variants.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Error::Io { source, .. }
            | Error::Spawn { source, .. }
            | Error::Command { source, .. } => Some(source.kind()),
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            Error::BadJson { path, source } => {
                write!(f, "bad JSON in {}: {source}", path.display())
            }
            Error::Serialize { path, source } => {
                write!(f, "cannot serialise JSON for {}: {source}", path.display())
            }
            Error::InvalidPath { path } => {
                write!(f, "not a file path: {}", path.display())
            }
            Error::Spawn {
                program,
                cwd,
                source,
            } => {
                let why = match source.kind() {
                    io::ErrorKind::NotFound => "program not found".to_string(),
                    io::ErrorKind::PermissionDenied => {
                        "not executable (permission denied)".to_string()
                    }
                    _ => source.to_string(),
                };
                write!(f, "cannot run `{program}`: {why}")?;
                if let Some(cwd) = cwd {
                    write!(f, " (working directory {})", cwd.display())?;
                }
                Ok(())
            }
            Error::Command {
                program,
                op,
                source,
            } => write!(f, "cannot {op} `{program}`: {source}"),
            Error::EmptyArgv => write!(f, "cannot run a command with an empty argv"),
            Error::TooLarge { path, limit } => write!(
                f,
                "{} is larger than {limit} bytes, the most read from it",
                path.display()
            ),
            Error::NotRegular { path, what } => {
                write!(f, "{} is {what}, not a regular file", path.display())
            }
            Error::Locked { dir, pid } => {
                let holder = match pid {
                    Some(pid) => format!("pid {pid}"),
                    None => "a process that has not written its pid yet".to_owned(),
                };
                write!(
                    f,
                    "another smolcord ({holder}) is running on the state dir {} (it holds {}); stop it, or give this one a state dir of its own",
                    dir.display(),
                    dir.join(super::LOCK_FILE).display()
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. }
            | Error::Spawn { source, .. }
            | Error::Command { source, .. } => Some(source),
            Error::BadJson { source, .. } | Error::Serialize { source, .. } => Some(source),
            Error::InvalidPath { .. }
            | Error::EmptyArgv
            | Error::TooLarge { .. }
            | Error::NotRegular { .. }
            | Error::Locked { .. } => None,
        }
    }
}
