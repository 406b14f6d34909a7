//! Packaging, end to end: `smolcord run` started the way the image and the
//! unit start it — only its own variables, no HOME, cwd `/`, uid 65534 (when
//! the test runs as root) — connects to the simulator, heartbeats, shows
//! healthy to `smolcord status` (the image's HEALTHCHECK, same uid), and on
//! SIGTERM (what `docker stop` and systemd send) exits 0 within 5 s.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::support;

use smolcord_sim::{next_matching, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::time::{Duration, Instant};
use support::binary::Smolcord;
use support::image::{assert_no_panic, text, Image};

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
        .env("SMOLCORD_STATE_DIR", dir.path());
    let mut child = Smolcord::start(command);

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
    child.terminate();
    let status = child.wait(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "exit after SIGTERM: {status:?}");
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
