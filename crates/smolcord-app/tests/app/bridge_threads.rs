//! Thread mode (issue 31): in a channel with `"thread": true`, a mention
//! is answered in a thread started from the message, and the conversation
//! goes on there without mentions; a thread is started once per message,
//! also when a restart repeats the attempt (Discord's 160004).

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

#[test]
fn a_mention_is_answered_in_a_thread_where_the_conversation_goes_on() {
    // Thread mode reads messages without a mention: the application has
    // MESSAGE_CONTENT (the bridge asks for it itself).
    let rig = Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_millis(500),
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        ..SimConfig::default()
    });
    let log = rig.path("tasks.log");
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&log));
        config.channels = vec![ChannelConfig {
            thread: true,
            ..ChannelConfig::new(general())
        }];
        assert!(config.gateway_intents().contains(Intents::MESSAGE_CONTENT));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let asked = rig
            .sim
            .post_in_channel(
                &ChannelPost::new(general(), ALICE, "alice", "plan the trip").mentioning(),
            )
            .unwrap();
        // The thread's id is the message's.
        let thread = asked;
        let first = rig.message_containing(thread, "plan the trip", T).await;
        assert!(first
            .content
            .contains(&format!("\"thread_id\":\"{thread}\"")));
        assert!(
            rig.sim.messages_in(general()).is_empty(),
            "nothing in the channel itself"
        );
        let starts: Vec<_> = rig
            .sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/threads"))
            .collect();
        assert_eq!(starts.len(), 1);
        assert_eq!(
            starts[0].body["name"], "plan the trip",
            "named after its first line, the mention left out"
        );

        // In the thread, no mention needed.
        rig.sim
            .post_in_channel(&ChannelPost::new(thread, ALICE, "alice", "and the hotel?"))
            .unwrap();
        rig.message_containing(thread, "and the hotel?", T).await;
        let given = tasks(&log);
        assert_eq!(given.len(), 2);
        assert_eq!(given[1]["channel_id"], thread.to_string());
        assert!(
            given[1].get("thread_id").is_none(),
            "no thread from a thread"
        );
        // Elsewhere in the channel a mention is still needed.
        rig.sim
            .post_in_channel(&ChannelPost::new(general(), ALICE, "alice", "chatting"))
            .unwrap();
        rig.sim
            .post_in_channel(&ChannelPost::new(thread, BOB, "bob", "me too"))
            .unwrap();
        let counters = bridge.counters.clone();
        wait_until("the stranger's thread message refused", T, || {
            (counters.snapshot().channel_strangers == 1).then_some(())
        })
        .await;
        assert_eq!(tasks(&log).len(), 2);
        bridge.stop().await;
        let runtime = rig.json("runtime.json").unwrap();
        assert_eq!(
            runtime["threads"][thread.to_string()],
            general().to_string()
        );
    });
}

#[test]
fn a_thread_started_before_a_crash_is_answered_in_after_discords_160004() {
    let rig = Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_millis(500),
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        ..SimConfig::default()
    });
    let log = rig.path("tasks.log");
    run(Duration::from_secs(60), |ex| async move {
        let thread_mode = |agent: Vec<String>| {
            let mut config = rig.config();
            config.agent_cmd = Some(agent);
            config.channels = vec![ChannelConfig {
                thread: true,
                ..ChannelConfig::new(general())
            }];
            config
        };
        // The first run starts the thread, then stops before its agent
        // answers (it never does).
        let bridge = rig
            .start(&ex, thread_mode(sh("cat >/dev/null; sleep 30")), tunables())
            .await;
        rig.session_ready(T).await;
        let asked = rig
            .sim
            .post_in_channel(
                &ChannelPost::new(general(), ALICE, "alice", "plan the trip").mentioning(),
            )
            .unwrap();
        // Requests to start a thread, by the status class answered (2, 4).
        let started = |class: u16| {
            rig.sim
                .rest_requests()
                .into_iter()
                .filter(|r| r.path.ends_with("/threads") && r.status / 100 == class)
                .count()
        };
        wait_until("the thread started", T, || (started(2) == 1).then_some(())).await;
        bridge.stop().await;
        assert!(rig.sim.messages_in(asked).is_empty(), "not answered yet");

        // The next run takes the message again: Discord refuses a second
        // thread (160004), and the answer goes to the one there is.
        let bridge = rig
            .start(&ex, thread_mode(echo_agent(&log)), tunables())
            .await;
        let answer = rig.message_containing(asked, "plan the trip", T).await;
        assert!(answer
            .content
            .contains(&format!("\"thread_id\":\"{asked}\"")));
        assert_eq!(started(2), 1, "one thread");
        assert_eq!(started(4), 1, "the second start refused");
        assert!(
            rig.sim.messages_in(general()).is_empty(),
            "nothing in the channel"
        );
        assert_eq!(tasks(&log).len(), 1);
        bridge.stop().await;
        let runtime = rig.json("runtime.json").unwrap();
        assert_eq!(runtime["threads"][asked.to_string()], general().to_string());
    });
}
