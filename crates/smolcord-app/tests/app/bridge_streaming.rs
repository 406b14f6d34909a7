//! The answer as it forms (`stream_replies`, opt-in): an agent that prints
//! as it thinks shows its output so far in the "working…" placeholder,
//! which the reply then replaces; an agent that dies leaves the failure
//! notice there, not its half-sentence; without the setting, no preview.
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord::protocol::Snowflake;
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(15);

fn fast() -> smolcord_app::bridge::Tunables {
    smolcord_app::bridge::Tunables {
        placeholder_after: Some(Duration::from_millis(100)),
        stream_interval: Duration::from_millis(200),
        ..tunables()
    }
}

/// The contents the bot's edits of messages in `channel` set, in order.
fn edits(rig: &Rig, channel: Snowflake) -> Vec<String> {
    let prefix = format!("/api/v10/channels/{channel}/messages/");
    rig.sim
        .rest_requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.starts_with(&prefix))
        .filter_map(|r| r.body["content"].as_str().map(str::to_owned))
        .collect()
}

/// An agent that prints `first`, thinks for a while, then `rest` (and
/// exits with `code`).
fn thinking_agent(first: &str, rest: &str, code: i32) -> Vec<String> {
    sh(&format!(
        "cat >/dev/null; printf '{first}'; sleep 2; printf '{rest}'; exit {code}"
    ))
}

#[test]
fn the_placeholder_shows_the_answer_as_it_forms_then_the_reply() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.stream_replies = true;
        config.agent_cmd = Some(thinking_agent("first thoughts", " and the answer", 0));
        let bridge = rig.start(&ex, config, fast()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "think aloud");
        let reply = rig
            .message_containing(dm, "first thoughts and the answer", T)
            .await;
        let edits = edits(&rig, dm);
        let preview = edits
            .iter()
            .position(|text| text == "working…\nfirst thoughts")
            .unwrap_or_else(|| panic!("no preview among {edits:?}"));
        // The reply replaced the placeholder, after the preview.
        assert_eq!(edits.last().unwrap(), "first thoughts and the answer");
        assert!(preview < edits.len() - 1);
        assert_eq!(
            rig.sim.messages_in(dm).len(),
            1,
            "one message: the placeholder became the reply"
        );
        assert_eq!(reply.content, "first thoughts and the answer");
        bridge.stop().await;
    });
}

#[test]
fn an_agent_that_dies_leaves_the_failure_notice_not_its_half_sentence() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.stream_replies = true;
        config.agent_cmd = Some(thinking_agent("half a sent", "", 3));
        let bridge = rig.start(&ex, config, fast()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "think aloud");
        wait_until("a preview of the half-sentence", T, || {
            edits(&rig, dm)
                .iter()
                .any(|t| t.contains("half a sent"))
                .then_some(())
        })
        .await;
        wait_until("the placeholder replaced", T, || {
            let shown = rig.sim.messages_in(dm);
            shown
                .iter()
                .all(|m| !m.content.contains("half a sent") && !m.content.starts_with("working…"))
                .then_some(shown)
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn without_the_setting_the_placeholder_shows_no_preview() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(thinking_agent("first thoughts", " and the answer", 0));
        let bridge = rig.start(&ex, config, fast()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "think aloud");
        rig.message_containing(dm, "first thoughts and the answer", T)
            .await;
        assert_eq!(edits(&rig, dm), ["first thoughts and the answer"]);
        bridge.stop().await;
    });
}
