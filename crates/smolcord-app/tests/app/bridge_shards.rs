//! `smolcord run` with a range of shards: shards 0–3 of 4 in one process
//! answer the owner's DM (shard 0) and the owner's messages in a guild on
//! each of the four shards; `smolcord status --json` lists every shard;
//! SIGTERM saves each shard's session, and the next start resumes all four
//! (no fresh identify). A process without shard 0 says it bridges no DMs.
#![allow(clippy::disallowed_methods)] // files and child processes in a test

use crate::support;

use smolcord::protocol::{shard_for_guild, Intents, Snowflake};
use smolcord_sim::{SimChannel, SimConfig, SimEvent, SimGuild, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::time::Duration;
use support::binary::Smolcord;
use support::bridge::sh;
use support::wait::poll_until;

const BOUND: Duration = Duration::from_secs(30);
const OWNER: u64 = 77_000_000_000_000_001;

/// A guild whose events go to `shard` of 4, with one channel.
fn guild_on(shard: u64) -> SimGuild {
    let id = ((4_000 + shard) << 22) + 5;
    let guild = SimGuild {
        id: Snowflake::new(id),
        name: format!("guild of shard {shard}"),
        channels: vec![SimChannel {
            id: Snowflake::new(id + 1),
            name: "general".into(),
        }],
    };
    assert_eq!(u64::from(shard_for_guild(guild.id, 4)), shard);
    guild
}

fn start(sim: &Simulator, state: &Path, shards: &str) -> Smolcord {
    let intents = Intents::DIRECT_MESSAGES
        .union(Intents::GUILD_MESSAGES)
        .union(Intents::MESSAGE_CONTENT);
    let config = serde_json::json!({
        "owner_id": OWNER.to_string(),
        "intents": intents.bits(),
        "shards": serde_json::from_str::<serde_json::Value>(shards).unwrap(),
        "agent_cmd": sh("cat >/dev/null; echo pong"),
        // Answered in each guild's channel without a mention.
        "channels": (0..4)
            .map(|shard| serde_json::json!({"id": guild_on(shard).channels[0].id.to_string(), "mention": false}))
            .collect::<Vec<_>>(),
    });
    std::fs::write(state.join("config.json"), config.to_string()).unwrap();
    Smolcord::spawn(
        &["run"],
        [
            ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
            ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
            ("SMOLCORD_API_BASE", sim.api_base()),
            ("SMOLCORD_STATE_DIR", state.display().to_string()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
}

fn replied(sim: &Simulator, channel: Snowflake) -> bool {
    sim.messages_in(channel).iter().any(|m| m.content == "pong")
}

#[test]
fn a_process_on_shards_0_to_3_answers_dms_and_guild_messages_of_all_four() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        // One bucket per shard: all four identify at once.
        session_start_limit: smolcord_sim::SessionStartLimit {
            max_concurrency: 4,
            ..Default::default()
        },
        guilds: (0..4).map(guild_on).collect(),
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().unwrap();
    let mut bot = start(&sim, state.path(), "[0, 3, 4]");
    bot.wait_for_stderr("running shards 0..=3 of 4", BOUND);
    for _ in 0..4 {
        smol::block_on(sim.wait_for(BOUND, |e| matches!(e, SimEvent::Identified { .. })))
            .expect("four shards identify");
    }
    poll_until(BOUND, || {
        (sim.stats().totals.sessions_started == 4).then_some(())
    })
    .expect("four sessions");

    let (_, dm) = sim.send_dm(OWNER, "owner", "ping in a DM");
    let channels: Vec<Snowflake> = (0..4).map(|shard| guild_on(shard).channels[0].id).collect();
    for &channel in &channels {
        sim.send_guild_message(channel, OWNER, "owner", "ping in a guild")
            .expect("a guild message");
    }
    for channel in std::iter::once(dm).chain(channels.iter().copied()) {
        poll_until(BOUND, || replied(&sim, channel).then_some(()))
            .unwrap_or_else(|| panic!("no reply in {channel}:\n{}", bot.stderr()));
    }

    // Healthy once every shard has had a heartbeat ACK.
    let json = poll_until(BOUND, || {
        let mut status = Smolcord::spawn(
            &["status", "--json"],
            [("SMOLCORD_STATE_DIR", state.path().display().to_string())],
        );
        let healthy = status.wait(BOUND).success();
        let json: serde_json::Value = serde_json::from_str(status.stdout().trim()).ok()?;
        healthy.then_some(json)
    })
    .expect("smolcord status reports every shard healthy");
    let shards: Vec<u64> = json["shards"]
        .as_array()
        .expect("shards in the status")
        .iter()
        .map(|line| line["shard"][0].as_u64().unwrap())
        .collect();
    assert_eq!(shards, vec![0, 1, 2, 3], "{json}");

    bot.terminate();
    assert!(bot.wait(BOUND).success(), "{}", bot.stderr());
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.path().join("session.json")).unwrap())
            .unwrap();
    assert_eq!(saved["count"], 4, "{saved}");
    assert_eq!(saved["shards"].as_object().unwrap().len(), 4, "{saved}");

    // The next start resumes all four sessions: no fresh identify.
    let identifies = sim.stats().totals.identifies;
    let mut again = start(&sim, state.path(), "[0, 3, 4]");
    poll_until(BOUND, || (sim.stats().totals.resumes == 4).then_some(()))
        .unwrap_or_else(|| panic!("not every shard resumed:\n{}", again.stderr()));
    assert_eq!(sim.stats().totals.identifies, identifies);
    again.terminate();
    assert!(again.wait(BOUND).success(), "{}", again.stderr());
}

#[test]
fn a_process_without_shard_0_says_it_bridges_no_dms() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        guilds: (0..4).map(guild_on).collect(),
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().unwrap();
    let mut bot = start(&sim, state.path(), "[2, 3, 4]");
    bot.wait_for_stderr("but not shard 0", BOUND);
    bot.terminate();
    assert!(bot.wait(BOUND).success(), "{}", bot.stderr());
}

#[test]
fn a_shard_refused_for_good_stops_the_process_with_78_naming_the_shard() {
    // Discord wants 8 shards: every Identify with a count of 4 gets 4011.
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        required_shards: Some(8),
        session_start_limit: smolcord_sim::SessionStartLimit {
            max_concurrency: 4,
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().unwrap();
    let mut bot = start(&sim, state.path(), "[0, 3, 4]");
    let status = bot.wait(BOUND);
    let stderr = bot.stderr();
    assert_eq!(status.code(), Some(78), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("smolcord: ")
            && last.contains("sharding required (4011)")
            && last.contains(" on shard ")
            && last.contains(" of 4"),
        "{stderr}"
    );
}

#[test]
fn shards_auto_refuses_a_recommendation_past_the_caps_naming_gateway_bot() {
    // GET /gateway/bot recommending 100 000 shards: the start took 1.5 GiB
    // before it was refused; now nothing is sized by the figure first.
    let sim = Simulator::start(SimConfig {
        recommended_shards: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().unwrap();
    let mut bot = start(&sim, state.path(), "\"auto\"");
    let status = bot.wait(BOUND);
    let stderr = bot.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("GET /gateway/bot recommends 100000 shards")
            && stderr.contains("more than 65536"),
        "{stderr}"
    );
    assert_eq!(sim.stats().totals.identifies, 0);
}
