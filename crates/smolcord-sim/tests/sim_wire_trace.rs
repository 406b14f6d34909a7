//! The simulator's wire trace (`RUST_LOG=smolcord::sim::wire=trace`): every
//! frame in and out of a session that identifies, beats, closes, resumes
//! and gets an oversized dispatch, with the token and session id never in
//! a line and the large frame abbreviated.

use smolcord_testkit as support;

use serde_json::json;
use smolcord::wire::SERVER_TARGET;
use smolcord_sim::{Fault, SimConfig, SimEvent, DEFAULT_SIM_TOKEN};
use std::sync::Mutex;
use support::sim_client::*;

/// Keeps the trace lines of the simulator's wire target.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target() == SERVER_TARGET
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
            lines.push(record.args().to_string());
        }
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

fn lines() -> Vec<String> {
    CAPTURE.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[test]
fn the_simulator_traces_every_frame_without_secrets() {
    log::set_logger(&CAPTURE).expect("the only logger in this test binary");
    log::set_max_level(log::LevelFilter::Trace);
    run(async {
        let sim = sim_with(SimConfig {
            oversized_frame_bytes: 8 * 1024,
            ..SimConfig::default()
        });
        let (mut client, _) = Client::hello(&sim).await;
        let ready = client.identify_ready(1 << 12).await;
        let session_id = ready["d"]["session_id"].as_str().unwrap().to_owned();
        client.heartbeat().await;
        client.expect_op(11).await;
        client.close(4000).await;
        sim.wait_for(WAIT, |e| matches!(e, SimEvent::ClientClosed { .. }))
            .await
            .expect("the close");

        let mut resumed = Client::connect(&sim, "/?v=10&encoding=json").await;
        resumed.expect_hello().await;
        resumed.resume(&session_id, 1).await;
        let frame = resumed.expect_dispatch().await;
        assert_eq!(frame["t"], "RESUMED");
        sim.fault(Fault::Oversized);
        let frame = resumed.frame().await;
        assert_eq!(frame["t"], "SIM_OVERSIZED");
        sim.dispatch("TEST_EVENT", json!({"echo": DEFAULT_SIM_TOKEN}));
        resumed.expect_dispatch().await;

        let trace = lines();
        let text = trace.join("\n");
        for expected in [
            "conn 1 +",
            "-> op 10 Hello",
            "<- op 2 Identify",
            "-> op 0 READY s=1",
            "<- op 1 Heartbeat",
            "-> op 11 HeartbeatAck",
            "<- close 4000 (unknown error)",
            "conn 2 +",
            "<- op 6 Resume",
            "-> op 0 RESUMED",
            "-> op 0 SIM_OVERSIZED",
            "more bytes not shown)",
            "-> op 0 TEST_EVENT",
        ] {
            assert!(text.contains(expected), "no {expected:?} in\n{text}");
        }
        assert!(
            !text.contains(DEFAULT_SIM_TOKEN),
            "the token leaked:\n{text}"
        );
        assert!(
            !text.contains(&session_id),
            "the session id leaked:\n{text}"
        );
        assert!(
            trace.iter().all(|line| line.len() < 1024),
            "a line is not abbreviated"
        );
    });
}
