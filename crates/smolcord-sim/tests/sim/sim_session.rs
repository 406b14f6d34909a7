//! Sessions: resume replays exactly what was missed, then RESUMED; unknown,
//! expired, ended or overflowed sessions get op 9 false; dispatches honour
//! intents and are buffered while the client is away.

use crate::support;

use serde_json::{json, Value};
use smolcord_sim::{SimConfig, SimEvent, Simulator};
use std::time::Duration;
use support::sim_client::*;

const GUILDS: u64 = 1;
const GUILD_MESSAGES: u64 = 1 << 9;
const DMS: u64 = 1 << 12;

/// Connects, identifies with `intents`, reads READY; returns the client and
/// the session id.
async fn session(sim: &Simulator, intents: u64) -> (Client, String) {
    let (mut client, _) = Client::hello(sim).await;
    let ready = client.identify_ready(intents).await;
    let id = ready["d"]["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    (client, id)
}

async fn resume_client(sim: &Simulator, session_id: &str, seq: u64) -> Client {
    let mut client = Client::connect(sim, "/resume?v=10&encoding=json").await;
    client.expect_hello().await;
    client.resume(session_id, seq).await;
    client
}

fn seq(frame: &Value) -> u64 {
    frame["s"].as_u64().expect("a sequence number")
}

#[test]
fn resume_replays_exactly_the_missed_dispatches_then_resumed() {
    run(async {
        let sim = sim();
        let (mut client, session_id) = session(&sim, DMS).await;
        for n in 0..3 {
            assert_eq!(sim.dispatch("TEST_EVENT", json!({"n": n})), [2 + n]);
        }
        // The client reads s=2 and s=3 only, then the link breaks.
        assert_eq!(seq(&client.expect_dispatch().await), 2);
        assert_eq!(seq(&client.expect_dispatch().await), 3);
        client.close(4000).await;
        sim.wait_for(WAIT, |e| {
            matches!(
                e,
                SimEvent::ClientClosed {
                    code: Some(4000),
                    ..
                }
            )
        })
        .await
        .expect("close seen");
        // While it is away, two more events: buffered, not lost.
        assert_eq!(sim.dispatch("TEST_EVENT", json!({"n": 3})), [5]);
        let (_, dm_channel) = sim.send_dm(42, "alice", "while you were away");
        let mut resumed = resume_client(&sim, &session_id, 3).await;
        let mut seen = Vec::new();
        loop {
            let frame = resumed.expect_dispatch().await;
            seen.push((seq(&frame), frame["t"].as_str().unwrap_or("").to_owned()));
            if frame["t"] == "RESUMED" {
                break;
            }
            if frame["t"] == "MESSAGE_CREATE" {
                assert_eq!(frame["d"]["content"], "while you were away");
                assert_eq!(frame["d"]["channel_id"], dm_channel.to_string());
            }
        }
        let expected: Vec<(u64, String)> = vec![
            (4, "TEST_EVENT".into()),
            (5, "TEST_EVENT".into()),
            (6, "MESSAGE_CREATE".into()),
            (7, "RESUMED".into()),
        ];
        assert_eq!(seen, expected);
        // Nothing more: the next frame answers this heartbeat.
        resumed.heartbeat().await;
        resumed.expect_op(11).await;
        // And new events continue the sequence.
        assert_eq!(sim.dispatch("AFTER", json!({})), [8]);
        assert_eq!(seq(&resumed.expect_dispatch().await), 8);

        let resumed_event = sim
            .wait_for(WAIT, |e| matches!(e, SimEvent::Resumed { .. }))
            .await
            .expect("Resumed event");
        let SimEvent::Resumed {
            seq,
            replayed,
            conn,
            ..
        } = resumed_event
        else {
            unreachable!()
        };
        assert_eq!((seq, replayed), (3, 3));
        let stats = sim.stats();
        let conn = stats.connection(conn).expect("resumed connection");
        assert_eq!(conn.path, "/resume");
        assert_eq!(conn.resumes, 1);
        assert_eq!(stats.totals.resumes, 1);
        assert_eq!(stats.totals.sessions_started, 1);
    });
}

#[test]
fn resume_with_the_latest_seq_replays_nothing() {
    run(async {
        let sim = sim();
        let (client, session_id) = session(&sim, DMS).await;
        client.drop_tcp();
        sim.wait_for(WAIT, |e| {
            matches!(e, SimEvent::ClientClosed { code: None, .. })
        })
        .await
        .expect("drop seen");
        let mut resumed = resume_client(&sim, &session_id, 1).await;
        let frame = resumed.expect_dispatch().await;
        assert_eq!((frame["t"].as_str(), seq(&frame)), (Some("RESUMED"), 2));
    });
}

#[test]
fn unknown_session_gets_op9_false_and_may_identify_on_the_same_connection() {
    run(async {
        let sim = sim();
        let mut client = resume_client(&sim, "no-such-session", 5).await;
        assert_eq!(client.expect_op(9).await["d"], false);
        client.identify_ready(DMS).await;
        assert_eq!(sim.stats().totals.invalid_sessions, 1);
    });
}

#[test]
fn seq_ahead_of_the_session_is_4007_and_ends_it() {
    run(async {
        let sim = sim();
        let (client, session_id) = session(&sim, DMS).await;
        client.close(4000).await;
        let mut ahead = resume_client(&sim, &session_id, 99).await;
        assert_eq!(ahead.expect_close().await, Some(4007));
        let mut again = resume_client(&sim, &session_id, 1).await;
        assert_eq!(again.expect_op(9).await["d"], false);
    });
}

#[test]
fn expired_session_gets_op9_false() {
    run(async {
        let sim = sim_with(SimConfig {
            resume_window: Duration::from_millis(150),
            ..SimConfig::default()
        });
        let (client, session_id) = session(&sim, DMS).await;
        client.close(4000).await;
        // Resume windows are time-based: let this one pass.
        async_io::Timer::after(Duration::from_millis(300)).await;
        let mut late = resume_client(&sim, &session_id, 1).await;
        assert_eq!(late.expect_op(9).await["d"], false);
    });
}

#[test]
fn client_close_1000_ends_the_session() {
    run(async {
        let sim = sim();
        let (client, session_id) = session(&sim, DMS).await;
        client.close(1000).await;
        sim.wait_for(WAIT, |e| {
            matches!(
                e,
                SimEvent::ClientClosed {
                    code: Some(1000),
                    ..
                }
            )
        })
        .await
        .expect("close seen");
        let mut again = resume_client(&sim, &session_id, 1).await;
        assert_eq!(again.expect_op(9).await["d"], false);
        let stats = sim.stats();
        assert_eq!(stats.connections[0].client_close_code, Some(1000));
        assert_eq!(
            stats.connections[0].ended,
            Some(smolcord_sim::ConnEnd::ClientClose)
        );
    });
}

#[test]
fn replay_buffer_overflow_gets_op9_false() {
    run(async {
        let sim = sim_with(SimConfig {
            replay_capacity: 3,
            ..SimConfig::default()
        });
        let (client, session_id) = session(&sim, DMS).await;
        client.close(4000).await;
        for n in 0..5 {
            sim.dispatch("FILLER", json!({"n": n}));
        }
        let mut resumed = resume_client(&sim, &session_id, 1).await;
        assert_eq!(resumed.expect_op(9).await["d"], false);
    });
}

#[test]
fn a_resume_supersedes_a_connection_still_open() {
    run(async {
        let sim = sim();
        let (mut old, session_id) = session(&sim, DMS).await;
        let mut resumed = resume_client(&sim, &session_id, 1).await;
        assert_eq!(resumed.expect_dispatch().await["t"], "RESUMED");
        assert!(matches!(old.next().await, Seen::Dropped));
        // Events now go to the new connection only.
        assert_eq!(sim.dispatch("AFTER", json!({})), [3]);
        assert_eq!(seq(&resumed.expect_dispatch().await), 3);
    });
}

#[test]
fn dispatches_follow_intents_and_message_content() {
    run(async {
        let sim = sim();
        let (mut dms, _) = session(&sim, DMS).await;
        let (mut guild, _) = session(&sim, GUILDS | GUILD_MESSAGES).await;
        assert_eq!(guild.expect_dispatch().await["t"], "GUILD_CREATE");
        // A DM reaches only the DIRECT_MESSAGES session.
        let (message_id, _) = sim.send_dm(7, "bob", "hello bot");
        let dm = dms.expect_dispatch().await;
        assert_eq!(dm["d"]["id"], message_id.to_string());
        assert_eq!(dm["d"]["content"], "hello bot");
        assert!(dm["d"].get("guild_id").is_none());
        // A guild message reaches only the GUILD_MESSAGES session, without
        // content (no MESSAGE_CONTENT intent).
        let channel = sim.config().guilds[0].channels[0].id;
        let seqs_before = sim.events().len();
        sim.send_guild_message(channel, 7, "bob", "secret")
            .expect("known channel");
        let message = guild.expect_dispatch().await;
        assert_eq!(message["t"], "MESSAGE_CREATE");
        assert_eq!(message["d"]["content"], "");
        assert!(message["d"]["guild_id"].is_string());
        let dispatched = sim.events()[seqs_before..]
            .iter()
            .filter(|e| matches!(e, SimEvent::Dispatched { .. }))
            .count();
        assert_eq!(dispatched, 1);
        // Unknown channels are refused with their id.
        let err = sim
            .send_guild_message(smolcord::protocol::Snowflake::new(5), 7, "bob", "x")
            .unwrap_err();
        assert_eq!(
            err,
            smolcord_sim::SimError::UnknownChannel(smolcord::protocol::Snowflake::new(5))
        );
        assert!(err.to_string().contains('5'), "{err}");
        // Both sessions get an event no intent governs, each with its own seq.
        let seqs = sim.dispatch("SOME_FUTURE_EVENT", json!({}));
        assert_eq!(seqs, [3, 4]);
        assert_eq!(seq(&dms.expect_dispatch().await), 3);
        assert_eq!(seq(&guild.expect_dispatch().await), 4);
    });
}

#[test]
fn guild_and_channel_events_keep_the_directory() {
    run(async {
        let sim = sim();
        let (mut client, _) = session(&sim, GUILDS).await;
        let guild_id = sim.config().guilds[0].id;
        assert_eq!(client.expect_dispatch().await["t"], "GUILD_CREATE");
        let channel = sim
            .create_channel(guild_id, "voice-notes")
            .expect("known guild");
        let created = client.expect_dispatch().await;
        assert_eq!(created["t"], "CHANNEL_CREATE");
        assert_eq!(created["d"]["id"], channel.to_string());
        assert_eq!(created["d"]["guild_id"], guild_id.to_string());
        assert_eq!(sim.update_channel(channel, "notes").expect("known"), [4]);
        let updated = client.expect_dispatch().await;
        assert_eq!(
            (updated["t"].as_str(), updated["d"]["name"].as_str()),
            (Some("CHANNEL_UPDATE"), Some("notes"))
        );
        sim.delete_channel(channel).expect("known");
        assert_eq!(client.expect_dispatch().await["t"], "CHANNEL_DELETE");
        assert!(sim.delete_channel(channel).is_err());
        let mut guild = smolcord_sim::SimGuild::example();
        guild.id = smolcord::protocol::Snowflake::new(1_300_000_000_000_000_900);
        guild.name = "second".into();
        assert_eq!(sim.add_guild(guild).len(), 1);
        let created = client.expect_dispatch().await;
        assert_eq!(
            (created["t"].as_str(), created["d"]["name"].as_str()),
            (Some("GUILD_CREATE"), Some("second"))
        );
    });
}

#[test]
fn shards_route_guild_events_and_dms_go_to_shard_zero() {
    run(async {
        let sim = sim_with(SimConfig {
            required_shards: Some(2),
            ..SimConfig::default()
        });
        let guild_id = sim.config().guilds[0].id;
        let home = smolcord::protocol::shard_for_guild(guild_id, 2);
        let mut shards = Vec::new();
        for shard in 0..2u32 {
            let (mut client, _) = Client::hello(&sim).await;
            client
                .identify_with(json!({"token": smolcord_sim::DEFAULT_SIM_TOKEN,
                    "intents": GUILDS | DMS, "shard": [shard, 2]}))
                .await;
            let ready = client.expect_dispatch().await;
            let guilds = ready["d"]["guilds"].as_array().map_or(0, Vec::len);
            assert_eq!(guilds, usize::from(shard == home), "shard {shard}");
            if shard == home {
                assert_eq!(client.expect_dispatch().await["t"], "GUILD_CREATE");
            }
            shards.push(client);
        }
        let (_, _) = sim.send_dm(9, "carol", "dm");
        let dm = shards[0].expect_dispatch().await;
        assert_eq!(dm["t"], "MESSAGE_CREATE");
        let channel = sim.create_channel(guild_id, "x").expect("guild");
        let created = shards[home as usize].expect_dispatch().await;
        assert_eq!(created["d"]["id"], channel.to_string());
    });
}
