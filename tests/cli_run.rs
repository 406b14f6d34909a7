//! `smolcord run` as a process against the simulator: a fatal close exits
//! non-zero with the clear error; SIGTERM saves the session so the next
//! start resumes instead of identifying.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use smolcord::sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(20);

fn start(sim: &Simulator, state: &Path, token: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_smolcord"))
        .arg("run")
        .env_clear()
        .env("DISCORD_TOKEN", token)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_STATE_DIR", state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("smolcord run starts")
}

fn exit_within(child: &mut Child, bound: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("smolcord run did not exit within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: Child) -> String {
    String::from_utf8_lossy(&child.wait_with_output().expect("output").stderr).into_owned()
}

fn wait_sim(sim: &Simulator, what: &str, pred: impl FnMut(&SimEvent) -> bool) {
    smol::block_on(sim.wait_for(BOUND, pred))
        .unwrap_or_else(|| panic!("the simulator never saw {what}"));
}

#[test]
fn a_rejected_token_exits_non_zero_naming_the_code_and_the_fix() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut child = start(&sim, state.path(), "not-the-right-token");
    let status = exit_within(&mut child, BOUND);
    let stderr = stderr_of(child);
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
    let pid = rustix::process::Pid::from_child(&first);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = exit_within(&mut first, BOUND);
    assert!(status.success(), "{}", stderr_of(first));
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
    assert_eq!(
        sim.stats().totals.identifies,
        1,
        "the restart identified again"
    );
    let pid = rustix::process::Pid::from_child(&second);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    assert!(exit_within(&mut second, BOUND).success());
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
    let deadline = Instant::now() + BOUND;
    let reply = loop {
        if let Some(message) = sim
            .messages_in(channel)
            .into_iter()
            .find(|m| m.content.starts_with("token="))
        {
            break message.content;
        }
        assert!(Instant::now() < deadline, "no agent reply");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(reply.trim(), "token=unset");
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    assert!(exit_within(&mut child, BOUND).success());
}
