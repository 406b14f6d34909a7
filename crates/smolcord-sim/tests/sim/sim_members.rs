//! op 8 Request Guild Members is answered as Discord answers it:
//! GUILD_MEMBERS_CHUNK dispatches of at most 1000 members, `chunk_index` /
//! `chunk_count`, the nonce echoed, `not_found` for unknown user ids,
//! `query` + `limit`, presences only when asked for and allowed; a repeat
//! of an all-members request within the window gets RATE_LIMITED; the whole
//! list without GUILD_MEMBERS closes 4001.

use crate::support;

use serde_json::{json, Value};
use smolcord::protocol::Intents;
use smolcord_sim::{SimConfig, Simulator};
use std::time::Duration;
use support::sim_client::*;

const GUILDS: u64 = 1;
const MEMBERS: u64 = 1 << 1;
const PRESENCES: u64 = 1 << 8;

fn big_guild(window: Duration) -> Simulator {
    sim_with(SimConfig {
        guild_members: 2500,
        all_members_window: window,
        enabled_privileged_intents: Intents::GUILD_MEMBERS.union(Intents::GUILD_PRESENCES),
        ..SimConfig::default()
    })
}

async fn identified(sim: &Simulator, intents: u64) -> Client {
    let (mut client, _) = Client::hello(sim).await;
    client.identify_ready(intents).await;
    if intents & GUILDS != 0 {
        assert_eq!(client.expect_dispatch().await["t"], "GUILD_CREATE");
    }
    client
}

/// The next dispatch named `t`, skipping nothing else.
async fn expect(client: &mut Client, t: &str) -> Value {
    let frame = client.expect_dispatch().await;
    assert_eq!(frame["t"], t, "{frame}");
    frame["d"].clone()
}

fn members(chunk: &Value) -> Vec<String> {
    chunk["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m["user"]["id"].as_str().expect("a user id").to_owned())
        .collect()
}

#[test]
fn all_members_come_in_chunks_of_a_thousand_then_rate_limited() {
    run(async {
        let sim = big_guild(Duration::from_secs(30));
        let guild = sim.config().guilds[0].id.to_string();
        let mut client = identified(&sim, GUILDS | MEMBERS).await;
        client
            .send(
                json!({"op": 8, "d": {"guild_id": guild, "query": "", "limit": 0,
                                        "presences": true, "nonce": "all-1"}}),
            )
            .await;
        let mut seen = Vec::new();
        for index in 0..3 {
            let chunk = expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
            assert_eq!(chunk["guild_id"], guild);
            assert_eq!(chunk["chunk_index"], index);
            assert_eq!(chunk["chunk_count"], 3);
            assert_eq!(chunk["nonce"], "all-1");
            assert!(
                chunk.get("presences").is_none(),
                "no GUILD_PRESENCES intent, no presences"
            );
            assert!(chunk.get("not_found").is_none());
            seen.extend(members(&chunk));
        }
        assert_eq!(seen.len(), 2502, "the bot, the owner and 2500 more");
        assert!(seen.contains(&sim.config().bot_id.to_string()));

        // Again within 30 s: RATE_LIMITED, no chunks.
        client
            .send(json!({"op": 8, "d": {"guild_id": guild, "query": "", "limit": 0, "nonce": "all-2"}}))
            .await;
        let limited = expect(&mut client, "RATE_LIMITED").await;
        assert_eq!(limited["opcode"], 8);
        let retry_after = limited["retry_after"].as_f64().expect("seconds");
        assert!(retry_after > 0.0 && retry_after <= 30.0, "{retry_after}");
        assert_eq!(limited["meta"]["guild_id"], guild);
        assert_eq!(limited["meta"]["nonce"], "all-2");
        // Not only for this session: per guild per bot.
        let mut other = identified(&sim, GUILDS | MEMBERS).await;
        other
            .send(json!({"op": 8, "d": {"guild_id": guild, "query": "", "limit": 0}}))
            .await;
        expect(&mut other, "RATE_LIMITED").await;
    })
}

#[test]
fn the_window_passes_and_user_ids_and_queries_need_no_window() {
    run(async {
        let window = Duration::from_millis(300);
        let sim = big_guild(window);
        let guild = sim.config().guilds[0].id.to_string();
        let bot = sim.config().bot_id.to_string();
        let mut client = identified(&sim, GUILDS | MEMBERS | PRESENCES).await;
        let all = json!({"op": 8, "d": {"guild_id": guild, "query": "", "limit": 0}});
        client.send(all.clone()).await;
        for _ in 0..3 {
            expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
        }
        async_io::Timer::after(window + Duration::from_millis(200)).await;
        client.send(all).await;
        let chunk = expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
        assert_eq!(chunk["chunk_count"], 3);
        for _ in 1..3 {
            expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
        }

        // By id: the unknown one is `not_found`; the nonce echoed.
        client
            .send(json!({"op": 8, "d": {"guild_id": guild, "user_ids": [bot, "123"], "nonce": "ids"}}))
            .await;
        let chunk = expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
        assert_eq!(members(&chunk), vec![bot.clone()]);
        assert_eq!(chunk["not_found"], json!(["123"]));
        assert_eq!(chunk["nonce"], "ids");
        assert_eq!(
            (chunk["chunk_index"].as_u64(), chunk["chunk_count"].as_u64()),
            (Some(0), Some(1))
        );

        // A prefix with a limit; presences asked for and allowed.
        client
            .send(json!({"op": 8, "d": {"guild_id": guild, "query": "MEMBER-0", "limit": 5, "presences": true}}))
            .await;
        let chunk = expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
        let names: Vec<&str> = chunk["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["user"]["username"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "member-00001",
                "member-00002",
                "member-00003",
                "member-00004",
                "member-00005"
            ]
        );
        assert_eq!(chunk["presences"].as_array().map(Vec::len), Some(5));
        assert!(chunk.get("nonce").is_none());
    })
}

#[test]
fn the_whole_list_without_guild_members_closes_4001() {
    run(async {
        let sim = big_guild(Duration::from_secs(30));
        let guild = sim.config().guilds[0].id.to_string();
        let mut client = identified(&sim, GUILDS).await;
        // A prefix is fine without the intent...
        client
            .send(json!({"op": 8, "d": {"guild_id": guild, "query": "own", "limit": 1}}))
            .await;
        let chunk = expect(&mut client, "GUILD_MEMBERS_CHUNK").await;
        assert_eq!(chunk["members"][0]["user"]["username"], "owner");
        // ...the whole list is not.
        client
            .send(json!({"op": 8, "d": {"guild_id": guild, "query": "", "limit": 0}}))
            .await;
        assert_eq!(client.expect_close().await, Some(4001));
    })
}
