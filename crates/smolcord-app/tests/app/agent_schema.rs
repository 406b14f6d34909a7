//! The agent contract's two files against their documented schemas
//! (`docs/task.schema.json`, `docs/result.schema.json`, described in
//! `docs/agent.md`): the task the bridge writes, on an agent's stdin and in
//! `spool/tasks/`, with every optional field filled (a transcript, a
//! display name, an attachment); and results, which the bridge takes
//! exactly when the schema says they are results. The task schema forbids
//! fields it does not describe, so a field added without being documented
//! fails here.
#![allow(clippy::disallowed_methods)] // tests may block (std::fs)

use crate::support;

use serde_json::{json, Value};
use smolcord_app::bridge::store::spool::parse_result;
use std::time::Duration;
use support::bridge::*;
use support::schema::{load, validate};
use support::wait::*;

const T: Duration = Duration::from_secs(10);

fn assert_task(task: &Value) {
    let errors = validate(&load("task.schema.json"), task);
    assert!(errors.is_empty(), "{errors:#?}\nin {task:#}");
}

#[test]
fn the_task_on_stdin_and_in_the_spool_matches_the_schema() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        config.transcribe_cmd = Some(sh("echo hello there"));
        let bridge = rig.start(&ex, config.clone(), tunables()).await;
        rig.session_ready(T).await;
        let note = rig
            .sim
            .send_voice_dm(ALICE, "alice", b"OggS".to_vec(), Duration::from_secs(1));
        rig.message_containing(note.channel_id, "hello there", T)
            .await;
        bridge.stop().await;
        let stdin = std::fs::read_to_string(&calls).expect("the agent's stdin");
        let task: Value = serde_json::from_str(stdin.trim()).expect("one task");
        assert_task(&task);
        // Every optional part is there, so the schema saw it.
        assert_eq!(task["transcripts"][0]["text"], "hello there");
        assert_eq!(task["attachments"][0]["content_type"], "audio/ogg");

        // The spool: the same task, in a file.
        config.agent_cmd = None;
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (message, _) = rig.sim.send_dm(OWNER, "owner", "spool this");
        let file = rig.path(&format!("spool/tasks/{message}.json"));
        let text = wait_until("the spooled task", T, || {
            std::fs::read_to_string(&file).ok()
        })
        .await;
        bridge.stop().await;
        let task: Value = serde_json::from_str(&text).expect("a JSON task");
        assert_task(&task);
        assert_eq!(task["text"], "spool this");
    });
}

#[test]
fn a_result_is_taken_exactly_when_the_schema_says_it_is_one() {
    let schema = load("result.schema.json");
    let results = [
        json!({"channel_id": "5", "content": "hi"}),
        json!({"channel_id": "5", "content": "hi", "task_id": "7"}),
        json!({"channel_id": "5"}),
        json!({"content": "hi"}),
        json!({"channel_id": 5, "content": "hi"}),
        json!({"channel_id": "5", "content": ""}),
        json!({"channel_id": "5", "content": 3}),
        json!(["5", "hi"]),
    ];
    for result in results {
        let valid = validate(&schema, &result).is_empty();
        let taken = parse_result(result.to_string().as_bytes()).is_ok();
        assert_eq!(valid, taken, "schema {valid}, bridge {taken}: {result}");
    }
    // Where the schema cannot say it (white space only), docs/agent.md
    // does, and the bridge refuses it.
    assert!(parse_result(br#"{"channel_id": "5", "content": "  "}"#).is_err());
}
