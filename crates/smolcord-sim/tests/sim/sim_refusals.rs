//! What the simulator's gateway refuses, and what it only notes, as listed
//! in the module doc of `smolcord_sim`: an invalid payload for an opcode
//! closes 4001 (Discord's "invalid payload for an opcode"); documented
//! ranges (large_threshold, statuses, activity types) are enforced the
//! same way; loose but harmless things (empty properties, no `v`, a
//! heartbeat ahead of the session, REST without a User-Agent) are served
//! and counted.

use crate::support;

use serde_json::{json, Value};
use smolcord_sim::DEFAULT_SIM_TOKEN;
use support::sim_client::*;

const DMS: u64 = 1 << 12;
const GUILDS: u64 = 1;

/// A fresh identified connection.
async fn identified(sim: &smolcord_sim::Simulator) -> Client {
    let (mut client, _) = Client::hello(sim).await;
    client.identify_ready(DMS | GUILDS).await;
    client
}

#[test]
fn garbage_payloads_for_an_opcode_close_4001() {
    run(async {
        let sim = sim();
        for op in [3, 4, 8, 31] {
            for d in [json!("garbage"), json!([1, 2])] {
                let mut client = identified(&sim).await;
                client.send(json!({"op": op, "d": d})).await;
                assert_eq!(
                    client.expect_close().await,
                    Some(4001),
                    "op {op} with d = {d}"
                );
            }
        }
        // Well-formed ones are taken.
        let guild = sim.config().guilds[0].id.to_string();
        let mut client = identified(&sim).await;
        client
            .send(json!({"op": 4, "d": {"guild_id": guild, "channel_id": null,
                                        "self_mute": false, "self_deaf": false}}))
            .await;
        client
            .send(json!({"op": 31, "d": {"guild_ids": [guild]}}))
            .await;
        client.heartbeat().await;
        loop {
            let frame = client.frame().await;
            if frame["op"] == 11 {
                break; // still open
            }
            assert_eq!(frame["op"], 0, "{frame}");
        }
    })
}

#[test]
fn identify_values_outside_the_documented_ranges_close_4001() {
    run(async {
        let sim = sim();
        let presence = |status: &str, kind: u64| {
            json!({"since": null, "afk": false, "status": status,
                   "activities": [{"name": "tests", "type": kind}]})
        };
        for (field, value) in [
            ("large_threshold", json!(10)),
            ("large_threshold", json!(251)),
            ("presence", presence("banana", 0)),
            ("presence", presence("online", 42)),
        ] {
            let (mut client, _) = Client::hello(&sim).await;
            client
                .identify_with(json!({"token": DEFAULT_SIM_TOKEN, "intents": DMS, field: value}))
                .await;
            assert_eq!(client.expect_close().await, Some(4001), "{field}: {value}");
        }
        // The same presence problems in op 3.
        for d in [presence("banana", 0), presence("online", 42)] {
            let mut client = identified(&sim).await;
            client.send(json!({"op": 3, "d": d})).await;
            assert_eq!(client.expect_close().await, Some(4001), "op 3 {d}");
        }
        // In range: READY.
        let (mut client, _) = Client::hello(&sim).await;
        client
            .identify_with(json!({"token": DEFAULT_SIM_TOKEN, "intents": DMS,
                                  "large_threshold": 50, "presence": presence("dnd", 5)}))
            .await;
        assert_eq!(client.expect_dispatch().await["t"], "READY");
    })
}

#[test]
fn loose_but_harmless_is_served_and_counted() {
    run(async {
        let sim = sim();
        // `properties: {}`: Discord takes it (and the deprecated `$os` names).
        let (mut client, _) = Client::hello(&sim).await;
        client
            .send(json!({"op": 2, "d": {"token": DEFAULT_SIM_TOKEN, "intents": DMS, "properties": {}}}))
            .await;
        assert_eq!(client.expect_dispatch().await["t"], "READY");

        // A heartbeat claiming a seq the session never sent: ACKed, counted.
        client.send(json!({"op": 1, "d": 999})).await;
        client.expect_op(11).await;
        let totals = sim.stats().totals;
        assert_eq!(totals.heartbeats_with_unsent_seq, 1);
        client.heartbeat().await;
        client.expect_op(11).await;
        assert_eq!(sim.stats().totals.heartbeats_with_unsent_seq, 1);

        // No `v`: served (as v10) and counted.
        assert_eq!(sim.stats().totals.connections_without_version, 0);
        let mut bare = Client::connect(&sim, "/?encoding=json").await;
        bare.expect_hello().await;
        bare.identify_ready(DMS).await;
        assert_eq!(sim.stats().totals.connections_without_version, 1);

        // REST without a User-Agent: served, counted.
        let mut conn = Http::connect(&sim).await;
        conn.send_raw(
            format!(
                "GET /api/v10/users/@me HTTP/1.1\r\nAuthorization: Bot {DEFAULT_SIM_TOKEN}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await;
        let reply = conn.read_reply().await;
        assert_eq!(reply.status, 200);
        let me: Value = reply.json();
        assert_eq!(me["id"], sim.config().bot_id.to_string());
        assert_eq!(sim.stats().totals.rest_without_user_agent, 1);
        let with_agent = conn.request("GET", "/api/v10/users/@me", true, None).await;
        assert_eq!(with_agent.status, 200);
        assert_eq!(sim.stats().totals.rest_without_user_agent, 1);
    })
}
