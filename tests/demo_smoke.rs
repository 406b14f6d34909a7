//! The README's main command: the demo runs to the end by itself and
//! reports what it handled.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_demo_runs_to_its_report() {
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_smolcord"))
        .arg("demo")
        .env_remove("DISCORD_TOKEN")
        .env("TMPDIR", state.path())
        .env("HOME", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("demo starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the demo did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{stderr}");
    for expected in [
        "messages handled      3 (2 voice notes transcribed, 3 agent runs)",
        "replies delivered     3 (+ 1 queued result(s) from the spool)",
        "gateway sessions      1",
        "heartbeat, gateway",
        // The client's account drawn as `smolcord status` draws it; stdout
        // is a pipe, so in ASCII.
        "heartbeat lateness (sent - scheduled: the loop's own delay)",
        "heartbeat round trip (sent -> ACK: the network)",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|line| line.trim_start().starts_with("<= ") && line.contains(" |#")),
        "no lateness bars in:\n{stdout}"
    );
    // The one session, in the timeline, ended by the demo's own shutdown.
    assert!(
        stdout
            .lines()
            .any(|line| line.contains(" identify ") && line.ends_with("  shutdown")),
        "no session timeline in:\n{stdout}"
    );
    let report = &stdout[stdout.find("== smolcord demo report").unwrap()..];
    assert!(report.is_ascii(), "a pipe gets an ASCII report:\n{report}");
    // The demo cleans up its temporary state dir.
    let left: Vec<_> = std::fs::read_dir(state.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
