//! Whether a command can be run at all, asked once at start-up: a program
//! that does not exist should stop the start naming the setting, not
//! fail the first user's message hours later.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::unblock;

/// Where `execvp` looks when `PATH` is unset (glibc's and musl's default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Why [`find_program`] found nothing `exec` could run. Each variant names
/// the program as given; `Display` says why, and where it looked.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProgramError {
    /// A bare name (no `/`) found in none of `PATH`'s directories as an
    /// executable file.
    NotInPath {
        /// The program as given.
        program: String,
        /// The directories looked in, in order (`PATH`, or `/bin:/usr/bin`
        /// when it is unset, as `exec` does).
        searched: Vec<PathBuf>,
    },
    /// A path (a name with a `/`) where there is no file.
    Missing {
        /// The program as given.
        program: String,
    },
    /// A path to a directory.
    IsDirectory {
        /// The program as given.
        program: String,
    },
    /// A path to a file without any execute bit.
    NotExecutable {
        /// The program as given.
        program: String,
    },
    /// A path that could not be looked at (a directory on the way without
    /// search permission, say).
    Inaccessible {
        /// The program as given.
        program: String,
        /// What `stat` said.
        source: io::Error,
    },
}

impl ProgramError {
    /// The program as it was given to [`find_program`].
    pub fn program(&self) -> &str {
        match self {
            ProgramError::NotInPath { program, .. }
            | ProgramError::Missing { program }
            | ProgramError::IsDirectory { program }
            | ProgramError::NotExecutable { program }
            | ProgramError::Inaccessible { program, .. } => program,
        }
    }
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramError::NotInPath { program, searched } => {
                let dirs: Vec<String> = searched.iter().map(|d| d.display().to_string()).collect();
                write!(f, "`{program}` not found in PATH ({})", dirs.join(":"))
            }
            ProgramError::Missing { program } => write!(f, "`{program}` does not exist"),
            ProgramError::IsDirectory { program } => write!(f, "`{program}` is a directory"),
            ProgramError::NotExecutable { program } => {
                write!(f, "`{program}` is not executable (chmod +x)")
            }
            ProgramError::Inaccessible { program, source } => {
                write!(f, "`{program}` cannot be looked at: {source}")
            }
        }
    }
}

impl std::error::Error for ProgramError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProgramError::Inaccessible { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Where `program` is, as `exec` would find it: a name with a `/` is that
/// file (relative to our working directory), any other is looked up in
/// `PATH`. The error says what is wrong and where it looked.
///
/// ```
/// # smol::block_on(async {
/// use smolcord::offload::{find_program, ProgramError};
///
/// assert!(find_program("sh").await.is_ok());
/// let err = find_program("/nonexistent/agent").await.unwrap_err();
/// assert!(matches!(err, ProgramError::Missing { .. }));
/// assert_eq!(err.to_string(), "`/nonexistent/agent` does not exist");
/// # });
/// ```
pub async fn find_program(program: &str) -> Result<PathBuf, ProgramError> {
    let program = program.to_owned();
    let path = std::env::var_os("PATH");
    unblock(move || find_blocking(&program, path.as_deref())).await
}

// The one lookup, on the blocking pool (it stats files).
#[allow(clippy::disallowed_methods)]
fn find_blocking(program: &str, path: Option<&std::ffi::OsStr>) -> Result<PathBuf, ProgramError> {
    let program_owned = || program.to_owned();
    if program.contains('/') {
        let file = Path::new(program);
        return match fs::metadata(file) {
            Ok(meta) if meta.is_dir() => Err(ProgramError::IsDirectory {
                program: program_owned(),
            }),
            Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
                Err(ProgramError::NotExecutable {
                    program: program_owned(),
                })
            }
            Ok(_) => Ok(file.to_path_buf()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ProgramError::Missing {
                program: program_owned(),
            }),
            Err(source) => Err(ProgramError::Inaccessible {
                program: program_owned(),
                source,
            }),
        };
    }
    // Without PATH, exec looks in the C library's default, as here.
    let path = path.unwrap_or(std::ffi::OsStr::new(DEFAULT_PATH));
    let mut searched = Vec::new();
    for dir in std::env::split_paths(path) {
        let file = dir.join(program);
        if let Ok(meta) = fs::metadata(&file) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(file);
            }
        }
        searched.push(dir);
    }
    Err(ProgramError::NotInPath {
        program: program_owned(),
        searched,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_as_exec_would_or_said_why_not() {
        let path = std::ffi::OsString::from("/nonexistent-dir:/bin:/usr/bin");
        assert!(find_blocking("sh", Some(&path)).is_ok());
        let missing = find_blocking("no-such-agent", Some(&path)).unwrap_err();
        assert!(
            matches!(&missing, ProgramError::NotInPath { searched, .. } if searched.len() == 3),
            "{missing:?}"
        );
        assert_eq!(
            missing.to_string(),
            "`no-such-agent` not found in PATH (/nonexistent-dir:/bin:/usr/bin)"
        );
        assert_eq!(missing.program(), "no-such-agent");
        let absent = find_blocking("/nonexistent/agent", None).unwrap_err();
        assert!(matches!(absent, ProgramError::Missing { .. }), "{absent:?}");
        assert_eq!(absent.to_string(), "`/nonexistent/agent` does not exist");
        let dir = find_blocking("/tmp", None).unwrap_err();
        assert!(matches!(dir, ProgramError::IsDirectory { .. }), "{dir:?}");
        assert_eq!(dir.to_string(), "`/tmp` is a directory");
        assert!(find_blocking("/bin/sh", None).is_ok());
        assert!(find_blocking("sh", None).is_ok(), "the default PATH");
        assert!(find_blocking("no-such-agent", None)
            .unwrap_err()
            .to_string()
            .ends_with("(/bin:/usr/bin)"));
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // a test may block
    fn a_file_without_an_execute_bit_is_named_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.sh");
        fs::write(&file, "#!/bin/sh\n").unwrap();
        let program = file.display().to_string();
        let err = find_blocking(&program, None).unwrap_err();
        assert!(matches!(err, ProgramError::NotExecutable { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("`{program}` is not executable (chmod +x)")
        );
        assert!(std::error::Error::source(&err).is_none());
    }
}
