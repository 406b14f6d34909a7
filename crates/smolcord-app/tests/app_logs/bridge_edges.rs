//! Nothing lost at the edges: a reply whose upload is refused still
//! reaches its user, and no placeholder stays "working…".
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord::protocol::Snowflake;
use smolcord_app::bridge::PLACEHOLDER;
use smolcord_sim::{BotMessage, RestFault, RestFaultKind, SimEvent, UploadScope};
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(15);

/// An agent answering 30 000 characters (600 lines of 49 + newline), after
/// `delay` (for the placeholder to go up first).
fn long_agent(delay: &str) -> Vec<String> {
    sh(&format!(
        "cat >/dev/null; sleep {delay}; yes '0123456789012345678901234567890123456789012345678' | head -n 600"
    ))
}

fn refuse_uploads(rig: &Rig, dm: Snowflake, status: u16, scope: UploadScope) {
    rig.sim.rest_fault(RestFault {
        kind: RestFaultKind::RefuseUpload { status, scope },
        count: 100,
        path_prefix: Some(format!("/api/v10/channels/{dm}/messages")),
    });
}

fn file_names(message: &BotMessage) -> Vec<String> {
    message.object["attachments"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .filter_map(|f| f["filename"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_upload_refused_with_its_attachments_metadata_goes_without_it() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(long_agent("0"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        refuse_uploads(&rig, dm, 500, UploadScope::AttachmentsField);
        let (message, _) = rig.sim.send_dm(ALICE, "alice", "long please");
        let reply = rig.message_containing(dm, "as a file", T).await;
        assert_eq!(file_names(&reply), ["reply.txt"], "{reply:?}");
        let uploads: Vec<_> = rig
            .sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.method == "POST" && !r.files.is_empty())
            .collect();
        let last = uploads.last().expect("an upload");
        assert_eq!(last.status, 200, "{uploads:?}");
        assert!(last.body.get("attachments").is_none(), "{last:?}");
        assert!(
            uploads[..uploads.len() - 1]
                .iter()
                .all(|r| r.status == 500 && r.body["attachments"].is_array()),
            "{uploads:?}"
        );
        wait_until("the message marked processed", T, || {
            rig.read("runtime.json")
                .filter(|r| r.contains(&message.to_string()))
        })
        .await;
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        // The record goes once the processed mark is on disk: just after it.
        wait_until("the outbox emptied", T, || {
            rig.files("outbox").is_empty().then_some(())
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn a_reply_no_upload_gets_through_goes_as_text_cut_and_replaces_the_placeholder() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(long_agent("1"));
        let mut tunables = tunables();
        tunables.placeholder_after = Some(Duration::from_millis(200));
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        refuse_uploads(&rig, dm, 500, UploadScope::Any);
        let (message, _) = rig.sim.send_dm(ALICE, "alice", "long please");
        rig.message_containing(dm, PLACEHOLDER, T).await;
        let last = rig.message_containing(dm, "the rest was cut", T).await;
        assert!(
            last.content.contains("could not be sent as a file"),
            "{}",
            last.content
        );
        wait_until("the message marked processed", T, || {
            rig.read("runtime.json")
                .filter(|r| r.contains(&message.to_string()))
        })
        .await;
        let messages = rig.sim.messages_in(dm);
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(
            messages.iter().all(|m| m.content != PLACEHOLDER),
            "{messages:?}"
        );
        // The placeholder became the first part.
        assert_eq!(messages[0].edits, 1);
        assert!(messages.iter().all(|m| file_names(m).is_empty()));
        // The record goes once the processed mark is on disk: just after it.
        wait_until("the outbox emptied", T, || {
            rig.files("outbox").is_empty().then_some(())
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn a_placeholder_that_cannot_take_the_file_says_where_the_reply_is() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(long_agent("1"));
        let mut tunables = tunables();
        tunables.placeholder_after = Some(Duration::from_millis(200));
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        refuse_uploads(&rig, dm, 400, UploadScope::Edits);
        rig.sim.send_dm(ALICE, "alice", "long please");
        let placeholder = rig.message_containing(dm, PLACEHOLDER, T).await;
        let reply = rig.message_containing(dm, "as a file", T).await;
        assert_eq!(file_names(&reply), ["reply.txt"]);
        let edited = wait_until("the placeholder edited to the outcome", T, || {
            rig.sim
                .messages_in(dm)
                .into_iter()
                .find(|m| m.id == placeholder.id && m.content != PLACEHOLDER)
        })
        .await;
        assert!(edited.content.contains("below"), "{}", edited.content);
        assert_eq!(rig.sim.messages_in(dm).len(), 2);
        bridge.stop().await;
    });
}

/// STRANGER writes `text`; waits until the bridge refused `want` messages.
async fn knock(rig: &Rig, bridge: &Running, text: &str, want: u64) {
    rig.sim.send_dm(STRANGER, "stranger", text);
    let what = format!("the revoked user refused ({text:?})");
    wait_until(&what, T, || {
        (bridge.counters.snapshot().refused >= want).then_some(())
    })
    .await;
}

#[test]
fn a_revoke_survives_a_tcp_cut_an_invalid_session_and_a_restart() {
    let rig = Rig::new();
    // STRANGER was paired: in access.json and in its backup.
    let paired = format!(r#"{{"allowed_user_ids":["{STRANGER}"]}}"#);
    std::fs::write(rig.path("access.json"), &paired).unwrap();
    std::fs::write(rig.path("access.json.bak"), &paired).unwrap();
    run(Duration::from_secs(90), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        let bridge = rig.start(&ex, config.clone(), tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "before the revoke");
        rig.message_containing(dm, "before the revoke", T).await;

        // The operator revokes by hand (the owner comes from the config,
        // so the file validly allows nobody) and sends SIGHUP.
        rig.write_atomic("access.json", r#"{"allowed_user_ids":[]}"#);
        bridge.reload.reload();
        wait_until("the revoke applied", T, || {
            support::logs::captured()
                .iter()
                .any(|l| l.contains("access state changed on disk"))
                .then_some(())
        })
        .await;
        let revoked = |rig: &Rig| {
            let file = rig.json("access.json").expect("access.json");
            assert_eq!(file["allowed_user_ids"], serde_json::json!([]), "{file}");
        };
        knock(&rig, &bridge, "after the revoke", 1).await;

        // A TCP cut: resumed.
        let events = rig.sim.subscribe();
        rig.sim.fault(smolcord_sim::Fault::DropTcp);
        next_matching_event(&events, |e| matches!(e, SimEvent::Resumed { .. })).await;
        knock(&rig, &bridge, "after the resume", 2).await;
        revoked(&rig);

        // Op 9, not resumable: a fresh session and READY.
        let events = rig.sim.subscribe();
        rig.sim.fault(smolcord_sim::Fault::InvalidSession(false));
        next_matching_event(&events, |e| matches!(e, SimEvent::Identified { .. })).await;
        knock(&rig, &bridge, "after the fresh session", 3).await;
        revoked(&rig);
        bridge.stop().await;

        // A restart.
        let events = rig.sim.subscribe();
        let bridge = rig.start(&ex, config, tunables()).await;
        next_matching_event(&events, |e| {
            matches!(e, SimEvent::Identified { .. } | SimEvent::Resumed { .. })
        })
        .await;
        knock(&rig, &bridge, "after the restart", 1).await;
        revoked(&rig);
        bridge.stop().await;
        assert_eq!(line_count(&calls), 1, "the revoked user reached the agent");
        assert!(
            !support::logs::captured()
                .iter()
                .any(|l| l.contains("restoring it from")),
            "a valid access.json was taken for a damaged one"
        );
    });
}

async fn next_matching_event(
    events: &async_channel::Receiver<SimEvent>,
    pred: impl FnMut(&SimEvent) -> bool,
) {
    smolcord_sim::next_matching(events, T, pred)
        .await
        .expect("the event within the limit");
}

#[test]
fn an_agent_that_answers_closes_stdout_and_runs_on_is_still_heard() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_timeout_s = 1;
        // Answers, closes its stdout, then keeps working past its timeout.
        config.agent_cmd = Some(sh(
            "cat >/dev/null; echo 'the whole answer'; exec >&-; sleep 30",
        ));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "question");
        let reply = rig.message_containing(dm, "the whole answer", T).await;
        assert!(!reply.content.contains("may be cut"), "{}", reply.content);
        assert!(!reply.content.contains("Sorry"), "{}", reply.content);
        bridge.stop().await;
    });
}

#[test]
fn an_agent_stopped_at_its_timeout_delivers_what_it_printed_saying_it_may_be_cut() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_timeout_s = 1;
        config.agent_cmd = Some(sh("cat >/dev/null; echo 'a first half'; sleep 30"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "question");
        let reply = rig.message_containing(dm, "a first half", T).await;
        assert!(reply.content.contains("may be cut"), "{}", reply.content);
        bridge.stop().await;
    });
}

/// A `spool/tasks/` that cannot be written, and made writable again: a
/// full 64 KiB tmpfs when running as root (mount needs it), else a
/// read-only directory.
struct BrokenSpool {
    dir: std::path::PathBuf,
    tmpfs: bool,
}

impl BrokenSpool {
    /// `None` (with the reason printed) where neither works here.
    fn new(dir: std::path::PathBuf) -> Option<BrokenSpool> {
        std::fs::create_dir_all(&dir).unwrap();
        if rustix::process::geteuid().is_root() {
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
                .arg(&dir)
                .status();
            if !matches!(mounted, Ok(status) if status.success()) {
                println!("skipped: running as root, but a tmpfs cannot be mounted here ({mounted:?}), and a read-only directory does not stop root");
                return None;
            }
        }
        let spool = BrokenSpool {
            tmpfs: rustix::process::geteuid().is_root(),
            dir,
        };
        spool.break_it();
        Some(spool)
    }

    fn filler(&self) -> std::path::PathBuf {
        self.dir.join("filler")
    }

    fn break_it(&self) {
        use std::os::unix::fs::PermissionsExt;
        if self.tmpfs {
            // Fills it to the last byte (the write stops at ENOSPC).
            let _ = std::fs::write(self.filler(), vec![0u8; 128 * 1024]);
            assert!(std::fs::write(self.dir.join("probe"), vec![0u8; 8192]).is_err());
            let _ = std::fs::remove_file(self.dir.join("probe"));
        } else {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
    }

    fn repair(&self) {
        use std::os::unix::fs::PermissionsExt;
        if self.tmpfs {
            std::fs::remove_file(self.filler()).unwrap();
        } else {
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    /// The task files in it.
    fn tasks(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }
}

impl Drop for BrokenSpool {
    fn drop(&mut self) {
        if self.tmpfs {
            let _ = std::process::Command::new("umount").arg(&self.dir).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn spool_mode_on_a_full_disk_loses_nothing_across_a_recovery_and_a_restart() {
    let rig = Rig::new();
    let Some(spool) = BrokenSpool::new(rig.path("spool/tasks")) else {
        return;
    };
    run(Duration::from_secs(90), |ex| async move {
        // No agent_cmd: tasks go to the spool.
        let mut tunables = tunables();
        tunables.spool_retry = smolcord_app::bridge::SpoolRetry {
            first: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
        };
        let bridge = rig.start(&ex, rig.config(), tunables).await;
        rig.session_ready(T).await;
        let sent: Vec<Snowflake> = (0..5)
            .map(|n| rig.sim.send_dm(ALICE, "alice", &format!("task {n}")).0)
            .collect();
        let dm = rig.sim.dm_channel_of(ALICE);
        rig.message_containing(dm, "cannot write its spool", T)
            .await;
        assert!(spool.tasks().is_empty(), "{:?}", spool.tasks());

        // Stopped while the disk is full, started again once it is not:
        // the messages were never processed, the resume brings them back.
        bridge.stop().await;
        spool.repair();
        let events = rig.sim.subscribe();
        let bridge = rig.start(&ex, rig.config(), tunables).await;
        next_matching_event(&events, |e| matches!(e, SimEvent::Resumed { .. })).await;
        let want: Vec<String> = sent.iter().map(|id| format!("{id}.json")).collect();
        wait_until("all five tasks spooled", T, || {
            (spool.tasks() == want).then_some(())
        })
        .await;

        // Full again, and freed while the bridge runs: the write is
        // retried, no restart needed.
        spool.break_it();
        let (late, _) = rig.sim.send_dm(ALICE, "alice", "task while full");
        wait_until("the write failing", T, || {
            support::logs::captured()
                .iter()
                .any(|l| l.contains(&format!("spooling task {late}")))
                .then_some(())
        })
        .await;
        spool.repair();
        wait_until("the late task spooled", T, || {
            spool
                .tasks()
                .contains(&format!("{late}.json"))
                .then_some(())
        })
        .await;
        wait_until("the processed mark", T, || {
            rig.read("runtime.json")
                .filter(|r| r.contains(&late.to_string()))
        })
        .await;
        let counters = bridge.counters.snapshot();
        // Counted across the restart: each of the six spooled once.
        assert_eq!(counters.tasks_spooled, 6, "{counters:?}");
        bridge.stop().await;
    });
}

#[test]
fn after_a_restart_a_reply_that_fell_back_to_text_goes_on_as_text() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let dm = rig.sim.dm_channel_of(ALICE);
        let message = 1_300_000_000_000_000_001u64;
        let content: String = (0..600).map(|_| format!("{}\n", "y".repeat(49))).collect();
        // What a run that died after the first text part left on record.
        std::fs::create_dir_all(rig.path("outbox")).unwrap();
        let record = serde_json::json!({
            "channel_id": dm.to_string(),
            "message_id": message.to_string(),
            "content": content,
            "sent": {"message_ids": ["1"], "as_text": true},
        });
        std::fs::write(
            rig.path(&format!("outbox/reply-{dm}-{message}.json")),
            record.to_string(),
        )
        .unwrap();
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        let last = rig.message_containing(dm, "the rest was cut", T).await;
        assert!(last.content.contains("could not be sent as a file"));
        wait_until("the record removed", T, || {
            rig.files("outbox").is_empty().then_some(())
        })
        .await;
        let messages = rig.sim.messages_in(dm);
        // Parts 2 to 5; no file tried again.
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages.iter().all(|m| file_names(m).is_empty()));
        assert!(rig.sim.rest_requests().iter().all(|r| r.files.is_empty()));
        bridge.stop().await;
    });
}

#[test]
fn an_upload_rate_limited_past_the_budget_is_tried_again_later_not_taken_for_a_refusal() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(long_agent("0"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let dm = rig.sim.dm_channel_of(ALICE);
        rig.history_read(dm, T).await;
        // Past the REST client's five 429s, for the upload and for its
        // try without the attachments metadata.
        rig.sim.rest_fault(RestFault {
            kind: RestFaultKind::RateLimited {
                retry_after: 0.05,
                global: false,
            },
            count: 10,
            path_prefix: Some(format!("/api/v10/channels/{dm}/messages")),
        });
        rig.sim.send_dm(ALICE, "alice", "long please");
        let reply = rig.message_containing(dm, "as a file", T).await;
        assert_eq!(file_names(&reply), ["reply.txt"], "{reply:?}");
        bridge.stop().await;
        let sent = rig.sim.messages_in(dm);
        assert_eq!(sent.len(), 1, "{sent:?}");
    });
}
