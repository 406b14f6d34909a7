//! The shard against the simulator: identify, resume, reconnect, close codes.

use crate::support;

use smolcord::protocol::{Intents, Message, OpCode};
use smolcord::shard::{
    Compression, SessionState, ShardConfig, ShardError, ShardEvent, ShardHandle,
};
use smolcord::token::Token;
use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator};
use std::time::Duration;
use support::shard::*;
use support::wait::*;

/// Injects `n` DMs and returns their contents.
fn send_dms(sim: &Simulator, tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let content = format!("{tag}-{i}");
            sim.send_dm(42, "alice", &content);
            content
        })
        .collect()
}

/// Collects MESSAGE_CREATE contents until `expected` of them arrived.
async fn collect_messages(handle: &ShardHandle, expected: usize) -> Vec<String> {
    let mut seen = Vec::new();
    while seen.len() < expected {
        let dispatch = wait_dispatch(handle, "MESSAGE_CREATE").await;
        let message: Message = dispatch.data().expect("message decodes");
        seen.push(message.content);
    }
    seen
}

#[test]
fn identify_has_the_documented_shape_and_ready_sets_presence() {
    let sim = sim(5_000);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, _| async move {
        let ready = wait_dispatch(&handle, "READY").await;
        assert_eq!(ready.seq, 1);
        let SimEvent::Identified { identify, .. } = next_sim_event(&rx, "identify", |e| {
            matches!(e, SimEvent::Identified { .. })
        })
        .await
        else {
            unreachable!()
        };
        assert_eq!(identify.token, smolcord_sim::DEFAULT_SIM_TOKEN);
        assert_eq!(identify.intents, Intents::DIRECT_MESSAGES);
        assert_eq!(identify.shard, Some([0, 1]));
        assert_eq!(identify.properties.browser, "smolcord");
        assert_eq!(
            identify.presence.as_ref().map(|p| p.status.as_str()),
            Some("online")
        );
        // op 3 online after READY, so recovery is visible at once.
        let SimEvent::CommandReceived { raw, .. } = next_sim_event(&rx, "presence", |e| {
            matches!(e, SimEvent::CommandReceived { op, .. } if *op == OpCode::PresenceUpdate.as_u8())
        })
        .await
        else {
            unreachable!()
        };
        assert!(raw.contains("\"status\":\"online\""), "{raw}");
        let status = handle.status();
        assert_eq!(status.sessions_started, 1);
        assert!(status.connected);
        assert_eq!(
            status.user.map(|u| u.username),
            Some(sim.config().bot_name.clone())
        );
    });
}

#[test]
fn heartbeats_carry_the_last_sequence_and_answer_op_1_at_once() {
    let sim = sim(400);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        send_dms(&sim, "m", 3);
        collect_messages(&handle, 3).await;
        let last = handle.status().state.session.expect("session").seq;
        assert!(last >= 4, "{last}");
        next_sim_event(
            &rx,
            "a beat with the last seq",
            |e| matches!(e, SimEvent::Heartbeat { seq, .. } if *seq == Some(last)),
        )
        .await;
        // op 1 from the server: a beat well before the next deadline.
        next_sim_event(&rx, "a scheduled beat", |e| {
            matches!(e, SimEvent::Heartbeat { .. })
        })
        .await;
        let rx2 = sim.subscribe();
        assert_eq!(sim.fault(Fault::RequestHeartbeat), 1);
        let SimEvent::Heartbeat { gap, .. } = next_sim_event(&rx2, "the requested beat", |e| {
            matches!(e, SimEvent::Heartbeat { .. })
        })
        .await
        else {
            unreachable!()
        };
        assert!(
            gap < Duration::from_millis(300),
            "answered op 1 after {gap:?}"
        );
    });
}

#[test]
fn first_beat_is_jittered_within_one_interval() {
    let sim = sim(600);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |_handle, _| async move {
        let SimEvent::Heartbeat { gap, .. } = next_sim_event(&rx, "first beat", |e| {
            matches!(e, SimEvent::Heartbeat { .. })
        })
        .await
        else {
            unreachable!()
        };
        // The first gap is measured from Hello.
        assert!(
            gap <= Duration::from_millis(660),
            "first beat {gap:?} after Hello"
        );
    });
}

#[test]
fn op_7_resumes_on_the_resume_url_with_nothing_lost_or_doubled() {
    let sim = sim(5_000);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let mut expected = send_dms(&sim, "before", 3);
        let mut seen = collect_messages(&handle, 3).await;
        let session = handle.status().state.session.expect("session");
        assert_eq!(sim.fault(Fault::Reconnect), 1);
        // Sent while the client is between connections: must be replayed once.
        expected.extend(send_dms(&sim, "during", 3));
        next_sim_event(
            &rx,
            "a connection on /resume",
            |e| matches!(e, SimEvent::Connected { path, .. } if path == "/resume"),
        )
        .await;
        let SimEvent::Resumed {
            session_id, seq, ..
        } = next_sim_event(&rx, "resume", |e| matches!(e, SimEvent::Resumed { .. })).await
        else {
            unreachable!()
        };
        assert_eq!(session_id, session.session_id);
        // The client resumes from the last seq it received (some "during"
        // events may have reached it before op 7 did).
        assert!(
            seq >= session.seq,
            "resumed from {seq}, had {}",
            session.seq
        );
        expected.extend(send_dms(&sim, "after", 3));
        seen.extend(collect_messages(&handle, 6).await);
        assert_eq!(seen, expected);
        let status = handle.status();
        assert_eq!(status.sessions_started, 1, "op 7 must not re-identify");
        assert_eq!(status.resumes, 1);
        assert_eq!(status.gaps, 0);
        assert_eq!(sim.stats().totals.identifies, 1);
        // The client closed the old socket with a resumable code.
        let closes: Vec<Option<u16>> = sim
            .stats()
            .connections
            .iter()
            .filter_map(|c| c.ended.map(|_| c.client_close_code))
            .collect();
        assert!(
            closes.iter().all(|code| !matches!(code, Some(1000 | 1001))),
            "{closes:?}"
        );
    });
}

/// A shard config whose identifies are 0.5 s apart, not Discord's 5 s:
/// for tests that identify again and again but are not about the pacing
/// (with 5 s the last of three identifies waits half its wait's bound).
fn quick_identifies(sim: &Simulator) -> ShardConfig {
    let mut config = shard_config(sim);
    config.identify_window = Duration::from_millis(500);
    config
}

#[test]
fn invalid_session_true_resumes_false_identifies_afresh() {
    let sim = sim(5_000);
    let rx = sim.subscribe();
    run_local(quick_identifies(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        sim.fault(Fault::InvalidSession(true));
        wait_dispatch(&handle, "RESUMED").await;
        assert_eq!(handle.status().sessions_started, 1);
        sim.fault(Fault::InvalidSession(false));
        wait_dispatch(&handle, "READY").await;
        assert_eq!(handle.status().sessions_started, 2);
        assert_eq!(sim.stats().totals.identifies, 2);
        next_sim_event(
            &rx,
            "two identifies",
            |e| matches!(e, SimEvent::Identified { conn, .. } if *conn > 1),
        )
        .await;
    });
}

#[test]
fn close_codes_resume_reidentify_or_stop() {
    let sim = sim(5_000);
    run_local(quick_identifies(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        sim.fault(Fault::Close(4000));
        wait_dispatch(&handle, "RESUMED").await;
        sim.fault(Fault::DropTcp);
        wait_dispatch(&handle, "RESUMED").await;
        assert_eq!(handle.status().sessions_started, 1);
        for code in [4007, 4009] {
            sim.fault(Fault::Close(code));
            wait_dispatch(&handle, "READY").await;
        }
        assert_eq!(handle.status().sessions_started, 3);
        assert_eq!(handle.status().resumes, 2);
    });
}

#[test]
fn a_fatal_close_stops_with_a_clear_error() {
    for (code, hint) in [
        (4004, "token was rejected"),
        (4014, "privileged intent"),
        (4013, "intents"),
    ] {
        let sim = sim(5_000);
        run_local(shard_config(&sim), |handle, _| async move {
            wait_dispatch(&handle, "READY").await;
            sim.fault(Fault::Close(code));
            let error = wait_shard(&handle, SOON, |e| e.is_err()).await.unwrap_err();
            let ShardError::Fatal { code: got, .. } = &error else {
                panic!("{error:?}")
            };
            assert_eq!(*got, code);
            let text = error.to_string();
            assert!(
                text.contains(&code.to_string()) && text.contains(hint),
                "{text}"
            );
            assert_eq!(handle.next_event().await.unwrap_err(), ShardError::Stopped);
        });
    }
}

#[test]
fn a_bad_token_is_fatal_before_any_session() {
    let sim = sim(5_000);
    let mut config = shard_config(&sim);
    config.token = Token::new("not-the-token").unwrap();
    run_local(config, |handle, _| async move {
        let error = wait_shard(&handle, SOON, |e| e.is_err()).await.unwrap_err();
        assert!(
            error.to_string().contains("authentication failed (4004)"),
            "{error}"
        );
        assert_eq!(sim.stats().totals.sessions_started, 0);
    });
}

/// A compressed session: READY, DMs, a beat, then op 7 (a new connection,
/// so a new context on both sides) and a resume with nothing lost.
fn compression_works_end_to_end(compression: Compression, query: &str) {
    let sim = sim(300);
    let rx = sim.subscribe();
    let mut config = shard_config(&sim);
    config.compress = compression;
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        send_dms(&sim, "z", 2);
        assert_eq!(collect_messages(&handle, 2).await, ["z-0", "z-1"]);
        wait_shard(&handle, SOON, |e| matches!(e, Ok(ShardEvent::Heartbeat(_))))
            .await
            .unwrap();
        // A message larger than one zlib/zstd block, repetitive and not.
        let big: String = (0..40_000)
            .map(|i| format!("{} ", i * 7919 % 1000))
            .collect();
        sim.send_dm(42, "alice", &big);
        assert_eq!(collect_messages(&handle, 1).await, [big]);
        assert_eq!(sim.fault(Fault::Reconnect), 1);
        next_sim_event(
            &rx,
            "a connection on /resume",
            |e| matches!(e, SimEvent::Connected { path, .. } if path == "/resume"),
        )
        .await;
        wait_dispatch(&handle, "RESUMED").await;
        send_dms(&sim, "after", 2);
        assert_eq!(collect_messages(&handle, 2).await, ["after-0", "after-1"]);
        let stats = sim.stats();
        assert_eq!(stats.connections.len(), 2);
        for conn in &stats.connections {
            assert_eq!(conn.compression.as_deref(), Some(query));
            let wanted = format!("compress={query}");
            assert!(conn.query.contains(&wanted), "{}", conn.query);
        }
        assert_eq!(handle.status().gaps, 0);
    });
}

#[test]
fn zlib_stream_compression_works_end_to_end() {
    compression_works_end_to_end(Compression::Zlib, "zlib-stream");
}

#[test]
fn zstd_stream_compression_works_end_to_end() {
    compression_works_end_to_end(Compression::Zstd, "zstd-stream");
}

/// A message that compresses to a few hundred bytes but decompresses past
/// `max_message_bytes` ends the connection (a bomb), and the shard connects
/// again to resume.
fn a_compressed_message_over_the_cap_is_refused(compression: Compression) {
    let sim = sim(5_000);
    let rx = sim.subscribe();
    let mut config = shard_config(&sim);
    config.compress = compression;
    config.max_message_bytes = Some(64 << 10);
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        sim.send_dm(42, "alice", &"x".repeat(1 << 20));
        match wait_shard(&handle, SOON, |e| {
            matches!(e, Ok(ShardEvent::Disconnected { .. }))
        })
        .await
        {
            Ok(ShardEvent::Disconnected { reason }) => {
                assert!(reason.contains("more than 65536 bytes"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        next_sim_event(
            &rx,
            "a second connection",
            |e| matches!(e, SimEvent::Connected { conn, .. } if *conn > 1),
        )
        .await;
        // (Not RESUMED: the simulator replays the bomb, as Discord would.)
        assert_eq!(handle.status().sessions_started, 1);
    });
}

#[test]
fn a_zlib_bomb_is_refused_and_the_shard_reconnects() {
    a_compressed_message_over_the_cap_is_refused(Compression::Zlib);
}

#[test]
fn a_zstd_bomb_is_refused_and_the_shard_reconnects() {
    a_compressed_message_over_the_cap_is_refused(Compression::Zstd);
}

#[test]
fn a_restarted_process_resumes_from_saved_state() {
    let sim = sim(5_000);
    let first = sim.clone();
    let saved: SessionState = run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        send_dms(&first, "first-life", 2);
        collect_messages(&handle, 2).await;
        // Round-trip through JSON as the bridge's session.json does.
        let text = serde_json::to_string(&handle.status().state).unwrap();
        serde_json::from_str(&text).unwrap()
    });
    assert!(saved.session.is_some());
    assert_eq!(
        saved.identifies.clone().used(u64::MAX / 2),
        0,
        "old entries expire"
    );
    // Sent while no process runs.
    send_dms(&sim, "between", 2);
    let mut config = shard_config(&sim);
    config.state = saved;
    run_local(config, |handle, _| async move {
        // The replay comes before RESUMED.
        assert_eq!(
            collect_messages(&handle, 2).await,
            ["between-0", "between-1"]
        );
        wait_dispatch(&handle, "RESUMED").await;
        assert_eq!(handle.status().sessions_started, 0);
        assert_eq!(sim.stats().totals.identifies, 1);
        assert_eq!(sim.stats().totals.resumes, 1);
    });
}

#[test]
fn an_expired_saved_session_falls_back_to_identify() {
    let sim = sim(5_000);
    let mut config = shard_config(&sim);
    config.state.session = Some(smolcord::shard::Session {
        session_id: "gone".into(),
        seq: 7,
        resume_gateway_url: sim.resume_gateway_url(),
    });
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        assert_eq!(handle.status().sessions_started, 1);
    });
}

#[test]
fn queued_commands_never_starve_heartbeats_or_break_the_limit() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        ..SimConfig::default() // Discord's 120 per 60 s: 4008 if we exceed it
    })
    .unwrap();
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, ex| async move {
        wait_dispatch(&handle, "READY").await;
        let flooder = handle.clone();
        ex.spawn(async move {
            for _ in 0..300 {
                let presence = smolcord::protocol::Command::PresenceUpdate(
                    smolcord::protocol::PresenceUpdate::online(),
                );
                if flooder.send(presence).await.is_err() {
                    break;
                }
            }
        })
        .detach();
        // Three beats in a row keep coming while the queue is full.
        for n in 0..3 {
            next_sim_event(&rx, &format!("beat {n} under load"), |e| {
                matches!(e, SimEvent::Heartbeat { .. })
            })
            .await;
        }
        let stats = sim.stats();
        let conn = &stats.connections[0];
        assert!(conn.ended.is_none(), "closed: {:?}", conn.server_close_code);
        assert_eq!(conn.late, 0, "a beat was late under the flood");
        let commands = sim
            .events()
            .iter()
            .filter(|e| matches!(e, SimEvent::CommandReceived { .. }))
            .count();
        assert!(commands <= 120, "{commands} commands in the first minute");
        assert!(commands >= 50, "the limiter let only {commands} through");
    });
}

#[test]
fn oversized_commands_are_refused_before_sending() {
    let sim = sim(5_000);
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let mut presence = smolcord::protocol::PresenceUpdate::online();
        presence.activities.push(smolcord::protocol::Activity {
            name: "x".repeat(5000),
            ..Default::default()
        });
        let error = handle
            .send(smolcord::protocol::Command::PresenceUpdate(presence))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("4096"), "{error}");
    });
}

#[test]
fn malformed_frames_are_skipped_not_fatal() {
    let sim = sim(5_000);
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        sim.fault(Fault::Malformed);
        // The simulator's connection may write a dispatch queued after the
        // fault before it, so the DM goes out once the bad frame was read.
        wait_until("the malformed frame read", SOON, || {
            (handle.status().malformed_frames == 1).then_some(())
        })
        .await;
        sim.send_dm(7, "bob", "still here");
        let message: Message = wait_dispatch(&handle, "MESSAGE_CREATE")
            .await
            .data()
            .unwrap();
        assert_eq!(message.content, "still here");
        assert_eq!(handle.status().malformed_frames, 1);
        assert_eq!(handle.status().sessions_started, 1);
    });
}

#[test]
fn a_server_close_with_1000_or_1001_resumes() {
    // Discord documents only that a *client* closing with 1000/1001 ends
    // the session; a server's 1000/1001 is resumed, as twilight and
    // discord.py do (a session that did end answers op 9, then Identify).
    let sim = sim(5_000);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        for code in [1000, 1001] {
            assert_eq!(sim.fault(Fault::Close(code)), 1);
            next_sim_event(&rx, &format!("a resume after {code}"), |e| {
                matches!(e, SimEvent::Resumed { .. })
            })
            .await;
            wait_dispatch(&handle, "RESUMED").await;
        }
        let status = handle.status();
        assert_eq!((status.sessions_started, status.resumes), (1, 2));
        assert_eq!(sim.stats().totals.identifies, 1);
    });
}
