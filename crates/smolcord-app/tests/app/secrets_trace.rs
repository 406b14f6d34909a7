//! The token never leaks at `RUST_LOG=trace`: the real binary runs a whole
//! session over TLS (identify, a DM answered over REST, a reconnect that
//! resumes, SIGTERM), and neither its output nor any file it leaves in the
//! state dir contains the token. The demo is checked the same way.
#![allow(clippy::disallowed_methods)] // tests may block (files, processes)

use crate::support;

use smolcord::token::Token;
use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use support::binary::{files_under, Smolcord};
use support::tls::test_ca;
use support::wait::sim_saw;

const SECRET: &str = "MTEwMDAw.trace-level-secret.DoNotLogMe";
const BOUND: Duration = Duration::from_secs(30);

fn wait_for(sim: &Simulator, what: &str, pred: impl FnMut(&SimEvent) -> bool) {
    sim_saw(sim, what, BOUND, pred);
}

/// Fails naming every place `needle` appears: output streams and files.
fn assert_nowhere(needle: &str, outputs: &[(&str, String)], dir: &Path) {
    let mut leaks: Vec<String> = outputs
        .iter()
        .filter(|(_, text)| text.contains(needle))
        .map(|(name, text)| {
            let line = text.lines().find(|l| l.contains(needle)).unwrap_or("");
            format!("{name}: {line}")
        })
        .collect();
    for file in files_under(dir) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        if String::from_utf8_lossy(&bytes).contains(needle) {
            leaks.push(format!("file {}", file.display()));
        }
    }
    assert!(leaks.is_empty(), "the token leaked:\n{}", leaks.join("\n"));
}

#[test]
fn a_trace_level_session_leaks_the_token_nowhere() {
    let sim = Simulator::start(SimConfig {
        token: Token::new(SECRET).unwrap(),
        tls: Some(test_ca().sim_tls.clone()),
        ..SimConfig::default()
    })
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    // The token file lives outside the state dir (it is the one file
    // allowed to hold the token), as in /etc/smolcord.
    let etc = tempfile::tempdir().unwrap();
    let ca_file = etc.path().join("ca.pem");
    std::fs::write(&ca_file, &test_ca().ca_pem).unwrap();
    let token_file = etc.path().join("token");
    std::fs::write(&token_file, SECRET).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = serde_json::json!({
        "token_file": token_file,
        "extra_ca_file": ca_file,
        "allowed_user_ids": ["42"],
        "agent_cmd": ["/bin/sh", "-c", "cat > /dev/null; echo pong"],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();

    let mut bot = Smolcord::spawn(
        &["run"],
        [
            ("RUST_LOG", "trace".to_owned()),
            ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
            ("SMOLCORD_API_BASE", sim.api_base()),
            ("SMOLCORD_STATE_DIR", state.path().display().to_string()),
        ],
    );
    wait_for(&sim, "an identify", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    sim.send_dm(42, "alice", "ping");
    wait_for(
        &sim,
        "the reply",
        |e| matches!(e, SimEvent::Rest { method, path, .. } if method == "POST" && path.ends_with("/messages")),
    );
    sim.fault(Fault::Reconnect);
    wait_for(&sim, "a resume (its frame carries the token)", |e| {
        matches!(e, SimEvent::Resumed { .. })
    });
    bot.terminate();
    assert!(bot.wait(BOUND).success(), "{}", bot.stderr());

    let (stdout, stderr) = (bot.stdout(), bot.stderr());
    assert_nowhere(
        SECRET,
        &[("stdout", stdout), ("stderr", stderr.clone())],
        state.path(),
    );
    // Everything smolcord wrote is private (config.json is the test's own).
    let files = files_under(state.path());
    assert!(
        files.len() > 2,
        "too few files to prove anything: {files:?}"
    );
    for file in files.iter().filter(|f| !f.ends_with("config.json")) {
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} has mode {mode:o}", file.display());
    }
    // The wire-level crates did log (so RUST_LOG reached them), below trace.
    // rustls is built without its `logging` feature: it says nothing.
    for expected in [" DEBUG tungstenite", " DEBUG ureq"] {
        assert!(
            stderr.contains(expected),
            "no {expected:?} line: the run proves nothing"
        );
    }
    assert!(
        !stderr.contains(" TRACE tungstenite") && !stderr.contains(" TRACE ureq"),
        "a capped crate logged at trace"
    );
}

#[test]
fn a_token_file_others_can_read_gets_a_warning() {
    let state = tempfile::tempdir().unwrap();
    let token_file = state.path().join("token");
    std::fs::write(&token_file, "some-token").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    // A gateway nobody listens on: the run gets past reading the token,
    // then fails to connect; the warning is what matters here.
    std::fs::write(
        state.path().join("config.json"),
        serde_json::json!({"token_file": "token", "gateway_url": "ws://127.0.0.1:9"}).to_string(),
    )
    .unwrap();
    let bot = Smolcord::spawn(
        &["run"],
        [("SMOLCORD_STATE_DIR", state.path().display().to_string())],
    );
    let expected = format!(
        "token_file {}: readable by others (mode 644); `chmod 600` it",
        token_file.display()
    );
    let stderr = bot.wait_for_stderr(&expected, BOUND);
    assert!(!stderr.contains("some-token"), "{stderr}");
}

#[test]
fn the_demo_at_trace_level_leaks_no_token() {
    let home = tempfile::tempdir().unwrap();
    let mut demo = Smolcord::spawn(
        &["demo"],
        [
            ("RUST_LOG", "trace".to_owned()),
            ("HOME", home.path().display().to_string()),
            ("TMPDIR", home.path().display().to_string()),
        ],
    );
    let status = demo.wait(Duration::from_secs(120));
    assert!(status.success(), "{}", demo.stderr());
    for expected in [" DEBUG tungstenite", " DEBUG ureq"] {
        assert!(demo.stderr().contains(expected), "no {expected:?} line");
    }
    assert_nowhere(
        DEFAULT_SIM_TOKEN,
        &[("stdout", demo.stdout()), ("stderr", demo.stderr())],
        home.path(),
    );
}
