//! `smolcord run` against hostile neighbours: an agent that reaches for the
//! bridge's memory, a second bridge on the same state dir, special files
//! where state and config files belong, a stop signal during the start.
#![allow(clippy::disallowed_methods)] // a test may make FIFOs and wait on children

use crate::support;

use smolcord_sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::time::Duration;
use support::binary::Smolcord;
use support::wait::{sim_saw, wait_until_blocking};

const BOUND: Duration = Duration::from_secs(20);

fn env(sim: &Simulator, state: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
        ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
        ("SMOLCORD_API_BASE", sim.api_base()),
        ("SMOLCORD_STATE_DIR", state.display().to_string()),
    ]
}

fn start(sim: &Simulator, state: &Path) -> Smolcord {
    Smolcord::spawn(&["run"], env(sim, state))
}

fn wait_identified(sim: &Simulator) {
    sim_saw(sim, "an identify", BOUND, |e| {
        matches!(e, SimEvent::Identified { .. })
    });
}

/// `smolcord run` as the same user as its agent; when that user is root,
/// without `CAP_SYS_PTRACE`, `CAP_SYS_ADMIN` and `CAP_PERFMON` (what a
/// default Docker container gives root; the agent inherits the same): with
/// any of them the kernel lets root read any process's memory, which no
/// process can prevent.
fn start_unprivileged(sim: &Simulator, state: &Path) -> Smolcord {
    let mut command = if rustix::process::geteuid().is_root() {
        let mut command = std::process::Command::new("setpriv");
        command
            .arg("--bounding-set=-sys_ptrace,-sys_admin,-perfmon")
            .arg(env!("CARGO_BIN_EXE_smolcord"));
        command
    } else {
        std::process::Command::new(env!("CARGO_BIN_EXE_smolcord"))
    };
    command.arg("run").env_clear().envs(env(sim, state));
    Smolcord::start(command)
}

#[test]
fn the_agent_cannot_read_the_bridges_environment() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let script = "cat > /dev/null; \
        if seen=$(tr '\\0' ' ' < /proc/$PPID/environ); \
        then echo \"environ=readable $seen\"; else echo environ=refused; fi";
    let config = serde_json::json!({
        "allowed_user_ids": ["42"],
        "agent_cmd": ["/bin/sh", "-c", script],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
    let mut child = start_unprivileged(&sim, state.path());
    wait_identified(&sim);
    let (_, channel) = sim.send_dm(42, "alice", "show me your parent");
    let reply = wait_until_blocking("the agent's reply", BOUND, || {
        sim.messages_in(channel)
            .into_iter()
            .find(|m| m.content.starts_with("environ="))
            .map(|m| m.content)
    });
    assert!(reply.starts_with("environ=refused"), "{reply}");
    assert!(!reply.contains(DEFAULT_SIM_TOKEN), "{reply}");
    child.terminate();
    assert!(child.wait(BOUND).success(), "{}", child.stderr());
}

#[test]
fn a_second_bridge_on_the_same_state_dir_exits_at_once_naming_the_first() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut first = start(&sim, state.path());
    wait_identified(&sim);

    let mut second = start(&sim, state.path());
    let status = second.wait(BOUND);
    let stderr = second.stderr();
    assert_eq!(status.code(), Some(73), "{stderr}");
    let holder = format!("pid {}", first.pid().as_raw_nonzero());
    assert!(
        stderr.contains("another smolcord") && stderr.contains(&holder),
        "{stderr}"
    );
    assert_eq!(sim.stats().totals.identifies, 1, "the second one connected");

    // The tools beside a running bridge take no lock.
    let tool = |args: &[&str]| {
        let mut tool = Smolcord::spawn(
            args,
            [("SMOLCORD_STATE_DIR", state.path().display().to_string())],
        );
        let status = tool.wait(BOUND);
        (status, format!("{}{}", tool.stdout(), tool.stderr()))
    };
    // Answered live by the first (healthy or not: a fresh session has no
    // heartbeat ACK yet).
    let (_, out) = tool(&["status", "--json"]);
    let pid = format!("\"pid\":{}", first.pid().as_raw_nonzero());
    assert!(out.contains(&pid), "{out}");
    let (status, out) = tool(&["failures"]);
    assert!(status.success(), "{out}");
    let (_, dm) = sim.send_dm(77, "stranger", "let me in");
    let offer = wait_until_blocking("a pairing code", BOUND, || {
        sim.messages_in(dm)
            .into_iter()
            .find(|m| m.content.contains("smolcord pair "))
            .map(|m| m.content)
    });
    let at = offer.find("smolcord pair ").unwrap() + 14;
    let (status, out) = tool(&["pair", &offer[at..at + 8]]);
    assert!(status.success() && out.contains("approved"), "{out}");

    first.terminate();
    assert!(first.wait(BOUND).success(), "{}", first.stderr());
    // Released with the holder: the next start runs.
    let mut third = start(&sim, state.path());
    sim_saw(&sim, "a resume", BOUND, |e| {
        matches!(e, SimEvent::Resumed { .. })
    });
    third.terminate();
    assert!(third.wait(BOUND).success(), "{}", third.stderr());
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.expect("mkfifo").success(), "mkfifo {}", path.display());
}

/// `smolcord run ARGS` exits non-zero soon, saying each of `needles`.
fn refused_at_start(sim: &Simulator, state: &Path, args: &[&str], needles: &[&str]) {
    let started = std::time::Instant::now();
    let mut child = Smolcord::spawn(args, env(sim, state));
    let status = child.wait(BOUND);
    let stderr = child.stderr();
    assert!(!status.success(), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "no {needle:?} in: {stderr}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(sim.stats().totals.identifies, 0, "it connected anyway");
}

#[test]
fn a_fifo_or_a_link_to_dev_zero_as_a_state_file_stops_the_start_naming_it() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    mkfifo(&state.path().join("session.json"));
    refused_at_start(&sim, state.path(), &["run"], &["session.json", "a FIFO"]);

    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", state.path().join("runtime.json")).unwrap();
    refused_at_start(
        &sim,
        state.path(),
        &["run"],
        &["runtime.json", "a symbolic link"],
    );

    let state = tempfile::tempdir().unwrap();
    mkfifo(&state.path().join("access.json.bak"));
    refused_at_start(&sim, state.path(), &["run"], &["access.json.bak", "a FIFO"]);
}

#[test]
fn a_fifo_or_dev_zero_as_the_config_or_token_file_stops_the_start_naming_it() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let fifo = state.path().join("config-fifo.json");
    mkfifo(&fifo);
    let shown = fifo.display().to_string();
    refused_at_start(
        &sim,
        state.path(),
        &["run", "--config", &shown],
        &["config", &shown, "is a FIFO"],
    );

    // A link is followed (Kubernetes mounts config as links), to a regular
    // file only.
    let zero = state.path().join("config-zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let shown = zero.display().to_string();
    refused_at_start(
        &sim,
        state.path(),
        &["run", "--config", &shown],
        &["config", &shown, "is a device"],
    );

    let token = state.path().join("token-fifo");
    mkfifo(&token);
    let config = state.path().join("config.json");
    let text = serde_json::json!({ "token_file": token }).to_string();
    std::fs::write(&config, text).unwrap();
    let mut child = Smolcord::spawn(
        &["run"],
        env(&sim, state.path())
            .into_iter()
            .filter(|(name, _)| *name != "DISCORD_TOKEN"),
    );
    let status = child.wait(BOUND);
    let stderr = child.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("token_file") && stderr.contains("is a FIFO"),
        "{stderr}"
    );
}

#[test]
fn a_stop_signal_during_the_start_exits_at_once() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    // A REST API that takes the connection and never answers: the start
    // waits on `GET /gateway/bot` for the shard count (15 s a try, 3 tries).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    silent.set_nonblocking(true).unwrap();
    let api = format!("http://{}/api/v10", silent.local_addr().unwrap());
    let config = state.path().join("config.json");
    std::fs::write(&config, r#"{"shards": "auto"}"#).unwrap();
    let mut vars = env(&sim, state.path());
    vars.retain(|(name, _)| *name != "SMOLCORD_API_BASE");
    vars.push(("SMOLCORD_API_BASE", api));
    let mut child = Smolcord::spawn(&["run"], vars);
    let _held = wait_until_blocking("the start asking the API", BOUND, || silent.accept().ok());
    let asked = std::time::Instant::now();
    child.terminate();
    let status = child.wait(BOUND);
    assert!(status.success(), "{}", child.stderr());
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        asked.elapsed()
    );
    assert!(
        child.stderr().contains("stop signal during the start"),
        "{}",
        child.stderr()
    );
}

#[test]
fn nul_bytes_and_terminal_escapes_in_agent_output_are_not_posted() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let script =
        r"cat > /dev/null; printf 'reply:\000 \033[1;31mred\033[0m \033]0;title\007done\r\n'";
    let config = serde_json::json!({
        "allowed_user_ids": ["42"],
        "agent_cmd": ["/bin/sh", "-c", script],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
    let mut child = start(&sim, state.path());
    wait_identified(&sim);
    let (_, channel) = sim.send_dm(42, "alice", "colours please");
    let reply = wait_until_blocking("the agent's reply", BOUND, || {
        sim.messages_in(channel)
            .into_iter()
            .find(|m| m.content.starts_with("reply:"))
            .map(|m| m.content)
    });
    assert_eq!(reply, "reply: red done");
    child.terminate();
    assert!(child.wait(BOUND).success(), "{}", child.stderr());
}
