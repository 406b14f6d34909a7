//! The README's main command: the demo runs to the end by itself and
//! reports what it handled.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

mod support;

use std::time::Duration;
use support::binary::Smolcord;

#[test]
fn the_demo_runs_to_its_report() {
    let state = tempfile::tempdir().unwrap();
    let home = state.path().display().to_string();
    let mut demo = Smolcord::spawn(&["demo"], [("TMPDIR", &home), ("HOME", &home)]);
    let status = demo.wait(Duration::from_secs(120));
    let (stdout, stderr) = (demo.stdout(), demo.stderr());
    assert!(status.success(), "demo failed:\n{stdout}\n{stderr}");
    for expected in [
        "messages handled      3 (2 voice notes transcribed, 3 agent runs)",
        "replies delivered     3 (+ 1 queued result(s) from the spool)",
        "gateway sessions      1",
        "heartbeat, gateway",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    // The demo cleans up its temporary state dir.
    let left: Vec<_> = std::fs::read_dir(state.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
