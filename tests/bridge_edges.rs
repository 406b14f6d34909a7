//! Nothing lost at the edges: a reply whose upload is refused still
//! reaches its user, and no placeholder stays "working…".
#![cfg(feature = "sim")]
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

mod support;

use smolcord::bridge::PLACEHOLDER;
use smolcord::protocol::Snowflake;
use smolcord::sim::{BotMessage, RestFault, RestFaultKind, UploadScope};
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
        assert!(rig.files("outbox").is_empty(), "{:?}", rig.files("outbox"));
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
        assert!(rig.files("outbox").is_empty(), "{:?}", rig.files("outbox"));
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
