//! Whether a command can be run at all, asked once at start-up: a program
//! that does not exist should stop the start naming the setting, not
//! fail the first user's message hours later.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::unblock;

/// Where `execvp` looks when `PATH` is unset (glibc's and musl's default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Where `program` is, as `exec` would find it: a name with a `/` is that
/// file (relative to our working directory), any other is looked up in
/// `PATH`. The error says what is wrong and where it looked.
pub async fn find_program(program: &str) -> Result<PathBuf, String> {
    let program = program.to_owned();
    let path = std::env::var_os("PATH");
    unblock(move || find_blocking(&program, path.as_deref())).await
}

// The one lookup, on the blocking pool (it stats files).
#[allow(clippy::disallowed_methods)]
fn find_blocking(program: &str, path: Option<&std::ffi::OsStr>) -> Result<PathBuf, String> {
    if program.contains('/') {
        let file = Path::new(program);
        return match fs::metadata(file) {
            Ok(meta) if meta.is_dir() => Err(format!("`{program}` is a directory")),
            Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
                Err(format!("`{program}` is not executable (chmod +x)"))
            }
            Ok(_) => Ok(file.to_path_buf()),
            Err(e) => Err(format!("`{program}`: {e}")),
        };
    }
    // Without PATH, exec looks in the C library's default, as here.
    let path = path.unwrap_or(std::ffi::OsStr::new(DEFAULT_PATH));
    let dirs = std::env::split_paths(path);
    let mut looked = Vec::new();
    for dir in dirs {
        let file = dir.join(program);
        if let Ok(meta) = fs::metadata(&file) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(file);
            }
        }
        looked.push(dir.display().to_string());
    }
    Err(format!(
        "`{program}` not found in PATH ({})",
        looked.join(":")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_as_exec_would_or_said_why_not() {
        let path = std::ffi::OsString::from("/nonexistent-dir:/bin:/usr/bin");
        assert!(find_blocking("sh", Some(&path)).is_ok());
        let missing = find_blocking("no-such-agent", Some(&path)).unwrap_err();
        assert_eq!(
            missing,
            "`no-such-agent` not found in PATH (/nonexistent-dir:/bin:/usr/bin)"
        );
        let absent = find_blocking("/nonexistent/agent", None).unwrap_err();
        assert!(
            absent.starts_with("`/nonexistent/agent`: No such file"),
            "{absent}"
        );
        assert!(find_blocking("/tmp", None)
            .unwrap_err()
            .contains("is a directory"));
        assert!(find_blocking("/bin/sh", None).is_ok());
        assert!(find_blocking("sh", None).is_ok(), "the default PATH");
        assert!(find_blocking("no-such-agent", None)
            .unwrap_err()
            .ends_with("(/bin:/usr/bin)"));
    }
}
