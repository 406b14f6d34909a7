//! `smolcord run` against hostile neighbours: an agent that reaches for the
//! bridge's memory, a second bridge on the same state dir, special files
//! where state and config files belong, a stop signal during the start.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods)] // a test may make FIFOs and wait on children

mod support;

use smolcord::sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
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
