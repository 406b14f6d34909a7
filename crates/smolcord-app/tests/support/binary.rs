//! The smolcord binary as a child process: a cleared environment plus what
//! the test passes, stdout and stderr into files (a `RUST_LOG=trace` child
//! would fill a pipe and block), and bounded waits that kill on timeout.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::wait::poll_until;

/// A running `smolcord` and the files its output goes to.
pub struct Smolcord {
    child: Child,
    output: tempfile::TempDir,
}

impl Smolcord {
    /// Starts `smolcord ARGS` with only `env` set.
    pub fn spawn<K: AsRef<std::ffi::OsStr>, V: AsRef<std::ffi::OsStr>>(
        args: &[&str],
        env: impl IntoIterator<Item = (K, V)>,
    ) -> Smolcord {
        let mut command = Command::new(env!("CARGO_BIN_EXE_smolcord"));
        command.args(args).env_clear().envs(env);
        Smolcord::start(command)
    }

    /// Starts `command` (stdin closed, stdout and stderr into files).
    pub fn start(mut command: Command) -> Smolcord {
        let output = tempfile::tempdir().expect("a dir for the child's output");
        let file = |name: &str| File::create(output.path().join(name)).expect("an output file");
        command
            .stdin(Stdio::null())
            .stdout(file("stdout"))
            .stderr(file("stderr"));
        // A binary just copied (see `Image`) is "busy" while another test
        // thread's fork still holds the copy's write descriptor, until that
        // fork execs: try again for a moment.
        let spawned = poll_until(Duration::from_secs(5), || match command.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => None,
            other => Some(other),
        });
        let child = spawned
            .unwrap_or_else(|| panic!("the smolcord binary stayed busy (ETXTBSY) for 5 s"))
            .expect("spawn the smolcord binary");
        Smolcord { child, output }
    }

    /// Its process id.
    pub fn pid(&self) -> rustix::process::Pid {
        rustix::process::Pid::from_child(&self.child)
    }

    /// Sends SIGTERM (the supervisor's stop).
    pub fn terminate(&self) {
        rustix::process::kill_process(self.pid(), rustix::process::Signal::TERM).expect("SIGTERM");
    }

    /// Waits until stderr contains `needle`; returns all of stderr. Panics
    /// after `limit`, showing what it said.
    pub fn wait_for_stderr(&self, needle: &str, limit: Duration) -> String {
        poll_until(limit, || Some(self.stderr()).filter(|s| s.contains(needle))).unwrap_or_else(
            || {
                panic!(
                    "no {needle:?} on smolcord's stderr within {limit:?}:\n{}",
                    self.stderr()
                )
            },
        )
    }

    /// Waits for the exit; panics after `bound` (dropping it kills it).
    pub fn wait(&mut self, bound: Duration) -> ExitStatus {
        let child = &mut self.child;
        let status = poll_until(bound, || child.try_wait().expect("wait for smolcord"));
        status.unwrap_or_else(|| {
            panic!(
                "smolcord did not exit within {bound:?}; stderr:\n{}",
                self.stderr()
            )
        })
    }

    /// Everything written to stdout so far.
    pub fn stdout(&self) -> String {
        read_lossy(&self.output.path().join("stdout"))
    }

    /// Everything written to stderr so far.
    pub fn stderr(&self) -> String {
        read_lossy(&self.output.path().join("stderr"))
    }
}

impl Drop for Smolcord {
    fn drop(&mut self) {
        // A failed assertion must not leave the bot running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn read_lossy(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// Every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("list a dir").flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => dirs.push(path),
                Ok(kind) if kind.is_file() => files.push(path),
                _ => {}
            }
        }
    }
    files
}

/// An example's binary: `cargo test` builds the examples next to the test
/// binaries' directory (`cargo test --test NAME` alone does not).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let debug = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = debug.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds it, `cargo test --test` alone does not (cargo build --example {name})",
        path.display()
    );
    path
}
