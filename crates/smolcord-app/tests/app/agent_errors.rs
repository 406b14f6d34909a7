//! The agent's errors where the operator looks: an agent that prints pages
//! of progress, then "model not found", and exits 3. The end of its stderr
//! is in the log's warning and in `smolcord failures` (on a line of its
//! own, so the journal's 400-byte message cut cannot lose it), without
//! escape sequences and without a token it happened to print.
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use crate::support;

use smolcord_sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::time::Duration;
use support::binary::Smolcord;
use support::wait::{sim_saw, wait_until_blocking};

const BOUND: Duration = Duration::from_secs(30);

fn smolcord(args: &[&str], sim: &Simulator, state: &Path) -> Smolcord {
    Smolcord::spawn(
        args,
        [
            ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
            ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
            ("SMOLCORD_API_BASE", sim.api_base()),
            ("SMOLCORD_STATE_DIR", state.display().to_string()),
        ],
    )
}

#[test]
fn an_agent_that_fails_says_why_in_the_log_and_in_failures() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    // Noise first (well past what is kept), a token, a colour, then the reason.
    let script = format!(
        "cat > /dev/null; seq 1 5000 >&2; echo 'auth {DEFAULT_SIM_TOKEN}' >&2; \
         printf '\\033[31merror:\\033[0m model not found\\n' >&2; exit 3"
    );
    let config = serde_json::json!({
        "allowed_user_ids": ["42"],
        "agent_cmd": ["/bin/sh", "-c", script],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
    let mut bridge = smolcord(&["run"], &sim, state.path());
    sim_saw(&sim, "an identify", BOUND, |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    let (_, channel) = sim.send_dm(42, "alice", "summarise my day");
    let notice = wait_until_blocking("the failure notice", BOUND, || {
        sim.messages_in(channel)
            .into_iter()
            .find(|m| m.content.starts_with("Sorry, the agent failed"))
            .map(|m| m.content)
    });
    assert_eq!(notice, "Sorry, the agent failed (exited with code 3).");

    let log = bridge.wait_for_stderr("model not found", BOUND);
    let warning = log
        .lines()
        .find(|l| l.contains("exited with code 3"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains("its stderr ends: …")
            && warning.ends_with("⏎ 5000 ⏎ auth <redacted> ⏎ error: model not found"),
        "{warning}"
    );

    // The journal is written in the background: ask until it is there.
    let failures = wait_until_blocking("the failure in the journal", BOUND, || {
        let mut cli = smolcord(&["failures"], &sim, state.path());
        assert!(cli.wait(BOUND).success(), "{}", cli.stderr());
        Some(cli.stdout()).filter(|out| out.contains("model not found"))
    });
    let lines: Vec<&str> = failures.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("agent") && l.contains("[3]: exited with code 3"))
        .unwrap_or_else(|| panic!("no agent failure:\n{failures}"));
    let stderr = lines.get(at + 1).copied().unwrap_or_default();
    assert!(stderr.trim_start().starts_with("stderr: …"), "{failures}");
    assert!(stderr.ends_with("⏎ error: model not found"), "{failures}");
    for text in [&log, &failures] {
        assert!(
            !text.contains(DEFAULT_SIM_TOKEN),
            "the token leaked:\n{text}"
        );
        assert!(
            !text.contains('\u{1b}'),
            "an escape reached the operator:\n{text}"
        );
    }
    bridge.terminate();
    assert!(bridge.wait(BOUND).success(), "{}", bridge.stderr());
}

#[test]
fn a_command_whose_program_does_not_exist_stops_the_start_naming_the_key() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    for (key, program, said) in [
        (
            "agent_cmd",
            "/nonexistent/agent",
            "agent_cmd: `/nonexistent/agent` does not exist",
        ),
        (
            "transcribe_cmd",
            "whisper-nowhere",
            "transcribe_cmd: `whisper-nowhere` not found in PATH",
        ),
    ] {
        let state = tempfile::tempdir().unwrap();
        let config = serde_json::json!({ key: [program, "--flag"] });
        std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
        let mut bridge = smolcord(&["run"], &sim, state.path());
        let status = bridge.wait(BOUND);
        let stderr = bridge.stderr();
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
    }
    // Nothing got as far as the gateway.
    assert_eq!(sim.stats().totals.identifies, 0);
}
