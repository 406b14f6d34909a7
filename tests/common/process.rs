//! The smolcord binary as a child process: a cleared environment plus what
//! the test passes, stdout and stderr into files (a `RUST_LOG=trace` child
//! would fill a pipe and block), and bounded waits that kill on timeout.
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
        let output = tempfile::tempdir().expect("a dir for the child's output");
        let file = |name: &str| File::create(output.path().join(name)).expect("an output file");
        let child = Command::new(env!("CARGO_BIN_EXE_smolcord"))
            .args(args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .spawn()
            .expect("spawn the smolcord binary");
        Smolcord { child, output }
    }

    /// Sends SIGTERM (the supervisor's stop).
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    }

    /// Waits for the exit; kills the child and panics after `bound`.
    pub fn wait(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for smolcord") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "smolcord did not exit within {bound:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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
