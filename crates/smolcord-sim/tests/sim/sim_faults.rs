//! Every gateway fault, from Rust and from the control API, and the
//! per-connection heartbeat measurements.

use crate::support;

use serde_json::json;
use smolcord_sim::{next_matching, ConnEnd, Fault, SimConfig, SimEvent, Simulator};
use std::time::{Duration, Instant};
use support::sim_client::*;

const DMS: u64 = 1 << 12;

async fn identified(sim: &Simulator) -> (Client, String) {
    let (mut client, _) = Client::hello(sim).await;
    let ready = client.identify_ready(DMS).await;
    let id = ready["d"]["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    (client, id)
}

async fn resumes(sim: &Simulator, session_id: &str, seq: u64) -> bool {
    let mut client = Client::connect(sim, "/resume?v=10").await;
    client.expect_hello().await;
    client.resume(session_id, seq).await;
    let frame = client.frame().await;
    frame["t"] == "RESUMED"
}

#[test]
fn drop_acks_withholds_exactly_n() {
    run(async {
        let sim = sim();
        let (mut client, _) = identified(&sim).await;
        assert_eq!(sim.fault(Fault::DropAcks(2)), 1);
        let events = sim.subscribe();
        for _ in 0..3 {
            client.heartbeat().await;
        }
        for _ in 0..3 {
            next_matching(&events, WAIT, |e| matches!(e, SimEvent::Heartbeat { .. }))
                .await
                .expect("heartbeat processed");
        }
        // Frames keep their order: one ACK, then the marker, means beats 1
        // and 2 got none.
        sim.dispatch("MARKER", json!({}));
        assert_eq!(client.frame().await["op"], 11);
        assert_eq!(client.frame().await["t"], "MARKER");
        let conn = &sim.stats().connections[0];
        assert_eq!(
            (conn.acks_dropped, conn.acks_sent, conn.heartbeats),
            (2, 1, 3)
        );
    });
}

#[test]
fn close_fault_sends_the_code_and_keeps_a_resumable_session() {
    run(async {
        let sim = sim();
        let (mut client, session_id) = identified(&sim).await;
        sim.fault(Fault::Close(4000));
        assert_eq!(client.expect_close().await, Some(4000));
        assert!(resumes(&sim, &session_id, 1).await);
        assert_eq!(sim.stats().connections[0].ended, Some(ConnEnd::ServerClose));
    });
}

#[test]
fn close_with_a_reidentify_code_ends_the_session() {
    run(async {
        let sim = sim();
        let (mut client, session_id) = identified(&sim).await;
        sim.fault(Fault::Close(4009));
        assert_eq!(client.expect_close().await, Some(4009));
        assert!(!resumes(&sim, &session_id, 1).await);
    });
}

#[test]
fn drop_tcp_ends_without_close_frame_and_session_survives() {
    run(async {
        let sim = sim();
        let (mut client, session_id) = identified(&sim).await;
        sim.fault(Fault::DropTcp);
        assert!(matches!(client.next().await, Seen::Dropped));
        sim.wait_for(WAIT, |e| {
            matches!(e, SimEvent::ClosedByServer { code: None, .. })
        })
        .await
        .expect("drop reported");
        assert!(resumes(&sim, &session_id, 1).await);
        assert_eq!(sim.stats().connections[0].ended, Some(ConnEnd::ServerDrop));
    });
}

#[test]
fn reconnect_request_heartbeat_and_invalid_session() {
    run(async {
        let sim = sim();
        let (mut client, session_id) = identified(&sim).await;
        sim.fault(Fault::Reconnect);
        assert_eq!(client.expect_op(7).await["d"], serde_json::Value::Null);
        sim.fault(Fault::RequestHeartbeat);
        client.expect_op(1).await;
        sim.fault(Fault::InvalidSession(true));
        assert_eq!(client.expect_op(9).await["d"], true);
        client.close(4000).await;
        // op 9 true: the session is still resumable.
        assert!(resumes(&sim, &session_id, 1).await);
        let (mut other, other_session) = identified(&sim).await;
        assert!(sim.fault(Fault::InvalidSession(false)) >= 1);
        assert_eq!(other.expect_op(9).await["d"], false);
        other.close(4000).await;
        assert!(!resumes(&sim, &other_session, 1).await);
    });
}

#[test]
fn after_invalid_session_commands_need_auth_again() {
    run(async {
        let sim = sim();
        let (mut client, _) = identified(&sim).await;
        sim.fault(Fault::InvalidSession(false));
        client.expect_op(9).await;
        client
            .send(json!({"op":3,"d":{"since":null,"activities":[],"status":"online","afk":false}}))
            .await;
        assert_eq!(client.expect_close().await, Some(4003));
    });
}

#[test]
fn stall_holds_the_ack_back() {
    run(async {
        let sim = sim();
        let (mut client, _) = identified(&sim).await;
        // The reader takes queued faults before frames, so the stall is in
        // force before the heartbeat below arrives.
        sim.fault(Fault::Stall(Duration::from_millis(400)));
        let sent = Instant::now();
        client.heartbeat().await;
        client.expect_op(11).await;
        let waited = sent.elapsed();
        assert!(waited >= Duration::from_millis(250), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
    });
}

#[test]
fn delay_holds_every_frame_back_until_cleared() {
    run(async {
        let sim = sim();
        let (mut client, _) = identified(&sim).await;
        sim.fault(Fault::Delay(Duration::from_millis(300)));
        let sent = Instant::now();
        client.heartbeat().await;
        client.expect_op(11).await;
        let waited = sent.elapsed();
        assert!(waited >= Duration::from_millis(250), "{waited:?}");
        sim.fault(Fault::Delay(Duration::ZERO));
        let sent = Instant::now();
        client.heartbeat().await;
        client.expect_op(11).await;
        assert!(
            sent.elapsed() < Duration::from_millis(250),
            "{:?}",
            sent.elapsed()
        );
    });
}

#[test]
fn malformed_and_oversized_frames() {
    run(async {
        let sim = sim_with(SimConfig {
            oversized_frame_bytes: 100_000,
            ..SimConfig::default()
        });
        let (mut client, _) = identified(&sim).await;
        sim.fault(Fault::Malformed);
        assert!(matches!(client.next().await, Seen::Garbage(_)));
        sim.fault(Fault::Oversized);
        let big = client.frame().await;
        assert_eq!(big["t"], "SIM_OVERSIZED");
        assert!(big.to_string().len() >= 99_000);
        // Neither consumed a sequence number.
        assert_eq!(sim.dispatch("NEXT", json!({})), [2]);
    });
}

#[test]
fn faults_reach_only_live_connections() {
    let sim = sim();
    assert_eq!(sim.fault(Fault::Reconnect), 0);
}

#[test]
fn control_api_faults() {
    run(async {
        let sim = sim();
        let (mut client, _) = identified(&sim).await;
        let reply = http(
            &sim,
            "POST",
            "/control/fault",
            false,
            Some(&json!({"kind": "reconnect"})),
        )
        .await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.json()["applied_to"], 1);
        client.expect_op(7).await;
        let reply = http(
            &sim,
            "POST",
            "/control/fault",
            false,
            Some(&json!({"kind": "close", "code": 4001})),
        )
        .await;
        assert_eq!(reply.status, 200);
        assert_eq!(client.expect_close().await, Some(4001));
    });
}

#[test]
fn heartbeat_statistics_measure_a_client_beating_at_known_times() {
    run(async {
        // 1000 ms interval: late above 1050 ms, deadline (4009) at 1500 ms.
        let sim = sim_with(fast(1000));
        let (mut client, _) = Client::hello(&sim).await;
        let hello = Instant::now();
        client.identify_ready(DMS).await;
        // Gaps: 300 (first, since Hello), 900, 1250 (late), 500.
        let events = sim.subscribe();
        for offset in [300, 1200, 2450, 2950] {
            at(hello + Duration::from_millis(offset)).await;
            client.heartbeat().await;
            client.expect_op(11).await;
        }
        let beat = next_heartbeat(&events).await;
        assert_eq!(beat.0, Some(1));
        client.close(4000).await;

        let stats = sim.stats();
        let conn = &stats.connections[0];
        assert_eq!(conn.heartbeats, 4);
        assert_eq!(conn.late, 1, "{:?}", conn.beats);
        assert_eq!(conn.missed_deadlines, 0, "{:?}", conn.beats);
        assert!(
            (1200.0..1450.0).contains(&conn.worst_gap_ms),
            "{}",
            conn.worst_gap_ms
        );
        let gaps: Vec<f64> = conn.beats.iter().map(|b| b.gap_ms).collect();
        assert!((250.0..600.0).contains(&gaps[0]), "{gaps:?}");
        assert!((800.0..1040.0).contains(&gaps[1]), "{gaps:?}");
        assert!(conn.beats[2].late && !conn.beats[1].late);
        assert!(conn.beats.iter().all(|b| b.d == Some(1)));
        assert_eq!(conn.identifies, 1);
        assert_eq!(conn.client_close_code, Some(4000));
        assert_eq!(conn.ended, Some(ConnEnd::ClientClose));
        assert!(conn.hello_at_ms.is_some() && conn.closed_at_ms.is_some());
        assert_eq!(stats.totals.late_heartbeats, 1);

        // The same numbers over the control API.
        let reply = http(&sim, "GET", "/control/stats", false, None).await;
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let json = reply.json();
        assert_eq!(json["totals"]["heartbeats"], 4);
        assert_eq!(json["connections"][0]["late"], 1);
        assert_eq!(json["connections"][0]["ended"], "client_close");
        assert_eq!(json["heartbeat_interval_ms"], 1000);
    });
}

/// The first Heartbeat event on `events` (subscribed before the beats).
async fn next_heartbeat(events: &async_channel::Receiver<SimEvent>) -> (Option<u64>, Duration) {
    let event = next_matching(events, WAIT, |e| matches!(e, SimEvent::Heartbeat { .. }))
        .await
        .expect("a heartbeat event");
    match event {
        SimEvent::Heartbeat { seq, gap, .. } => (seq, gap),
        _ => unreachable!(),
    }
}

#[test]
fn a_stalled_client_shows_up_as_a_late_beat_then_4009() {
    run(async {
        let sim = sim_with(fast(200));
        let (mut client, _) = Client::hello(&sim).await;
        let hello = Instant::now();
        at(hello + Duration::from_millis(100)).await;
        client.heartbeat().await;
        client.expect_op(11).await;
        // A 260 ms gap: late (> 210) but inside the 300 ms deadline.
        at(hello + Duration::from_millis(360)).await;
        client.heartbeat().await;
        client.expect_op(11).await;
        // Then silence: 4009.
        assert_eq!(client.expect_close().await, Some(4009));
        let conn = &sim.stats().connections[0];
        assert_eq!(conn.heartbeats, 2);
        assert_eq!(conn.late, 1, "{:?}", conn.beats);
        assert_eq!(conn.server_close_code, Some(4009));
    });
}

#[test]
fn absurd_fault_durations_do_not_break_the_simulator() {
    run(async {
        let sim = sim();
        let (_stalled, _) = identified(&sim).await;
        for body in [
            json!({"kind": "stall", "ms": u64::MAX}),
            json!({"kind": "delay", "ms": u64::MAX}),
        ] {
            let reply = http(&sim, "POST", "/control/fault", false, Some(&body)).await;
            assert_eq!(reply.status, 200, "{body}");
        }
        // A huge chunk size is refused, not added up.
        let mut conn = Http::connect(&sim).await;
        conn.send_raw(
            b"POST /api/v10/gateway HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
        )
        .await;
        assert_eq!(conn.read_reply().await.status, 413);
        // New connections are served normally.
        let (mut client, _) = identified(&sim).await;
        client.heartbeat().await;
        client.expect_op(11).await;
    });
}
