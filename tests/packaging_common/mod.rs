//! Helpers for the packaging tests: run the smolcord binary the way the
//! FROM-scratch image and the systemd unit run it (empty environment, cwd
//! `/`, uid 65534 when the tests run as root).
#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)]

use std::fs::Permissions;
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The image's `USER 65534:65534`.
pub const NOBODY: u32 = 65534;

pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `smolcord ARGS` with an empty environment plus `env`, cwd `/`, as nobody
/// when we can switch to it; bounded by a 20 s timeout.
pub fn smolcord(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_smolcord"));
    command
        .args(args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    if running_as_root() {
        // std also drops the supplementary groups when root sets a uid.
        command.uid(NOBODY).gid(NOBODY);
    }
    let child = command.spawn().expect("spawn the smolcord binary");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(output) => output.expect("wait for smolcord"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("smolcord {args:?} did not exit within 20 s");
        }
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A state dir like the image's `/state` and systemd's StateDirectory:
/// mode 0700, owned by the unprivileged user.
pub fn state_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), Permissions::from_mode(0o700)).expect("chmod 0700");
    if running_as_root() {
        chown(dir.path(), Some(NOBODY), Some(NOBODY)).expect("chown the state dir to nobody");
    }
    dir
}

pub fn assert_no_panic(output: &Output) {
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "smolcord panicked: {stderr}");
}
