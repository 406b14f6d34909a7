//! Packaging, end to end: `smolcord run` started the way the image and the
//! unit start it — only its own variables, no HOME, cwd `/`, uid 65534 (when
//! the test runs as root) — connects to the simulator, heartbeats, shows
//! healthy to `smolcord status` (the image's HEALTHCHECK, same uid), and on
//! SIGTERM (what `docker stop` and systemd send) exits 0 within 5 s.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod packaging_common;

use packaging_common::{assert_no_panic, text, Image};
use smolcord::sim::{next_matching, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Kills the child on every way out of the test.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// Its exit within `bound` (std has no wait with a timeout).
    fn exit_within(&mut self, bound: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < bound {
            if let Ok(Some(status)) = self.0.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Its stderr so far, for a failure message (kills it first).
    fn stderr(mut self) -> String {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let mut err = String::new();
        if let Some(mut pipe) = self.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
        }
        err
    }
}

#[test]
fn run_with_only_its_variables_as_nobody_connects_is_healthy_and_stops_on_sigterm() {
    let interval = Duration::from_millis(500);
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: interval,
        ..SimConfig::default()
    })
    .expect("start the simulator");
    let image = Image::new();
    let dir = image.state_dir();
    let mut command = image.command(&["run"]);
    command
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_STATE_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = Running(command.spawn().expect("spawn smolcord run"));

    // READY, then two heartbeats on that connection.
    let conn = match smol::block_on(sim.wait_for(Duration::from_secs(30), |e| {
        matches!(e, SimEvent::Identified { .. })
    })) {
        Some(SimEvent::Identified { conn, .. }) => conn,
        other => panic!(
            "no READY within 30 s ({other:?}); stderr:\n{}",
            child.stderr()
        ),
    };
    let beats = sim.subscribe();
    for n in 1..=2 {
        let beat = smol::block_on(next_matching(
            &beats,
            10 * interval,
            |e| matches!(e, SimEvent::Heartbeat { conn: c, .. } if *c == conn),
        ));
        assert!(
            beat.is_some(),
            "heartbeat {n} not within {:?}",
            10 * interval
        );
    }
    drop(beats);

    // The HEALTHCHECK as the image runs it; status.json follows the ACKs
    // within a beat or two.
    let started = Instant::now();
    let healthy = loop {
        let output = image.run(&["status"], &[("SMOLCORD_STATE_DIR", dir.path())]);
        assert_no_panic(&output);
        if output.status.success() {
            break Ok(());
        }
        if started.elapsed() > Duration::from_secs(10) {
            break Err(format!("{}{}", text(&output.stdout), text(&output.stderr)));
        }
        std::thread::sleep(interval / 2);
    };
    if let Err(last) = healthy {
        panic!(
            "`smolcord status` not healthy within 10 s; last said:\n{last}\nrun's stderr:\n{}",
            child.stderr()
        );
    }

    // SIGTERM: drain (at most 2 s) and exit 0.
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child.0),
        rustix::process::Signal::TERM,
    )
    .expect("send SIGTERM");
    let status = child.exit_within(Duration::from_secs(5));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "exit after SIGTERM: {status:?} (None: still running after 5 s)"
    );
    // It closed the gateway itself (a resumable close, not a dropped TCP).
    let closed = smol::block_on(sim.wait_for(
        Duration::from_secs(5),
        |e| matches!(e, SimEvent::ClientClosed { conn: c, code: Some(_) } if *c == conn),
    ));
    assert!(
        closed.is_some(),
        "no close frame from the client after SIGTERM"
    );
    sim.shutdown();
}
