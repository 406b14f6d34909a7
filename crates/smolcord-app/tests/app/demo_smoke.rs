//! The README's main command: the demo runs to the end by itself and
//! reports what it handled.
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use crate::support;

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
        "messages handled      4 (2 voice notes transcribed, 4 agent runs)",
        "replies delivered     4 (+ 1 queued result(s) from the spool)",
        // Files in, read from disk; a PNG out, uploaded with the reply.
        "photo.png is a 70 byte PNG; my answer is answer.png; notes.txt starts «water the plants»",
        "<- bot: [answer.png, 70 bytes, image/png]",
        "gateway sessions      1",
        // Bob is approved by the owner's slash command, ephemerally.
        "-> owner: /approve code:",
        "<- bot (only the owner sees this): Approved: user 4343 may now talk to the agent",
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
