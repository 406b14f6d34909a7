//! End-to-end: what makes a reply go out exactly once across a crash. Each
//! test sets up what a crash leaves on disk (an outbox record, a part
//! already posted, a saved session) and checks what the next start sends.
//! Where the record alone must carry it, the simulator forgets nonces at
//! once (`nonce_window` zero), as Discord does after a few minutes.
//! The on-disk shapes used here are the outbox's (crates/smolcord-app/src/bridge/store/outbox.rs).
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use serde_json::json;
use smolcord::protocol::Snowflake;
use smolcord::rest::{MessageDraft, Nonce};
use smolcord_app::bridge::OUTBOX_DIR;
use smolcord_sim::{SimConfig, SimEvent};
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(10);

/// A message id no simulator gave (a reply on record for a message that
/// will not come back: its session is gone).
const GONE_MESSAGE: u64 = 1_300_000_000_000_000_001;

fn forgetful_sim() -> Rig {
    Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_millis(500),
        nonce_window: Duration::ZERO,
        ..SimConfig::default()
    })
}

/// `outbox/reply-CHANNEL-MESSAGE.json` as the bridge writes it before a
/// reply's first part goes out; `sent` lists the parts already posted.
fn record_reply(rig: &Rig, channel: Snowflake, message: Snowflake, content: &str, sent: &[&str]) {
    std::fs::create_dir_all(rig.path(OUTBOX_DIR)).unwrap();
    let record = json!({
        "channel_id": channel.to_string(),
        "message_id": message.to_string(),
        "content": content,
        "sent": { "message_ids": sent },
    });
    rig.write_atomic(
        &format!("{OUTBOX_DIR}/reply-{channel}-{message}.json"),
        &record.to_string(),
    );
}

/// FNV-1a 64 of the fields, each followed by a zero byte (the outbox's
/// result fingerprint).
fn fingerprint(fields: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for field in fields {
        for &byte in field.as_bytes().iter().chain(&[0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// `outbox/result-HASH.json`: how far the result in `file` got.
fn record_result(rig: &Rig, file: &str, channel: Snowflake, content: &str, sent: &[&str]) {
    std::fs::create_dir_all(rig.path(OUTBOX_DIR)).unwrap();
    let channel = channel.to_string();
    let record = json!({
        "file": file,
        "fingerprint": fingerprint(&[file, &channel, content]),
        "sent": { "message_ids": sent },
    });
    rig.write_atomic(
        &format!("{OUTBOX_DIR}/result-{:016x}.json", fingerprint(&[file])),
        &record.to_string(),
    );
}

/// `n` lines too long to share a message: `n` parts, each starting "part K".
fn parts(n: usize) -> String {
    (0..n)
        .map(|k| format!("part {k} {}", "x".repeat(1900)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn starts(messages: &[smolcord_sim::BotMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.content.chars().take(6).collect())
        .collect()
}

async fn outbox_empty(rig: &Rig) {
    wait_until("the outbox emptied", T, || {
        rig.files(OUTBOX_DIR).is_empty().then_some(())
    })
    .await;
}

#[test]
fn a_recorded_reply_is_delivered_at_the_next_start_without_running_the_agent() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        // The session it came in is gone (no session.json): only the
        // record knows about it.
        let dm = rig.sim.dm_channel_of(ALICE);
        let message = Snowflake::new(GONE_MESSAGE);
        record_reply(&rig, dm, message, "the recorded reply", &[]);

        let bridge = rig.start(&ex, config, tunables()).await;
        rig.message_containing(dm, "the recorded reply", T).await;
        outbox_empty(&rig).await;
        let runtime = rig.json("runtime.json").unwrap();
        assert_eq!(runtime["processed"][dm.to_string()], message.to_string());
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        assert_eq!(line_count(&calls), 0, "the agent ran again");
        bridge.stop().await;
    });
}

#[test]
fn a_reply_goes_on_after_its_last_recorded_part_and_the_replayed_message_is_skipped() {
    let rig = forgetful_sim();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        let first = rig.start(&ex, config.clone(), tunables()).await;
        rig.session_ready(T).await;
        first.stop().await;

        // Written while the bridge was down: the resume replays it. Its
        // reply (two parts) is on record with the first part posted.
        let (message, dm) = rig.sim.send_dm(ALICE, "alice", "while down");
        record_reply(&rig, dm, message, &parts(2), &["1"]);

        let events = rig.sim.subscribe();
        let second = rig.start(&ex, config, tunables()).await;
        let resumed = smolcord_sim::next_matching(&events, T, |e| {
            matches!(e, SimEvent::Resumed { .. } | SimEvent::Identified { .. })
        })
        .await;
        assert!(
            matches!(resumed, Some(SimEvent::Resumed { replayed, .. }) if replayed >= 1),
            "{resumed:?}"
        );
        rig.message_containing(dm, "part 1", T).await;
        wait_until("the replay skipped", T, || {
            (second.counters.snapshot().replays_skipped >= 1).then_some(())
        })
        .await;
        outbox_empty(&rig).await;
        assert_eq!(starts(&rig.sim.messages_in(dm)), ["part 1"]);
        assert_eq!(line_count(&calls), 0, "the agent ran again");
        second.stop().await;
    });
}

#[test]
fn a_part_posted_just_before_a_crash_is_not_posted_again_within_the_nonce_window() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo unused"));
        let dm = rig.sim.dm_channel_of(ALICE);
        let message = Snowflake::new(GONE_MESSAGE);
        // The bridge posted the reply (under its nonce: the message id and
        // part 0), then died before it could record that.
        let nonce = Nonce::new(format!("r{message}.0")).unwrap();
        rig.rest()
            .create_message(dm, &MessageDraft::text("the reply").nonce(&nonce))
            .await
            .unwrap();
        record_reply(&rig, dm, message, "the reply", &[]);

        let bridge = rig.start(&ex, config, tunables()).await;
        outbox_empty(&rig).await;
        assert_eq!(rig.sim.messages_in(dm).len(), 1, "posted twice");
        assert_eq!(rig.sim.stats().totals.duplicates_prevented, 1);
        bridge.stop().await;
    });
}

#[test]
fn a_result_goes_on_after_its_last_recorded_part() {
    let rig = forgetful_sim();
    run(Duration::from_secs(30), |ex| async move {
        let channel = rig.sim.dm_channel_of(ALICE);
        std::fs::create_dir_all(rig.path("spool/results")).unwrap();
        let result = |content: &str| {
            json!({ "channel_id": channel.to_string(), "content": content }).to_string()
        };
        // Two of its three parts went out before the crash.
        let (half_done, other) = (parts(3), format!("other {}", parts(3)));
        record_result(&rig, "a.json", channel, &half_done, &["1", "2"]);
        rig.write_atomic("spool/results/a.json", &result(&half_done));
        // A record left by an earlier result under the same name is no
        // progress of this one: all of it goes out.
        record_result(&rig, "b.json", channel, &other, &["1", "2"]);
        rig.write_atomic("spool/results/b.json", &result(&parts(3)));

        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        wait_until("both results archived", T, || {
            (rig.files("spool/archive").len() == 2).then_some(())
        })
        .await;
        outbox_empty(&rig).await;
        let mut sent = starts(&rig.sim.messages_in(channel));
        sent.sort();
        assert_eq!(sent, ["part 0", "part 1", "part 2", "part 2"]);
        assert!(rig.files("spool/results").is_empty());
        bridge.stop().await;
    });
}

#[test]
fn the_processed_mark_is_on_disk_when_a_message_is_done() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo ok"));
        // Other runtime state waits this long: the mark must not.
        let mut tunables = tunables();
        tunables.runtime_debounce = Duration::from_secs(60);
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;
        let (message, dm) = rig.sim.send_dm(ALICE, "alice", "hi");
        rig.message_containing(dm, "ok", T).await;
        wait_until("the processed mark on disk", T, || {
            rig.json("runtime.json")
                .filter(|r| r["processed"][dm.to_string()] == message.to_string())
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn the_session_is_on_disk_at_ready_before_any_heartbeat() {
    // The first heartbeat (whose ACK saves the session too) comes after a
    // random part of the interval: with the longest the shard accepts,
    // within the few seconds of the test 1 time in 100 at most.
    let rig = Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_secs(300),
        ..SimConfig::default()
    });
    run(Duration::from_secs(30), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        let SimEvent::Identified { session_id, .. } = rig.session_ready(T).await else {
            panic!("expected a fresh identify");
        };
        wait_until("session.json with the new session", T, || {
            rig.json("session.json")
                .filter(|s| s["session"]["session_id"] == session_id.as_str())
        })
        .await;
        bridge.stop().await;
    });
}
