//! The simulator's gateway: Hello, Identify/READY, every close-code rule,
//! compression, and garbage that must not hurt it.

use crate::support;

use serde_json::json;
use smolcord::protocol::Intents;
use smolcord_sim::{SimConfig, SimEvent, DEFAULT_SIM_TOKEN, SYNC_FLUSH_SUFFIX};
use std::time::{Duration, Instant};
use support::sim_client::*;

const GUILDS: u64 = 1;
const DMS: u64 = 1 << 12;

#[test]
fn hello_identify_ready_then_guild_create() {
    run(async {
        let sim = sim();
        let (mut client, interval) = Client::hello(&sim).await;
        assert_eq!(interval, 41_250);
        let ready = client.identify_ready(GUILDS | DMS).await;
        assert_eq!(ready["s"], 1, "READY starts the sequence at 1");
        let d = &ready["d"];
        assert_eq!(d["v"], 10);
        assert_eq!(d["resume_gateway_url"], sim.resume_gateway_url());
        assert!(d["session_id"].as_str().is_some_and(|s| s.len() == 32));
        assert_eq!(d["user"]["bot"], true);
        assert_eq!(d["guilds"][0]["unavailable"], true);
        let guild = client.expect_dispatch().await;
        assert_eq!(guild["t"], "GUILD_CREATE");
        assert_eq!(guild["s"], 2);
        assert_eq!(guild["d"]["channels"].as_array().map(Vec::len), Some(2));
        // The simulator's own account of it.
        let event = sim
            .wait_for(WAIT, |e| matches!(e, SimEvent::Identified { .. }))
            .await
            .expect("Identified event");
        let SimEvent::Identified {
            identify,
            session_id,
            ..
        } = event
        else {
            unreachable!()
        };
        assert_eq!(session_id, d["session_id"].as_str().unwrap_or_default());
        assert_eq!(identify.intents, Intents::from_bits(GUILDS | DMS));
        assert!(!format!("{identify:?}").contains(DEFAULT_SIM_TOKEN));
        let stats = sim.stats();
        assert_eq!(stats.totals.sessions_started, 1);
        assert_eq!(stats.connections[0].path, "/");
        assert_eq!(stats.connections[0].query, "v=10&encoding=json");
    });
}

#[test]
fn without_guilds_intent_no_guild_create_and_missing_query_is_fine() {
    run(async {
        let sim = sim();
        let mut client = Client::connect(&sim, "/").await;
        client.expect_hello().await;
        client.identify_ready(DMS).await;
        // The next frame must be the ACK of this heartbeat, not a GUILD_CREATE.
        client.heartbeat().await;
        client.expect_op(11).await;
    });
}

#[test]
fn heartbeat_before_identify_is_acked_and_bot_prefixed_token_accepted() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.send(json!({"op": 1, "d": null})).await;
        client.expect_op(11).await;
        client
            .identify_with(json!({"token": format!("Bot {DEFAULT_SIM_TOKEN}"), "intents": DMS}))
            .await;
        assert_eq!(client.expect_dispatch().await["t"], "READY");
    });
}

#[test]
fn deprecated_dollar_properties_are_accepted() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client
            .identify_with(json!({"token": DEFAULT_SIM_TOKEN, "intents": DMS,
                "properties": {"$os": "linux", "$browser": "old", "$device": "old"}}))
            .await;
        assert_eq!(client.expect_dispatch().await["t"], "READY");
    });
}

/// Opens a connection, reads Hello, sends `frames`, expects close `code`.
async fn expect_close_after(sim: &smolcord_sim::Simulator, frames: &[String], code: u16) {
    let (mut client, _) = Client::hello(sim).await;
    for frame in frames {
        client.send_text(frame).await;
    }
    assert_eq!(client.expect_close().await, Some(code), "after {frames:?}");
}

fn identify_frame(extra: serde_json::Value) -> String {
    let mut d = json!({"token": DEFAULT_SIM_TOKEN, "intents": DMS,
        "properties": {"os": "linux", "browser": "t", "device": "t"}});
    if let (Some(d), Some(extra)) = (d.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            d.insert(k.clone(), v.clone());
        }
    }
    json!({"op": 2, "d": d}).to_string()
}

#[test]
fn every_close_code_rule() {
    run(async {
        let sim = sim_with(SimConfig {
            required_shards: None,
            ..SimConfig::default()
        });
        // 4002: not JSON; over 4096 bytes.
        expect_close_after(&sim, &["{".into()], 4002).await;
        let big = json!({"op": 3, "d": {"x": "y".repeat(5000)}}).to_string();
        expect_close_after(&sim, &[big], 4002).await;
        // 4001: unknown opcode, server-only opcode, bad payload for an opcode.
        expect_close_after(&sim, &[r#"{"op":5,"d":null}"#.into()], 4001).await;
        expect_close_after(&sim, &[r#"{"op":11,"d":null}"#.into()], 4001).await;
        expect_close_after(&sim, &[r#"{"op":1,"d":"soon"}"#.into()], 4001).await;
        expect_close_after(&sim, &[r#"{"op":2,"d":{"token":1}}"#.into()], 4001).await;
        // 4003: a command other than heartbeat/identify/resume first.
        let presence =
            json!({"op":3,"d":{"since":null,"activities":[],"status":"online","afk":false}});
        expect_close_after(&sim, &[presence.to_string()], 4003).await;
        // 4004: bad token.
        expect_close_after(&sim, &[identify_frame(json!({"token": "wrong"}))], 4004).await;
        // 4005: identify twice.
        expect_close_after(
            &sim,
            &[identify_frame(json!({})), identify_frame(json!({}))],
            4005,
        )
        .await;
        // 4010: shard id not below the count.
        expect_close_after(&sim, &[identify_frame(json!({"shard": [2, 2]}))], 4010).await;
        // 4013: unknown intent bits; 4014: privileged intent not enabled.
        expect_close_after(
            &sim,
            &[identify_frame(json!({"intents": 1u64 << 30}))],
            4013,
        )
        .await;
        expect_close_after(
            &sim,
            &[identify_frame(json!({"intents": DMS | 1 << 15}))],
            4014,
        )
        .await;

        let closes: Vec<u16> = sim
            .stats()
            .connections
            .iter()
            .filter_map(|c| c.server_close_code)
            .collect();
        assert_eq!(
            closes,
            [4002, 4002, 4001, 4001, 4001, 4001, 4003, 4004, 4005, 4010, 4013, 4014]
        );
        let events = sim.events();
        let by_server = events
            .iter()
            .filter(|e| matches!(e, SimEvent::ClosedByServer { code: Some(_), .. }))
            .count();
        assert_eq!(by_server, closes.len());
    });
}

#[test]
fn after_ready_presence_is_fine_and_resume_or_identify_again_is_4005() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        let ready = client.identify_ready(DMS).await;
        let presence =
            json!({"op":3,"d":{"since":null,"activities":[],"status":"idle","afk":false}});
        client.send(presence).await;
        client.heartbeat().await;
        client.expect_op(11).await;
        let session = ready["d"]["session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        client.resume(&session, 1).await;
        assert_eq!(client.expect_close().await, Some(4005));
    });
}

#[test]
fn privileged_intents_pass_when_enabled_and_shard_count_is_enforced() {
    run(async {
        let sim = sim_with(SimConfig {
            enabled_privileged_intents: Intents::MESSAGE_CONTENT,
            required_shards: Some(2),
            ..SimConfig::default()
        });
        expect_close_after(
            &sim,
            &[identify_frame(json!({"intents": DMS | 1 << 15}))],
            4011,
        )
        .await;
        expect_close_after(
            &sim,
            &[identify_frame(
                json!({"intents": DMS | 1 << 15, "shard": [0, 1]}),
            )],
            4011,
        )
        .await;
        let (mut client, _) = Client::hello(&sim).await;
        client
            .identify_with(
                json!({"token": DEFAULT_SIM_TOKEN, "intents": DMS | 1 << 15, "shard": [1, 2]}),
            )
            .await;
        let ready = client.expect_dispatch().await;
        assert_eq!(ready["t"], "READY");
        assert_eq!(ready["d"]["shard"], json!([1, 2]));
    });
}

#[test]
fn unsupported_version_is_4012_and_etf_is_refused() {
    run(async {
        let sim = sim();
        let mut client = Client::connect(&sim, "/?v=8&encoding=json").await;
        assert_eq!(client.expect_close().await, Some(4012));
        let mut client = Client::connect(&sim, "/?v=10&encoding=etf").await;
        assert_eq!(client.expect_close().await, Some(4002));
        // v=9 is still served.
        let mut client = Client::connect(&sim, "/?v=9").await;
        client.expect_hello().await;
    });
}

#[test]
fn command_rate_limit_is_4008() {
    run(async {
        let sim = sim_with(SimConfig {
            command_limit: 5,
            ..SimConfig::default()
        });
        let (mut client, _) = Client::hello(&sim).await;
        for _ in 0..5 {
            client.heartbeat().await;
            client.expect_op(11).await;
        }
        client.heartbeat().await;
        assert_eq!(client.expect_close().await, Some(4008));
    });
}

#[test]
fn no_heartbeat_within_grace_is_4009_and_beating_keeps_it_alive() {
    run(async {
        let sim = sim_with(fast(100));
        // Beating every 50 ms for 600 ms: no close.
        let (mut alive, interval) = Client::hello(&sim).await;
        assert_eq!(interval, 100);
        let start = Instant::now();
        for n in 1..=12 {
            at(start + Duration::from_millis(50 * n)).await;
            alive.heartbeat().await;
            alive.expect_op(11).await;
        }
        alive.close(4000).await;
        // Silent: closed with 4009 after 1.5 × 100 ms.
        let (mut silent, _) = Client::hello(&sim).await;
        let hello_seen = Instant::now();
        assert_eq!(silent.expect_close().await, Some(4009));
        let waited = hello_seen.elapsed();
        assert!(waited >= Duration::from_millis(120), "{waited:?}");
        assert!(waited < Duration::from_millis(2000), "{waited:?}");
        let stats = sim.stats();
        assert_eq!(stats.totals.heartbeat_timeouts, 1);
        assert_eq!(stats.connections[0].server_close_code, None);
        assert_eq!(stats.connections[1].server_close_code, Some(4009));
    });
}

#[test]
fn a_timed_out_session_cannot_be_resumed() {
    run(async {
        let sim = sim_with(fast(100));
        let (mut client, _) = Client::hello(&sim).await;
        let ready = client.identify_ready(DMS).await;
        assert_eq!(client.expect_close().await, Some(4009));
        let session = ready["d"]["session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut again = Client::connect(&sim, "/resume?v=10&encoding=json").await;
        again.expect_hello().await;
        again.resume(&session, 1).await;
        let invalid = again.expect_op(9).await;
        assert_eq!(invalid["d"], false);
    });
}

#[test]
fn zlib_stream_one_context_per_connection_with_sync_flush_suffix() {
    run(async {
        let sim = sim();
        let mut client = Client::connect(&sim, "/?v=10&encoding=json&compress=zlib-stream").await;
        assert_eq!(client.expect_hello().await, 41_250);
        client.heartbeat().await;
        client.expect_op(11).await;
        client.identify_ready(GUILDS | DMS).await;
        assert_eq!(client.expect_dispatch().await["t"], "GUILD_CREATE");
        assert_eq!(client.text_frames, 0, "every message is binary");
        assert_eq!(client.binary_frames.len(), 4);
        for frame in &client.binary_frames {
            assert!(frame.ends_with(&SYNC_FLUSH_SUFFIX));
        }
        // The frames form one stream: a fresh context cannot start at the
        // second message.
        let mut fresh = flate2::Decompress::new(true);
        let mut out = Vec::with_capacity(4096);
        let second = &client.binary_frames[1];
        assert!(fresh
            .decompress_vec(second, &mut out, flate2::FlushDecompress::Sync)
            .is_err());
        // A second connection starts its own context.
        let mut other = Client::connect(&sim, "/?v=10&compress=zlib-stream").await;
        other.expect_hello().await;
        assert_eq!(other.binary_frames[0][0], 0x78, "starts with a zlib header");
        assert_eq!(
            sim.stats().connections[0].compression.as_deref(),
            Some("zlib-stream")
        );
    });
}

/// The sim's zstd-stream so far, read by ruzstd (pure Rust, independent of
/// the C library the simulator compresses with). The frame never ends, and
/// ruzstd hands out the last window's bytes only once a frame has ended, so
/// the test ends it: an empty raw block marked last (`01 00 00`).
fn ruzstd_reads(frames: &[Vec<u8>]) -> String {
    let mut stream: Vec<u8> = frames.concat();
    stream.extend_from_slice(&[0x01, 0x00, 0x00]);
    let mut decoder = ruzstd::StreamingDecoder::new(&stream[..]).expect("a zstd frame header");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut decoder, &mut text).expect("ruzstd decodes the stream");
    text
}

#[test]
fn zstd_stream_one_context_per_connection_one_message_per_frame() {
    run(async {
        let sim = sim();
        let mut client = Client::connect(&sim, "/?v=10&encoding=json&compress=zstd-stream").await;
        assert_eq!(client.expect_hello().await, 41_250);
        client.heartbeat().await;
        client.expect_op(11).await;
        client.identify_ready(GUILDS | DMS).await;
        assert_eq!(client.expect_dispatch().await["t"], "GUILD_CREATE");
        assert_eq!(client.text_frames, 0, "every message is binary");
        assert_eq!(client.binary_frames.len(), 4);
        // Each frame is one whole JSON message (decompressed in one go by
        // the client's context, so flushed)...
        for text in &client.binary_texts {
            serde_json::from_str::<serde_json::Value>(text).expect("one JSON message");
        }
        // ...and only the first starts a zstd frame: no message ends it.
        assert!(client.binary_frames[0].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
        for frame in &client.binary_frames[1..] {
            assert!(!frame.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
        }
        // The frames form one stream: a fresh context cannot start at the
        // second message.
        assert!(smolcord::transport::ZstdInflater::new()
            .push(&client.binary_frames[1])
            .is_err());
        // An independent decoder reads the same text from the same bytes.
        assert_eq!(
            ruzstd_reads(&client.binary_frames),
            client.binary_texts.concat()
        );
        // A second connection starts its own context.
        let mut other = Client::connect(&sim, "/?v=10&compress=zstd-stream").await;
        other.expect_hello().await;
        assert!(other.binary_frames[0].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
        assert_eq!(
            sim.stats().connections[0].compression.as_deref(),
            Some("zstd-stream")
        );
    });
}

#[test]
fn identify_compress_true_gets_per_payload_zlib_frames() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        assert_eq!(
            client.text_frames, 1,
            "Hello comes before Identify, as text"
        );
        client
            .identify_with(json!({"token": DEFAULT_SIM_TOKEN, "intents": GUILDS, "compress": true}))
            .await;
        client.mode = Inflate::Payload;
        assert_eq!(client.expect_dispatch().await["t"], "READY");
        assert_eq!(client.expect_dispatch().await["t"], "GUILD_CREATE");
        client.heartbeat().await;
        client.expect_op(11).await;
        assert_eq!(client.binary_frames.len(), 3);
        assert_eq!(
            sim.stats().connections[0].compression.as_deref(),
            Some("payload")
        );
    });
}

#[test]
fn garbage_never_hurts_the_simulator() {
    run(async {
        let sim = sim();
        // Binary garbage on the gateway.
        let (mut client, _) = Client::hello(&sim).await;
        client.send_binary(&[0xff, 0x00, 0x13, 0x37]).await;
        assert_eq!(client.expect_close().await, Some(4002));
        // A JSON array, a number, nested nonsense.
        expect_close_after(&sim, &["[1,2]".into()], 4002).await;
        expect_close_after(&sim, &["5".into()], 4002).await;
        expect_close_after(&sim, &[r#"{"op":2,"d":[]}"#.into()], 4001).await;
        // Raw TCP garbage and a half-open request.
        let mut raw = Http::connect(&sim).await;
        raw.send_raw(b"\x00\x01\x02garbage\r\n\r\n").await;
        assert_eq!(raw.read_reply().await.status, 400);
        let mut half = Http::connect(&sim).await;
        half.send_raw(b"GET /api/v10/gateway HTT").await;
        drop(half);
        // An upgrade without a key.
        let mut bad = Http::connect(&sim).await;
        bad.send_raw(b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            .await;
        assert_eq!(bad.read_reply().await.status, 426);
        // Still serving.
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;
    });
}

#[test]
fn port_in_use_is_a_clear_error() {
    let sim = sim();
    let err = smolcord_sim::Simulator::start(SimConfig {
        listen: sim.local_addr(),
        ..SimConfig::default()
    })
    .expect_err("second bind fails");
    let text = err.to_string();
    assert!(text.contains(&sim.local_addr().to_string()), "{text}");
}

#[test]
fn shutdown_closes_connections() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        let other = sim.clone();
        other.shutdown();
        assert!(matches!(
            client.next().await,
            Seen::Dropped | Seen::Closed(_)
        ));
        // Idempotent, also through the remaining handle.
        sim.shutdown();
    });
}
