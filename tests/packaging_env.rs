//! Packaging: the binary must work the way the FROM-scratch image and the
//! systemd unit run it — an empty environment (no HOME, no PATH, no
//! XDG_*), cwd `/`, an unprivileged uid (65534, "nobody", when the test runs
//! as root; the current uid otherwise) and only SMOLCORD_STATE_DIR set.
//! The image's HEALTHCHECK is `smolcord status`, so its exit codes are
//! checked here as that user. (The static musl binary in an empty root is
//! checked by `scripts/cross-check.sh`, which builds it.)
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod packaging_common;

use packaging_common::{assert_no_panic, running_as_root, smolcord, state_dir, text, NOBODY};
use smolcord::status::{self, StatusSnapshot};
use std::fs::Permissions;
use std::os::unix::fs::{chown, PermissionsExt};
use std::time::{Duration, Instant};

#[test]
fn help_runs_with_an_empty_environment() {
    let output = smolcord(&["--help"], &[]);
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
    // No SMOLCORD_STATE_DIR, XDG_STATE_HOME or HOME: a clear error, exit 1.
    let output = smolcord(&["status"], &[]);
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
    let dir = state_dir();
    let env = [("SMOLCORD_STATE_DIR", dir.path())];

    // Nothing written yet (container just started): unhealthy, no crash.
    let output = smolcord(&["status"], &env);
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
    if running_as_root() {
        chown(status::path(dir.path()), Some(NOBODY), Some(NOBODY)).expect("chown status.json");
    }
    let started = Instant::now();
    let output = smolcord(&["status"], &env);
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
    let output = smolcord(&["status"], &env);
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
    // A 0700 dir that nobody does not own (a bind mount left owned by root:
    // the image's documented pitfall). As root, this also proves the uid
    // was really dropped: root would read it.
    if !running_as_root() {
        eprintln!("not root: cannot test as another uid; skipped");
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
    let output = smolcord(&["status"], &[("SMOLCORD_STATE_DIR", dir.path())]);
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(1), "status: {:?}", output.status);
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        said.contains(&dir.path().display().to_string()),
        "the error should name the state dir or file: {said}"
    );
}
