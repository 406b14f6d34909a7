//! Packaging: the binary must work the way the FROM-scratch image and the
//! systemd unit run it — an empty environment (no HOME, no PATH, no
//! XDG_*), cwd `/`, an unprivileged uid (65534, "nobody", when the test runs
//! as root; the current uid otherwise) and only SMOLCORD_STATE_DIR set.
//! The image's HEALTHCHECK is `smolcord status`, so its exit codes are
//! checked here as that user. (The static musl binary in an empty root is
//! checked by `scripts/cross-check.sh`, which builds it.)
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::support;

use smolcord_app::status::{self, StatusSnapshot};
use std::fs::Permissions;
use std::os::unix::fs::{chown, PermissionsExt};
use std::time::{Duration, Instant};
use support::image::{assert_no_panic, running_as_root, text, Image, NOBODY};

#[test]
fn help_runs_with_an_empty_environment() {
    let image = Image::new();
    let output = image.run(&["--help"], &[]);
    assert_no_panic(&output);
    assert!(output.status.success(), "--help: {:?}", output.status);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("usage:"), "no usage text: {stdout}");
    assert!(
        stdout.contains("SMOLCORD_STATE_DIR"),
        "usage should name the env vars: {stdout}"
    );
}

#[test]
fn status_without_any_state_dir_says_which_variable_to_set() {
    let image = Image::new();
    // No SMOLCORD_STATE_DIR, XDG_STATE_HOME or HOME: a clear error, exit 1.
    let output = image.run(&["status"], &[]);
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(1), "status: {:?}", output.status);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("SMOLCORD_STATE_DIR"),
        "error should name the variable: {stderr}"
    );
}

#[test]
fn healthcheck_as_nobody_follows_the_status_file() {
    let image = Image::new();
    let dir = image.state_dir();
    let env = [("SMOLCORD_STATE_DIR", dir.path())];

    // Nothing written yet (container just started): unhealthy, no crash.
    let output = image.run(&["status"], &env);
    assert_no_panic(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "status before any run: {:?}",
        output.status
    );
    assert!(
        text(&output.stdout).contains("no status yet"),
        "{}",
        text(&output.stdout)
    );

    // A fresh ACK: healthy. Written as the bridge writes it (atomically),
    // then handed to nobody as the bridge running as nobody would own it.
    let now = status::now_unix_ms();
    let snapshot = StatusSnapshot {
        written_unix_ms: now,
        connected: true,
        heartbeat_interval_ms: Some(41_250),
        last_ack_unix_ms: Some(now),
        ..StatusSnapshot::default()
    };
    smol::block_on(status::write(dir.path(), &snapshot)).expect("write status.json");
    if image.as_nobody() {
        chown(status::path(dir.path()), Some(NOBODY), Some(NOBODY)).expect("chown status.json");
    }
    let started = Instant::now();
    let output = image.run(&["status"], &env);
    assert_no_panic(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "status with a fresh ACK: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    // The HEALTHCHECK's --timeout is 5 s; a debug build on a busy CI host
    // still answers well inside it.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "status took {:?}",
        started.elapsed()
    );

    // An ACK older than two intervals: unhealthy.
    let stale = StatusSnapshot {
        last_ack_unix_ms: Some(now.saturating_sub(3 * 41_250)),
        ..snapshot
    };
    smol::block_on(status::write(dir.path(), &stale)).expect("rewrite status.json");
    let output = image.run(&["status"], &env);
    assert_no_panic(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "status with a stale ACK: {:?}",
        output.status
    );
}

#[test]
fn status_in_a_state_dir_it_cannot_read_fails_naming_the_path() {
    let image = Image::new();
    // A 0700 dir that nobody does not own (a bind mount left owned by root:
    // the image's documented pitfall). As root, this also proves the uid
    // was really dropped: root would read it.
    if !image.as_nobody() {
        eprintln!("not running the binary as another uid; skipped");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), Permissions::from_mode(0o700)).expect("chmod 0700");
    let now = status::now_unix_ms();
    let snapshot = StatusSnapshot {
        heartbeat_interval_ms: Some(41_250),
        last_ack_unix_ms: Some(now),
        ..StatusSnapshot::default()
    };
    smol::block_on(status::write(dir.path(), &snapshot)).expect("write status.json");
    let output = image.run(&["status"], &[("SMOLCORD_STATE_DIR", dir.path())]);
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(1), "status: {:?}", output.status);
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        said.contains(&dir.path().display().to_string()),
        "the error should name the state dir or file: {said}"
    );
}

#[test]
fn a_binary_in_a_private_home_still_runs_as_nobody() {
    // A clone in root's home (0700) run as root: uid 65534 cannot reach
    // target/, so the tests must run a copy it can reach.
    if !running_as_root() {
        eprintln!("not root: no uid switch to test; skipped");
        return;
    }
    let home = tempfile::tempdir().expect("temp dir");
    let private = home.path().join("root");
    std::fs::create_dir(&private).expect("mkdir");
    std::fs::set_permissions(&private, Permissions::from_mode(0o700)).expect("chmod 0700");
    let binary = private.join("smolcord");
    std::fs::copy(env!("CARGO_BIN_EXE_smolcord"), &binary).expect("copy the binary");

    let image = Image::of(&binary);
    assert!(
        image.as_nobody(),
        "a reachable temp dir exists: run as nobody"
    );
    let output = image.run(&["--help"], &[]);
    assert_no_panic(&output);
    assert!(output.status.success(), "--help: {:?}", output.status);
    // Really as nobody: a healthy status in a root-only dir is unreadable
    // to it (root would say healthy and exit 0).
    let root_only = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(root_only.path(), Permissions::from_mode(0o700)).expect("chmod");
    let now = status::now_unix_ms();
    let healthy = StatusSnapshot {
        written_unix_ms: now,
        connected: true,
        heartbeat_interval_ms: Some(41_250),
        last_ack_unix_ms: Some(now),
        ..StatusSnapshot::default()
    };
    smol::block_on(status::write(root_only.path(), &healthy)).expect("write status.json");
    let output = image.run(&["status"], &[("SMOLCORD_STATE_DIR", root_only.path())]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "status: {}",
        text(&output.stderr)
    );
}
