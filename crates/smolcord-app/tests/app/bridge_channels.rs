//! Server channels behind a mention (issue 31): in a channel named in
//! `channels`, an allowed user's message that mentions the bot becomes a
//! task like a DM (with the channel and guild in it) and is answered
//! there; without the mention nothing happens; a stranger's mention gets
//! nothing posted (no pairing code in public) and is counted; a channel
//! that refuses the bot (403), or is deleted while an answer forms (404),
//! is reported to the owner once.

use crate::support;

use smolcord::protocol::Snowflake;
use smolcord_app::config::ChannelConfig;
use smolcord_sim::{ChannelPost, SimGuild};
use std::time::Duration;
use support::bridge::*;
use support::wait::wait_until;

const T: Duration = Duration::from_secs(20);

fn general() -> Snowflake {
    SimGuild::example().channels[0].id
}

fn mention(author: u64, text: &str) -> ChannelPost {
    ChannelPost::new(general(), author, "someone", text).mentioning()
}

#[test]
fn a_mention_from_an_allowed_user_is_answered_in_the_channel() {
    let rig = Rig::new();
    let log = rig.path("tasks.log");
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&log));
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;

        // Not mentioned: skipped. Then mentioned: answered. One channel is
        // handled in order, so the answer to the second means the first
        // was seen and left.
        rig.sim
            .post_in_channel(&ChannelPost::new(
                general(),
                ALICE,
                "alice",
                "just chatting",
            ))
            .unwrap();
        let asked = rig
            .sim
            .post_in_channel(&mention(ALICE, "what time is it?"))
            .unwrap();
        let answer = rig
            .message_containing(general(), "what time is it?", T)
            .await;
        let task: serde_json::Value =
            serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
        assert_eq!(task["message_id"], asked.to_string());
        assert_eq!(task["channel_id"], general().to_string());
        assert_eq!(task["guild_id"], SimGuild::example().id.to_string());
        assert_eq!(
            task["text"], "what time is it?",
            "the mention is not part of the text"
        );
        assert!(answer.content.contains("\"guild_id\""));
        // A Discord reply to the message, its author not pinged again.
        assert_eq!(answer.object["type"], 19);
        assert_eq!(
            answer.object["message_reference"]["message_id"],
            asked.to_string()
        );
        assert_eq!(answer.object["referenced_message"]["id"], asked.to_string());
        let post = rig
            .sim
            .rest_requests()
            .into_iter()
            .find(|r| r.method == "POST" && r.path.ends_with(&format!("{}/messages", general())))
            .unwrap();
        assert_eq!(post.body["allowed_mentions"]["replied_user"], false);
        assert_eq!(
            line_count(&log),
            1,
            "the message without a mention made no task"
        );
        assert_eq!(rig.sim.messages_in(general()).len(), 1);
        let counters = bridge.counters.snapshot();
        assert_eq!(counters.guild_messages_skipped, 1);
        assert_eq!(counters.messages_handled, 1);
        bridge.stop().await;
    });
}

#[test]
fn a_strangers_mention_gets_nothing_posted_and_is_counted() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo answered"));
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        rig.sim
            .post_in_channel(&mention(STRANGER, "hello bot"))
            .unwrap();
        rig.sim
            .post_in_channel(&mention(ALICE, "hello bot"))
            .unwrap();
        rig.message_containing(general(), "answered", T).await;
        assert_eq!(
            rig.sim.messages_in(general()).len(),
            1,
            "no pairing code or anything else for the stranger"
        );
        let stranger_dm = rig.sim.dm_channel_of(STRANGER);
        assert!(rig.sim.messages_in(stranger_dm).is_empty());
        let counters = bridge.counters.snapshot();
        assert_eq!(counters.channel_strangers, 1);
        assert_eq!(counters.pairing_codes_issued, 0);
        bridge.stop().await;
    });
}

#[test]
fn a_users_list_decides_who_is_answered_in_that_channel() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo answered"));
        config.channels = vec![ChannelConfig {
            users: Some(vec![Snowflake::new(BOB)]),
            ..ChannelConfig::new(general())
        }];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        // ALICE is allowed in DMs, not in this channel; BOB only here.
        rig.sim.post_in_channel(&mention(ALICE, "hi")).unwrap();
        rig.sim.post_in_channel(&mention(BOB, "hi")).unwrap();
        rig.sim.post_in_channel(&mention(OWNER, "hi")).unwrap();
        rig.messages(general(), 2, T).await;
        assert_eq!(bridge.counters.snapshot().channel_strangers, 1);
        bridge.stop().await;
        assert_eq!(rig.sim.messages_in(general()).len(), 2);
    });
}

#[test]
fn a_channel_that_refuses_the_bot_is_reported_to_the_owner_once() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo answered"));
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        // The bot lacks Send Messages there: 403 50013, as on Discord.
        rig.sim.set_send_permission(general(), false).unwrap();
        rig.sim.post_in_channel(&mention(ALICE, "one")).unwrap();
        rig.sim.post_in_channel(&mention(ALICE, "two")).unwrap();
        let counters = bridge.counters.clone();
        wait_until("two refusals", T, || {
            (counters.snapshot().channel_refusals == 2).then_some(())
        })
        .await;
        let owner_dm = rig.sim.dm_channel_of(OWNER);
        let told = rig
            .message_containing(owner_dm, "cannot answer in", T)
            .await;
        assert!(
            told.content.contains(&format!("<#{}>", general())),
            "{}",
            told.content
        );
        // Then the channel works again: answered, and the owner is not
        // told twice.
        rig.sim.set_send_permission(general(), true).unwrap();
        rig.sim.post_in_channel(&mention(ALICE, "three")).unwrap();
        rig.message_containing(general(), "answered", T).await;
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        assert_eq!(rig.sim.messages_in(owner_dm).len(), 1, "told once");
        assert!(journal.iter().any(|e| e.status == Some(403)), "{journal:?}");
    });
}

/// With GUILD_MESSAGES every message of every visible channel arrives: one
/// the bridge does not want is dropped from a peek at its channel and
/// mentions, before the full decode (here a payload the full decode would
/// refuse: it is never tried, so nothing is reported).
#[test]
fn an_unwanted_guild_message_is_skipped_before_its_full_decode() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo answered"));
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let guild = SimGuild::example();
        let other = guild.channels[1].id;
        // No author name, no content: not a whole message object.
        rig.sim.dispatch(
            "MESSAGE_CREATE",
            serde_json::json!({"id": "1577000000000000001", "channel_id": other.to_string(),
                               "guild_id": guild.id.to_string(), "author": {"id": "5"}}),
        );
        rig.sim
            .post_in_channel(&mention(ALICE, "still here?"))
            .unwrap();
        rig.message_containing(general(), "answered", T).await;
        assert_eq!(bridge.counters.snapshot().guild_messages_skipped, 1);
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        assert!(
            !journal.iter().any(|e| e.place == "MESSAGE_CREATE"),
            "{journal:?}"
        );
    });
}

#[test]
fn a_channel_deleted_while_its_answer_forms_is_reported_to_the_owner_once() {
    let rig = Rig::new();
    let started = rig.path("agent-started");
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh(&format!(
            "cat >/dev/null; touch '{}'; sleep 1; echo answered",
            started.display()
        )));
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        rig.sim.post_in_channel(&mention(ALICE, "one")).unwrap();
        wait_until("the agent running", T, || started.exists().then_some(())).await;
        // Deleted meanwhile: the answer gets Discord's 404 10003.
        rig.sim.delete_channel(general()).unwrap();
        let counters = bridge.counters.clone();
        wait_until("the refusal", T, || {
            (counters.snapshot().channel_refusals == 1).then_some(())
        })
        .await;
        let owner_dm = rig.sim.dm_channel_of(OWNER);
        let told = rig
            .message_containing(owner_dm, "cannot answer in", T)
            .await;
        assert!(
            told.content.contains(&format!("<#{}>", general()))
                && told.content.contains("the channel is gone"),
            "{}",
            told.content
        );
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        assert_eq!(rig.sim.messages_in(owner_dm).len(), 1, "told once");
        assert!(journal.iter().any(|e| e.status == Some(404)), "{journal:?}");
        // Not retried: one refused create (a 404 is no transient failure).
        let refused = rig
            .sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.ends_with(&format!("{}/messages", general())))
            .filter(|r| r.status == 404)
            .count();
        assert_eq!(refused, 1);
    });
}

#[test]
fn a_spooled_result_for_a_channel_task_is_a_reply_to_its_message() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        // No agent_cmd: tasks go to the spool.
        let mut config = rig.config();
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let asked = rig.sim.post_in_channel(&mention(ALICE, "when?")).unwrap();
        let task = rig.path(&format!("spool/tasks/{asked}.json"));
        wait_until("the spooled task", T, || task.exists().then_some(())).await;
        let result = serde_json::json!({"channel_id": general().to_string(), "content": "at noon"});
        rig.write_atomic(&format!("spool/results/{asked}.json"), &result.to_string());
        let reply = rig.message_containing(general(), "at noon", T).await;
        assert_eq!(
            reply.object["message_reference"]["message_id"],
            asked.to_string(),
            "{:?}",
            reply.object
        );
        // Nobody pinged, as the bridge's own replies.
        let create = rig
            .sim
            .rest_requests()
            .into_iter()
            .find(|r| r.method == "POST" && r.body["content"] == "at noon")
            .unwrap();
        assert_eq!(create.body["allowed_mentions"]["replied_user"], false);
        bridge.stop().await;
    });
}
