//! The bridge's budget end to end (issue 11): spool results are capped and
//! never read through a link; a long agent reply is one attachment and a
//! cut one says so; a flood of messages never grows the job queues past
//! their bounds, and a crowd of strangers never drowns the journal.
#![allow(clippy::disallowed_methods)] // tests write files directly

use crate::support;

use smolcord::protocol::Snowflake;
use smolcord_app::bridge::{DROPPABLE_JOBS, MAX_CHANNEL_JOBS};
use smolcord_app::recorder::JournalEntry;
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(15);

fn journal_with<'a>(entries: &'a [JournalEntry], needle: &str) -> Vec<&'a JournalEntry> {
    entries
        .iter()
        .filter(|e| e.message.contains(needle))
        .collect()
}

/// The file attached to `message` (its first attachment), fetched from the
/// simulator's CDN like a Discord client would.
fn attachment_text(message: &smolcord_sim::BotMessage) -> (String, String) {
    let attachments = message.object["attachments"]
        .as_array()
        .expect("attachments");
    assert_eq!(attachments.len(), 1, "{:?}", message.object);
    let url = attachments[0]["url"].as_str().unwrap();
    let text = ureq::get(url)
        .call()
        .expect("the attachment downloads")
        .body_mut()
        .with_config()
        .limit(16 << 20)
        .read_to_string()
        .unwrap();
    (
        attachments[0]["filename"].as_str().unwrap().to_owned(),
        text,
    )
}

#[test]
fn an_oversized_result_is_moved_aside_unread() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        config.max_result_bytes = 200;
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        let big = format!(
            r#"{{"channel_id": "{dm}", "content": "{}"}}"#,
            "x".repeat(300)
        );
        rig.write_atomic("spool/results/big.json", &big);
        rig.write_atomic(
            "spool/results/small.json",
            &format!(r#"{{"channel_id": "{dm}", "content": "small one"}}"#),
        );
        rig.message_containing(dm, "small one", T).await;
        // Both are done when the spool is empty: one archived, one aside.
        wait_until("an empty spool/results", T, || {
            rig.files("spool/results").is_empty().then_some(())
        })
        .await;
        assert_eq!(
            rig.read("spool/rejected/big.json").unwrap(),
            big,
            "kept as is"
        );
        assert_eq!(rig.sim.messages_in(dm).len(), 1, "nothing of it was posted");
        assert_eq!(bridge.counters.snapshot().results_rejected, 1);
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        let refused = journal_with(&journal, "refused unread: larger than max_result_bytes");
        assert_eq!(refused.len(), 1, "{journal:?}");
    });
}

#[test]
fn a_symlinked_result_is_refused_and_its_target_never_posted() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        // A valid result elsewhere, e.g. another user's file.
        let outside = rig.path("elsewhere.json");
        std::fs::write(
            &outside,
            format!(r#"{{"channel_id": "{dm}", "content": "SECRET"}}"#),
        )
        .unwrap();
        std::os::unix::fs::symlink(&outside, rig.path("spool/results/link.json")).unwrap();
        rig.write_atomic(
            "spool/results/zz-after.json",
            &format!(r#"{{"channel_id": "{dm}", "content": "after the link"}}"#),
        );
        rig.message_containing(dm, "after the link", T).await;
        let aside = rig.path("spool/rejected/link.json");
        wait_until("the link in spool/rejected", T, || {
            std::fs::symlink_metadata(&aside).ok()
        })
        .await;
        assert!(std::fs::symlink_metadata(&aside).unwrap().is_symlink());
        assert!(outside.exists(), "the target is left alone");
        assert!(
            rig.sim
                .messages_in(dm)
                .iter()
                .all(|m| !m.content.contains("SECRET")),
            "the link was followed"
        );
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        assert_eq!(
            journal_with(&journal, "symbolic link").len(),
            1,
            "{journal:?}"
        );
    });
}

#[test]
fn a_long_agent_reply_arrives_as_one_attachment_with_the_full_text() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        // 500 numbered lines, ~10 000 characters: five messages' worth.
        config.agent_cmd = Some(sh(
            "cat >/dev/null; i=1; while [ $i -le 500 ]; do echo \"line $i of the reply\"; i=$((i+1)); done",
        ));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "tell me everything");
        let message = rig.messages(dm, 1, T).await.remove(0);
        let expected: Vec<String> = (1..=500)
            .map(|i| format!("line {i} of the reply"))
            .collect();
        let (filename, text) = attachment_text(&message);
        assert_eq!(filename, "reply.txt");
        assert_eq!(text, expected.join("\n"), "the whole reply, as printed");
        assert!(message.content.contains("as a file"), "{}", message.content);
        // One message: no wall of chunks after it.
        async_io::Timer::after(Duration::from_millis(300)).await;
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        bridge.stop().await;
    });
}

#[test]
fn a_short_reply_is_still_plain_messages() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        // Two messages' worth (2 500 characters on one line).
        config.agent_cmd = Some(sh("cat >/dev/null; head -c 2500 /dev/zero | tr '\\0' y"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "short please");
        let messages = rig.messages(dm, 2, T).await;
        assert!(messages
            .iter()
            .all(|m| m.object["attachments"].as_array().is_none_or(Vec::is_empty)));
        assert_eq!(
            messages.iter().map(|m| m.content.len()).sum::<usize>(),
            2500
        );
        bridge.stop().await;
    });
}

#[test]
fn a_cut_agent_reply_says_so() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        // 3 MiB of output: cut at the 1 MiB capture cap.
        config.agent_cmd = Some(sh("cat >/dev/null; head -c 3145728 /dev/zero | tr '\\0' z"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "flood me");
        let message = rig.messages(dm, 1, T).await.remove(0);
        assert!(
            message.content.contains("longer than 1 MiB and was cut"),
            "the message says so: {}",
            message.content
        );
        let (_, text) = attachment_text(&message);
        let (reply, note) = text.split_once("\n\n").expect("the reply, then the note");
        assert_eq!(reply.len(), 1 << 20);
        assert!(reply.bytes().all(|b| b == b'z'));
        assert!(note.contains("was cut"), "the file says so too: {note}");
        bridge.stop().await;
    });
}

#[test]
fn a_flood_from_one_allowed_user_waits_for_room_and_is_answered_in_order() {
    const MESSAGES: usize = 60;
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        // A slow agent that answers with the text it was given.
        config.agent_cmd = Some(sh(
            "sleep 0.02; sed -n 's/.*\"content\":\"\\([^\"]*\\)\".*/answer to \\1/p'",
        ));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let mut dm = Snowflake::new(0);
        for n in 0..MESSAGES {
            dm = rig.sim.send_dm(ALICE, "alice", &format!("m{n:03}")).1;
        }
        let replies = rig.messages(dm, MESSAGES, Duration::from_secs(40)).await;
        let got: Vec<&str> = replies.iter().map(|m| m.content.as_str()).collect();
        let expected: Vec<String> = (0..MESSAGES)
            .map(|n| format!("answer to m{n:03}"))
            .collect();
        assert_eq!(got, expected, "every message answered, in order");
        let counters = bridge.counters.snapshot();
        // One channel: at most MAX_CHANNEL_JOBS waiting plus the one at work.
        assert!(
            counters.jobs_peak <= MAX_CHANNEL_JOBS as u64 + 1,
            "{} jobs were queued at once (bound {})",
            counters.jobs_peak,
            MAX_CHANNEL_JOBS + 1
        );
        assert_eq!(
            counters.messages_dropped, 0,
            "an allowed user's message is never dropped"
        );
        println!(
            "{MESSAGES} messages from one user: peak {} jobs",
            counters.jobs_peak
        );
        bridge.stop().await;
    });
}

#[test]
fn a_crowd_of_strangers_is_dropped_at_the_bound_and_the_journal_stays_readable() {
    const STRANGERS: u64 = 300;
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        for n in 0..STRANGERS {
            rig.sim
                .send_dm(STRANGER + 1000 + n, "stranger", "let me in");
        }
        wait_until("every stranger's message refused", T, || {
            (bridge.counters.snapshot().refused >= STRANGERS).then_some(())
        })
        .await;
        let counters = bridge.counters.snapshot();
        assert!(
            counters.jobs_peak <= DROPPABLE_JOBS as u64,
            "{} jobs at once (bound {DROPPABLE_JOBS})",
            counters.jobs_peak
        );
        assert!(counters.messages_dropped > 0, "{counters:?}");
        println!(
            "{STRANGERS} strangers: peak {} jobs, {} dropped",
            counters.jobs_peak, counters.messages_dropped
        );
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        let refusals = journal
            .iter()
            .filter(|e| e.kind == "access_refused")
            .count();
        assert!(
            refusals <= 2 * 10 + 2,
            "{refusals} refusal records: a crowd drowns the journal"
        );
        println!("{refusals} refusal records journalled");
        // The held-back ones are counted in the journal, not lost silently.
        assert!(
            journal.iter().any(|e| e.message.contains("more like it")),
            "{journal:?}"
        );
    });
}

#[test]
fn a_stop_while_the_loop_waits_for_room_is_not_held_up_by_the_agent() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("sleep 5; cat"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        // One at work, MAX_CHANNEL_JOBS waiting, and three more the
        // dispatch loop cannot take until an agent run ends.
        for n in 0..MAX_CHANNEL_JOBS + 4 {
            rig.sim.send_dm(ALICE, "alice", &format!("m{n}"));
        }
        wait_until("the channel's queue full", T, || {
            (bridge.counters.snapshot().jobs_peak == MAX_CHANNEL_JOBS as u64 + 1).then_some(())
        })
        .await;
        let started = std::time::Instant::now();
        bridge.stop().await;
        // The drain bound is 2 s (tunables); an agent run takes 5 s.
        let took = started.elapsed();
        assert!(took < Duration::from_millis(4500), "stopping took {took:?}");
    });
}
