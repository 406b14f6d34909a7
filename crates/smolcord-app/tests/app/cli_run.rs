//! `smolcord run` as a process against the simulator: a fatal close exits
//! non-zero with the clear error; SIGTERM saves the session so the next
//! start resumes instead of identifying.
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use crate::support;

use smolcord_sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::time::Duration;
use support::binary::Smolcord;
use support::wait::{sim_saw, wait_until_blocking};

const BOUND: Duration = Duration::from_secs(20);

fn start(sim: &Simulator, state: &Path, token: &str) -> Smolcord {
    Smolcord::spawn(
        &["run"],
        [
            ("DISCORD_TOKEN", token.to_owned()),
            ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
            ("SMOLCORD_API_BASE", sim.api_base()),
            ("SMOLCORD_STATE_DIR", state.display().to_string()),
        ],
    )
}

fn wait_sim(sim: &Simulator, what: &str, pred: impl FnMut(&SimEvent) -> bool) {
    sim_saw(sim, what, BOUND, pred);
}

#[test]
fn a_rejected_token_exits_non_zero_naming_the_code_and_the_fix() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut child = start(&sim, state.path(), "not-the-right-token");
    let status = child.wait(BOUND);
    let stderr = child.stderr();
    assert_eq!(status.code(), Some(78), "{stderr}");
    // The gateway's 4004 or the start-up REST check's 401, whichever
    // comes first: the same words either way.
    assert!(
        (stderr.contains("authentication failed (4004)")
            || stderr.contains("authentication failed (HTTP 401"))
            && stderr.contains("DISCORD_TOKEN"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not-the-right-token"),
        "the token leaked: {stderr}"
    );
    // A refused token is a failed start, not a clean stop: the restart
    // counter (safe mode after repeated failures) keeps it.
    assert!(!stderr.contains("clean stop"), "{stderr}");
    let runtime = std::fs::read_to_string(state.path().join("runtime.json")).unwrap_or_default();
    if !runtime.is_empty() {
        let runtime: serde_json::Value = serde_json::from_str(&runtime).unwrap();
        assert_eq!(runtime["failed_starts"], 1, "{runtime}");
    }
}

#[test]
fn sigterm_saves_the_session_and_the_next_start_resumes() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut first = start(&sim, state.path(), DEFAULT_SIM_TOKEN);
    wait_sim(&sim, "an identify", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    sim.send_dm(42, "someone", "hello");
    wait_sim(
        &sim,
        "the bot answering",
        |e| matches!(e, SimEvent::Rest { method, path, .. } if method == "POST" && path.ends_with("/messages")),
    );
    first.terminate();
    let status = first.wait(BOUND);
    assert!(status.success(), "{}", first.stderr());
    wait_sim(&sim, "a resumable close", |e| {
        matches!(
            e,
            SimEvent::ClientClosed {
                code: Some(4000),
                ..
            }
        )
    });
    assert!(state.path().join("session.json").exists());

    let mut second = start(&sim, state.path(), DEFAULT_SIM_TOKEN);
    wait_sim(&sim, "a resume", |e| matches!(e, SimEvent::Resumed { .. }));
    // A run that only resumed (no READY) still says whom it runs as.
    let shown = wait_until_blocking("status naming the bot", BOUND, || {
        let mut status = Smolcord::spawn(
            &["status"],
            [("SMOLCORD_STATE_DIR", state.path().display().to_string())],
        );
        status.wait(BOUND);
        Some(status.stdout()).filter(|out| out.contains("connected"))
    });
    assert!(!shown.contains("as ?"), "{shown}");
    assert_eq!(
        sim.stats().totals.identifies,
        1,
        "the restart identified again"
    );
    second.terminate();
    assert!(second.wait(BOUND).success());
}

#[test]
fn the_agent_never_sees_the_token() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "allowed_user_ids": ["42"],
        "agent_cmd": ["/bin/sh", "-c", "cat > /dev/null; echo token=${DISCORD_TOKEN:-unset}"],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
    let mut child = start(&sim, state.path(), DEFAULT_SIM_TOKEN);
    wait_sim(&sim, "an identify", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    let (_, channel) = sim.send_dm(42, "alice", "what do you see?");
    let reply = wait_until_blocking("the agent's reply", BOUND, || {
        sim.messages_in(channel)
            .into_iter()
            .find(|m| m.content.starts_with("token="))
            .map(|m| m.content)
    });
    assert_eq!(reply.trim(), "token=unset");
    child.terminate();
    assert!(child.wait(BOUND).success());
}

/// The names of `pid`'s threads.
fn thread_names(pid: rustix::process::Pid) -> Vec<String> {
    let tasks = format!("/proc/{}/task", pid.as_raw_nonzero());
    std::fs::read_dir(tasks)
        .map(|dir| {
            dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim_end().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn after_a_burst_of_agents_no_reaper_thread_is_left() {
    // Issue 14: async-process's reaper thread (and its async-io block_on)
    // outlived the first child and woke the idle bridge.
    const USERS: u64 = 4;
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "allowed_user_ids": (1..=USERS).map(|u| u.to_string()).collect::<Vec<_>>(),
        "agent_concurrency": USERS,
        "agent_cmd": ["/bin/sh", "-c", "cat > /dev/null; sleep 0.2; echo done"],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
    let mut child = start(&sim, state.path(), DEFAULT_SIM_TOKEN);
    wait_sim(&sim, "an identify", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    let channels: Vec<_> = (1..=USERS)
        .map(|u| sim.send_dm(u, &format!("user{u}"), "go").1)
        .collect();
    for channel in channels {
        wait_until_blocking("an agent's reply", BOUND, || {
            sim.messages_in(channel)
                .into_iter()
                .any(|m| m.content == "done")
                .then_some(())
        });
    }
    // The blocking pool's threads retire 0.5 s after their last job.
    let names = wait_until_blocking("the pool threads to retire", BOUND, || {
        let names = thread_names(child.pid());
        (!names.iter().any(|n| n.starts_with("blocking"))).then_some(names)
    });
    assert!(
        !names.iter().any(|n| n == "async-process"),
        "an async-process thread outlived the agents: {names:?}"
    );
    child.terminate();
    assert!(child.wait(BOUND).success());
}
