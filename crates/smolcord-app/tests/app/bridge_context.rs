//! The conversation around a message (issue 31): a reply gives the agent
//! the message it answers (author, text), a reply to the bot's message is
//! taken without a mention, and a channel's `context_messages` window
//! gives the agent the messages before it, oldest first, from one history
//! read.

use crate::support;

use serde_json::Value;
use smolcord::protocol::{Intents, Snowflake};
use smolcord_app::config::ChannelConfig;
use smolcord_sim::{ChannelPost, SimConfig, SimGuild};
use std::path::Path;
use std::time::Duration;
use support::bridge::*;
use support::wait::wait_until;

const T: Duration = Duration::from_secs(20);

fn general() -> Snowflake {
    SimGuild::example().channels[0].id
}

fn tasks(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn nth_task(log: &Path, n: usize) -> Value {
    wait_until(&format!("task {n} given to the agent"), T, || {
        tasks(log).get(n - 1).cloned()
    })
    .await
}

#[test]
fn a_reply_to_the_bot_carries_the_message_it_answers() {
    let rig = Rig::new();
    let log = rig.path("tasks.log");
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh(&format!(
            "cat >> '{}'; echo >> '{}'; echo 'it is noon'",
            log.display(),
            log.display()
        )));
        config.channels = vec![ChannelConfig::new(general())];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        rig.sim
            .post_in_channel(
                &ChannelPost::new(general(), ALICE, "alice", "what time?").mentioning(),
            )
            .unwrap();
        let answer = rig.message_containing(general(), "it is noon", T).await;
        // A reply to the bot's answer, no `@bot` typed: the reply pings the
        // bot (Discord's default), which is what carries its text to an
        // app without MESSAGE_CONTENT.
        let follow_up =
            ChannelPost::new(general(), ALICE, "alice", "and tomorrow?").replying_to(answer.id);
        let asked = rig.sim.post_in_channel(&follow_up).unwrap();
        let task = nth_task(&log, 2).await;
        assert_eq!(task["message_id"], asked.to_string());
        assert_eq!(task["text"], "and tomorrow?");
        let replied = &task["replied_to"];
        assert_eq!(replied["id"], answer.id.to_string());
        assert_eq!(replied["content"], "it is noon");
        assert_eq!(replied["by_bot"], true);
        assert!(task.get("context").is_none(), "no window by default");
        bridge.stop().await;
    });
}

#[test]
fn a_window_of_five_gives_the_five_before_oldest_first() {
    // The application has MESSAGE_CONTENT: the history carries the text
    // of messages that do not mention the bot.
    let rig = Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_millis(500),
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        ..SimConfig::default()
    });
    let log = rig.path("tasks.log");
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&log));
        config.intents |= Intents::MESSAGE_CONTENT.bits();
        config.channels = vec![ChannelConfig {
            context_messages: 5,
            ..ChannelConfig::new(general())
        }];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let before: Vec<Snowflake> = (1..=7)
            .map(|n| {
                rig.sim
                    .post_in_channel(&ChannelPost::new(
                        general(),
                        BOB,
                        "bob",
                        &format!("line {n}"),
                    ))
                    .unwrap()
            })
            .collect();
        rig.sim
            .post_in_channel(&ChannelPost::new(general(), ALICE, "alice", "sum it up").mentioning())
            .unwrap();
        let task = nth_task(&log, 1).await;
        let context = task["context"].as_array().expect("a context window");
        let ids: Vec<&str> = context.iter().map(|m| m["id"].as_str().unwrap()).collect();
        let expected: Vec<String> = before[2..].iter().map(|id| id.to_string()).collect();
        assert_eq!(ids, expected, "the five before, oldest first");
        let texts: Vec<&str> = context
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["line 3", "line 4", "line 5", "line 6", "line 7"]);
        assert_eq!(context[0]["author"]["id"], BOB.to_string());
        let reads = rig
            .sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(&format!("{}/messages", general())))
            // Not the session's read-back of the channel (`after=`).
            .filter(|r| r.query.contains("before="))
            .count();
        assert_eq!(reads, 1, "one history read");
        bridge.stop().await;
    });
}
