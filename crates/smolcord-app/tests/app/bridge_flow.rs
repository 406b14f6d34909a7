//! End-to-end: voice notes, the agent, delivery (split, 429, fallback), the
//! spool, and per-channel ordering, against the simulator.
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord::protocol::Snowflake;
use smolcord_sim::{RestFault, RestFaultKind};
use std::time::{Duration, Instant};
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(10);

fn task_text(reply: &str) -> String {
    let task: serde_json::Value =
        serde_json::from_str(reply.trim()).expect("the echo agent replies with the task");
    task["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn voice_note_is_transcribed_and_answered_by_the_agent() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        // The transcriber reports the size of the audio file it was given.
        config.transcribe_cmd = Some(sh("printf 'heard %s bytes' $(wc -c < \"$1\")"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let audio = b"OggS\0fake opus payload".to_vec();
        let note = rig
            .sim
            .send_voice_dm(ALICE, "alice", audio.clone(), Duration::from_secs(2));
        let reply = rig.message_containing(note.channel_id, "heard", T).await;
        assert_eq!(
            task_text(&reply.content),
            format!("heard {} bytes", audio.len())
        );
        let task: serde_json::Value = serde_json::from_str(reply.content.trim()).unwrap();
        assert_eq!(
            task["transcripts"][0]["text"],
            format!("heard {} bytes", audio.len())
        );
        assert_eq!(task["author"]["id"], ALICE.to_string());
        assert_eq!(task["channel_id"], note.channel_id.to_string());
        // The typing indicator ran while the agent worked.
        let typing = format!("/api/v10/channels/{}/typing", note.channel_id);
        assert!(rig.sim.rest_requests().iter().any(|r| r.path == typing));
        // The task's files (the downloaded voice note) are gone.
        let dir = rig.path(&format!("files/{}", note.message_id));
        wait_until("the task's files removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        let counters = bridge.counters.clone();
        // Stopping drains: the counters are final.
        bridge.stop().await;
        let counters = counters.snapshot();
        assert_eq!(counters.transcriptions, 1);
        assert_eq!(counters.replies_delivered, 1);
    });
}

#[test]
fn transcription_timeout_is_reported_and_blocks_no_other_channel() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        config.transcribe_cmd = Some(sh("sleep 5"));
        config.transcribe_timeout_s = 2;
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let started = Instant::now();
        let note = rig
            .sim
            .send_voice_dm(ALICE, "alice", b"OggS".to_vec(), Duration::from_secs(1));
        let (_, owner_dm) = rig.sim.send_dm(OWNER, "owner", "meanwhile");
        rig.message_containing(owner_dm, "meanwhile", T).await;
        let other_done = started.elapsed();
        let notice = rig
            .message_containing(note.channel_id, "could not transcribe", T)
            .await;
        let notice_at = started.elapsed();
        assert!(
            notice.content.contains("longer than 2 s"),
            "{}",
            notice.content
        );
        assert!(
            other_done < Duration::from_millis(1500) && other_done < notice_at,
            "the other channel waited for the transcription: {other_done:?}"
        );
        assert!(notice_at >= Duration::from_secs(2), "{notice_at:?}");
        // Nothing was handed to the agent for the failed voice note, and
        // its download is gone with it.
        assert_eq!(line_count(&calls), 1);
        let dir = rig.path(&format!("files/{}", note.message_id));
        wait_until("the voice note's download removed", T, || {
            (!dir.exists()).then_some(())
        })
        .await;
        let counters = bridge.counters.clone();
        // Stopping drains: the counters are final.
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        let counters = counters.snapshot();
        assert_eq!(counters.transcription_failures, 1);
        assert!(counters.failures >= 1);
        // Recorded for the operator, by type only.
        let entry = journal
            .iter()
            .find(|e| e.kind == "transcription")
            .unwrap_or_else(|| panic!("no transcription failure in {journal:?}"));
        assert_eq!(entry.message, "timed out after 2 s");
        let all = format!("{journal:?}");
        assert!(
            !all.contains("meanwhile") && !all.contains(&ALICE.to_string()),
            "{all}"
        );
    });
}

#[test]
fn a_5000_character_reply_is_split_into_three_messages_on_line_boundaries() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        // 100 lines of 49 digits: 5000 characters with the newlines.
        config.agent_cmd = Some(sh(
            "cat >/dev/null; i=0; while [ $i -lt 100 ]; do printf '%049d\\n' $i; i=$((i+1)); done",
        ));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "long please");
        let messages = rig.messages(dm, 3, T).await;
        let expected: String = (0..100).map(|i| format!("{i:049}\n")).collect();
        assert_eq!(expected.chars().count(), 5000);
        assert_eq!(messages.len(), 3, "{messages:?}");
        for m in &messages {
            assert!(m.content.chars().count() <= 2000);
            assert!(
                m.content.lines().all(|l| l.len() == 49),
                "cut inside a line"
            );
        }
        let joined: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(joined.join("\n"), expected.trim_end());
        bridge.stop().await;
    });
}

#[test]
fn a_429_is_honoured_before_the_reply_goes_out() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo pong"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        // The session's read-back reads this channel's history (same
        // path): the fault is for the reply.
        rig.history_read(dm, T).await;
        let path = format!("/api/v10/channels/{dm}/messages");
        rig.sim
            .rest_fault(RestFault::rate_limited(1, 0.6).on(&path));
        rig.sim.send_dm(ALICE, "alice", "ping");
        rig.message_containing(dm, "pong", T).await;
        let posts: Vec<_> = rig
            .sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == path)
            .collect();
        assert_eq!(posts.len(), 2, "{posts:?}");
        assert_eq!((posts[0].status, posts[1].status), (429, 200));
        let waited = posts[1].at_ms - posts[0].at_ms;
        assert!(waited >= 550.0, "retried after {waited} ms, asked 600");
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        bridge.stop().await;
    });
}

#[test]
fn failed_delivery_runs_the_dm_fallback_and_archives_the_outcome() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let fallback_log = rig.path("fallback.jsonl");
        let mut config = rig.config();
        config.dm_fallback_cmd = Some(sh(&format!(
            "{{ cat; echo; }} >> '{}'",
            fallback_log.display()
        )));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        // The session's read-back reads this channel's history (same
        // path): the faults are for the results.
        rig.history_read(dm, T).await;
        let path = format!("/api/v10/channels/{dm}/messages");

        // 403: permanent at once.
        rig.sim.rest_fault(RestFault {
            kind: RestFaultKind::Forbidden,
            count: 1,
            path_prefix: Some(path.clone()),
        });
        rig.write_atomic(
            "spool/results/r1.json",
            &format!(r#"{{"channel_id":"{dm}","content":"first result"}}"#),
        );
        let archived = wait_until("r1 archived", T, || rig.json("spool/archive/r1.json")).await;
        assert_eq!(archived["outcome"], "fallback_ok");
        assert!(
            archived["error"].as_str().unwrap().contains("403"),
            "{archived}"
        );
        assert_eq!(archived["content"], "first result");

        // 5xx on every retry: also for good.
        rig.sim.rest_fault(RestFault {
            kind: RestFaultKind::ServerError(503),
            count: 3,
            path_prefix: Some(path.clone()),
        });
        rig.write_atomic(
            "spool/results/r2.json",
            &format!(r#"{{"channel_id":"{dm}","content":"second result"}}"#),
        );
        let archived = wait_until("r2 archived", T, || rig.json("spool/archive/r2.json")).await;
        assert_eq!(archived["outcome"], "fallback_ok");

        let inputs: Vec<serde_json::Value> = std::fs::read_to_string(&fallback_log)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(inputs.len(), 2);
        assert_eq!(inputs[0]["content"], "first result");
        assert_eq!(inputs[0]["channel_id"], dm.to_string());
        assert_eq!(inputs[1]["content"], "second result");
        wait_until("results removed", T, || {
            rig.files("spool/results").is_empty().then_some(())
        })
        .await;
        // The 403 refuses the channel outright; after the 503s the user is
        // told what failed.
        let notices = rig.sim.messages_in(dm);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].content.contains("could not be delivered")
                && notices[0].content.contains("503"),
            "{}",
            notices[0].content
        );
        let counters = bridge.counters.clone();
        // Stopping drains: the counters are final.
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        let counters = counters.snapshot();
        assert_eq!((counters.undelivered, counters.fallbacks_run), (2, 2));
        let statuses: Vec<_> = journal
            .iter()
            .filter(|e| e.kind == "delivery")
            .map(|e| e.status)
            .collect();
        assert_eq!(statuses, [Some(403), Some(503)], "{journal:?}");
        assert!(
            !format!("{journal:?}").contains("result"),
            "no content in the journal"
        );
    });
}

#[test]
fn spool_round_trip_and_malformed_results_are_moved_aside() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        // No agent_cmd: tasks go to the spool.
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        let (message_id, dm) = rig.sim.send_dm(ALICE, "alice", "do the thing");
        let task_file = format!("spool/tasks/{message_id}.json");
        let task = wait_until("the spooled task", T, || rig.json(&task_file)).await;
        assert_eq!(task["text"], "do the thing");
        assert_eq!(task["channel_id"], dm.to_string());
        assert_eq!(task["author"]["id"], ALICE.to_string());
        assert_eq!(task["id"], message_id.to_string());

        // A malformed result first, then the agent's answer.
        rig.write_atomic("spool/results/bad.json", "{\"channel_id\": oops");
        rig.write_atomic(
            &format!("spool/results/{message_id}.json"),
            &format!(r#"{{"channel_id":"{dm}","content":"the thing is done"}}"#),
        );
        rig.message_containing(dm, "the thing is done", T).await;
        let archived = wait_until("the archived result", T, || {
            rig.json(&format!("spool/archive/{message_id}.json"))
        })
        .await;
        assert_eq!(archived["outcome"], "delivered");
        assert_eq!(
            archived["delivered_message_ids"].as_array().unwrap().len(),
            1
        );
        wait_until("bad.json moved aside", T, || {
            rig.read("spool/malformed/bad.json")
        })
        .await;
        // Later ticks neither lose nor retry it.
        rig.write_atomic(
            "spool/results/later.json",
            &format!(r#"{{"channel_id":"{dm}","content":"later"}}"#),
        );
        wait_until("later archived", T, || rig.json("spool/archive/later.json")).await;
        wait_until("results removed", T, || {
            rig.files("spool/results").is_empty().then_some(())
        })
        .await;
        assert_eq!(
            rig.read("spool/malformed/bad.json").unwrap(),
            "{\"channel_id\": oops"
        );
        let counters = bridge.counters.clone();
        // Stopping drains: the counters are final.
        bridge.stop().await;
        let counters = counters.snapshot();
        assert_eq!(counters.results_malformed, 1);
        assert_eq!(counters.results_delivered, 2);
        assert_eq!(counters.tasks_spooled, 1);
    });
}

#[test]
fn a_placeholder_is_replaced_by_the_reply() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; sleep 1; echo final answer"));
        let mut tunables = tunables();
        tunables.placeholder_after = Some(Duration::from_millis(200));
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "slow one");
        rig.message_containing(dm, smolcord_app::bridge::PLACEHOLDER, T)
            .await;
        let reply = rig.message_containing(dm, "final answer", T).await;
        assert_eq!(reply.edits, 1, "the placeholder was edited into the reply");
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        bridge.stop().await;
    });
}

#[test]
fn channels_run_concurrently_in_order_within_the_agent_cap() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let log = rig.path("agent-runs");
        let mut config = rig.config();
        config.allowed_user_ids.push(BOB.to_string());
        config.agent_concurrency = 2;
        config.agent_cmd = Some(sh(&format!(
            "echo start >> '{log}'; t=$(cat); sleep 0.6; echo end >> '{log}'; echo \"$t\"",
            log = log.display()
        )));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, alice) = rig.sim.send_dm(ALICE, "alice", "one");
        rig.sim.send_dm(ALICE, "alice", "two");
        let (_, owner) = rig.sim.send_dm(OWNER, "owner", "three");
        let (_, bob) = rig.sim.send_dm(BOB, "bob", "four");
        let alice_replies = rig.messages(alice, 2, T).await;
        assert_eq!(task_text(&alice_replies[0].content), "one");
        assert_eq!(task_text(&alice_replies[1].content), "two");
        let owner_reply = rig.messages(owner, 1, T).await;
        rig.messages(bob, 1, T).await;
        // The owner's channel did not wait behind alice's two messages.
        let id = |m: &smolcord_sim::BotMessage| m.id;
        assert!(
            id(&owner_reply[0]) < id(&alice_replies[1]),
            "owner's reply came after alice's second"
        );
        // Never more than two agents at once.
        let mut running = 0i32;
        let mut peak = 0;
        for line in std::fs::read_to_string(&log).unwrap().lines() {
            running += if line == "start" { 1 } else { -1 };
            peak = peak.max(running);
        }
        assert_eq!(peak, 2);
        let _ = Snowflake::new(0);
        bridge.stop().await;
    });
}

#[test]
fn spool_results_in_odd_encodings_are_taken_when_plain_and_otherwise_told_once() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        let owner_dm = rig.sim.dm_channel_of(OWNER);
        let drop_result = |name: &str, bytes: Vec<u8>| {
            let tmp = rig.path(&format!("spool/results/.{name}.tmp"));
            std::fs::write(&tmp, bytes).unwrap();
            std::fs::rename(tmp, rig.path(&format!("spool/results/{name}"))).unwrap();
        };
        let json = format!(r#"{{"channel_id":"{dm}","content":"café with a BOM"}}"#);
        drop_result(
            "bom.json",
            [&[0xEF, 0xBB, 0xBF][..], json.as_bytes()].concat(),
        );
        // Latin-1: its channel can be read, its text cannot.
        let latin1 = format!(r#"{{"channel_id":"{dm}","content":"café"}}"#);
        drop_result("latin1.json", latin1.chars().map(|c| c as u8).collect());
        drop_result("noise.json", vec![0xFF, 0x00, 0x13, 0x37]);

        rig.message_containing(dm, "café with a BOM", T).await;
        let told = rig.message_containing(dm, "could not be used", T).await;
        assert!(told.content.contains("not UTF-8"), "{}", told.content);
        assert!(
            !told.content.contains("caf"),
            "content echoed: {}",
            told.content
        );
        let owner = rig.message_containing(owner_dm, "noise.json", T).await;
        assert!(
            owner.content.contains("names no channel"),
            "{}",
            owner.content
        );
        wait_until("both moved aside", T, || {
            (rig.files("spool/malformed").len() == 2).then_some(())
        })
        .await;
        bridge.stop().await;
        assert_eq!(rig.sim.messages_in(dm).len(), 2, "told twice");
        assert_eq!(rig.sim.messages_in(owner_dm).len(), 1, "told twice");
    });
}
