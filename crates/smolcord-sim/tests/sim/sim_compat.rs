//! What real client libraries needed from the simulator (found by
//! `scripts/compat`): each test pins one accommodation, so a later change
//! cannot quietly break discord.py, twilight or serenity again.

use crate::support;

use serde_json::json;
use smolcord_sim::DEFAULT_SIM_TOKEN;
use support::sim_client::*;

const GUILDS: u64 = 1;
const DMS: u64 = 1 << 12;

/// serenity 0.12 serializes a presence's `since` as a `SystemTime`.
fn serenity_since() -> serde_json::Value {
    json!({"secs_since_epoch": 1_780_000_000u64, "nanos_since_epoch": 123_456_789u32})
}

/// Heartbeats and expects the ACK: proof the connection is still open.
async fn still_open(client: &mut Client) {
    client.heartbeat().await;
    loop {
        match client.next().await {
            Seen::Frame(frame) if frame["op"] == 11 => return,
            Seen::Frame(_) => continue,
            other => panic!("expected a heartbeat ACK, got {other:?}"),
        }
    }
}

#[test]
fn guild_create_roles_carry_discords_colors_object() {
    // twilight-model 0.18 refuses a Role without `colors`.
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(GUILDS).await;
        let guild = client.expect_dispatch().await;
        assert_eq!(guild["t"], "GUILD_CREATE");
        let roles = guild["d"]["roles"].as_array().expect("roles");
        assert!(!roles.is_empty());
        for role in roles {
            assert_eq!(role["colors"]["primary_color"], role["color"], "{role}");
            assert!(role["colors"]["secondary_color"].is_null(), "{role}");
            assert!(role["colors"]["tertiary_color"].is_null(), "{role}");
        }
    });
}

#[test]
fn identify_with_serenitys_since_map_gets_ready() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client
            .identify_with(json!({
                "token": DEFAULT_SIM_TOKEN,
                "intents": GUILDS | DMS,
                "compress": false,
                "large_threshold": 250,
                "shard": [0, 1],
                "presence": {"afk": false, "status": "online", "since": serenity_since(), "activities": []},
            }))
            .await;
        let ready = client.expect_dispatch().await;
        assert_eq!(ready["t"], "READY", "{ready}");
        assert_eq!(sim.stats().totals.sessions_started, 1);
    });
}

#[test]
fn identify_with_oceanics_string_compress_gets_ready_uncompressed() {
    // Oceanic.js 1.15 sends the transport's name where Discord documents
    // a boolean: read as false (no per-payload compression).
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client
            .identify_with(json!({
                "token": DEFAULT_SIM_TOKEN,
                "intents": GUILDS | DMS,
                "compress": "zlib-stream",
                "properties": {"os": "linux", "browser": "Oceanic", "device": "Oceanic"},
            }))
            .await;
        let ready = client.expect_dispatch().await;
        assert_eq!(ready["t"], "READY", "{ready}");
        still_open(&mut client).await;
    });
}

#[test]
fn presence_update_with_serenitys_since_map_is_accepted() {
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;
        client
            .send(json!({"op": 3, "d": {"afk": false, "status": "idle", "since": serenity_since(), "activities": []}}))
            .await;
        still_open(&mut client).await;
        assert_eq!(sim.stats().connections[0].server_close_code, None);
    });
}

#[test]
fn presence_update_still_refuses_a_missing_status() {
    // Leniency covers `since` only: the rest of op 3 is still checked.
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        client.identify_ready(DMS).await;
        client
            .send(
                json!({"op": 3, "d": {"afk": false, "since": serenity_since(), "activities": []}}),
            )
            .await;
        assert_eq!(client.expect_close().await, Some(4001));
    });
}

#[test]
fn resume_is_served_where_twilight_and_serenity_send_it() {
    // twilight appends "/?v=10..." to READY's resume_gateway_url, so it
    // resumes on "/resume/"; serenity 0.12 ignores resume_gateway_url and
    // resumes on the gateway URL ("/"). Discord serves both.
    run(async {
        let sim = sim();
        let (mut client, _) = Client::hello(&sim).await;
        let ready = client.identify_ready(DMS).await;
        let session_id = ready["d"]["session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        client.close(4000).await;
        for path in ["/resume/?v=10&encoding=json", "/?v=10"] {
            let mut resumed = Client::connect(&sim, path).await;
            resumed.expect_hello().await;
            resumed.resume(&session_id, 1).await;
            let frame = resumed.expect_dispatch().await;
            assert_eq!(frame["t"], "RESUMED", "on {path}: {frame}");
            resumed.close(4000).await;
        }
        let stats = sim.stats();
        let paths: Vec<(&str, u32)> = stats
            .connections
            .iter()
            .map(|c| (c.path.as_str(), c.resumes))
            .collect();
        assert_eq!(paths, [("/", 0), ("/resume/", 1), ("/", 1)]);
        assert_eq!(stats.totals.resumes, 2);
    });
}

#[test]
fn a_429_carries_via_and_a_json_body_for_discord_py() {
    // discord.py 2.7.1 (http.py) raises HTTPException for a 429 without a
    // `Via` header or with a non-JSON body ("Banned by Cloudflare more
    // than likely") instead of waiting `retry_after`.
    run(async {
        let sim = sim();
        let channel = sim.config().guilds[0].channels[0].id;
        let path = format!("/api/v10/channels/{channel}/messages");
        for fault in [
            smolcord_sim::RestFault::rate_limited(1, 0.1),
            smolcord_sim::RestFault::global_rate_limited(1, 0.1),
        ] {
            sim.rest_fault(fault);
            let reply = http(&sim, "POST", &path, true, Some(&json!({"content": "x"}))).await;
            assert_eq!(reply.status, 429);
            assert!(reply.header("via").is_some_and(|v| !v.is_empty()));
            assert_eq!(reply.header("content-type"), Some("application/json"));
            assert!(reply.json()["retry_after"].is_f64());
        }
    });
}
