//! The real TLS path, as Discord is reached: the simulator serves `wss://`
//! and `https://` with a leaf from a test CA; smolcord trusts that CA as an
//! extra root (besides Mozilla's) and connects, identifies, resumes, posts
//! and downloads over TLS — and refuses the same server without the CA.
#![allow(clippy::disallowed_methods)] // tests may block (files, processes)

use crate::support;

use smolcord::rest::{MessageDraft, RestClient};
use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::time::Duration;
use support::binary::Smolcord;
use support::shard::*;
use support::tls::{test_ca, trust_test_ca};
use support::wait::sim_saw;

const BOUND: Duration = Duration::from_secs(20);

fn tls_sim() -> Simulator {
    let sim = Simulator::start(SimConfig {
        tls: Some(test_ca().sim_tls.clone()),
        command_limit: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    assert!(sim.gateway_url().starts_with("wss://127.0.0.1:"));
    assert!(sim.api_base().starts_with("https://127.0.0.1:"));
    sim
}

fn wait_for(sim: &Simulator, what: &str, pred: impl FnMut(&SimEvent) -> bool) -> SimEvent {
    sim_saw(sim, what, BOUND, pred)
}

#[test]
fn the_shard_identifies_and_resumes_over_wss() {
    trust_test_ca();
    let sim = tls_sim();
    let config = shard_config(&sim);
    let resume_url = run_local(config, |handle, _| {
        let sim = sim.clone();
        async move {
            let ready = wait_dispatch(&handle, "READY").await;
            let ready: serde_json::Value = ready.data().expect("READY decodes");
            let resume_url = ready["resume_gateway_url"].clone();
            sim.fault(Fault::Reconnect);
            wait_dispatch(&handle, "RESUMED").await;
            resume_url
        }
    });
    assert_eq!(resume_url, sim.resume_gateway_url().as_str());
    assert!(sim.resume_gateway_url().starts_with("wss://"));
    wait_for(
        &sim,
        "the resume on /resume",
        |e| matches!(e, SimEvent::Connected { path, .. } if path == "/resume"),
    );
    let totals = sim.stats().totals;
    assert_eq!((totals.identifies, totals.resumes), (1, 1), "{totals:?}");
}

#[test]
fn rest_posts_and_downloads_over_https() {
    trust_test_ca();
    let sim = tls_sim();
    let rest = RestClient::new(&sim.api_base(), sim.config().token.clone());
    smol::block_on(async {
        let gateway = rest
            .gateway_bot()
            .await
            .expect("GET /gateway/bot over https");
        assert_eq!(gateway.url, sim.gateway_url());
        let channel = sim.dm_channel_of(42);
        let posted = rest
            .create_message(channel, &MessageDraft::text("over TLS"))
            .await
            .expect("POST a message over https");
        assert_eq!(posted.content, "over TLS");

        let note = sim.send_voice_dm(42, "alice", b"OggS-tls".to_vec(), Duration::from_secs(1));
        assert!(note.url.starts_with("https://"), "{}", note.url);
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("voice.ogg");
        rest.download(&note.url, 1024, &dest)
            .await
            .expect("download over https");
        assert_eq!(std::fs::read(&dest).unwrap(), b"OggS-tls");
    });
    let messages = sim.messages_in(sim.dm_channel_of(42));
    assert_eq!(messages.len(), 1, "{messages:?}");
}

/// The binary, as users run it: without the CA it cannot connect (the
/// certificate is checked); with `SMOLCORD_CA_FILE` it identifies, answers
/// a DM over https, and after a restart resumes over wss.
#[test]
fn the_binary_trusts_the_ca_file_and_nothing_else() {
    let sim = tls_sim();
    let state = tempfile::tempdir().unwrap();
    let ca_file = state.path().join("test-ca.pem");
    std::fs::write(&ca_file, &test_ca().ca_pem).unwrap();
    let config = serde_json::json!({
        "allowed_user_ids": ["42"],
        "agent_cmd": ["/bin/sh", "-c", "cat > /dev/null; echo pong"],
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).unwrap();
    let env = |ca: Option<&std::path::Path>| {
        let mut env = vec![
            ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
            ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
            ("SMOLCORD_API_BASE", sim.api_base()),
            ("SMOLCORD_STATE_DIR", state.path().display().to_string()),
        ];
        if let Some(ca) = ca {
            env.push(("SMOLCORD_CA_FILE", ca.display().to_string()));
        }
        env
    };

    // Without the CA: Mozilla's roots do not know the test CA.
    let untrusting = Smolcord::spawn(&["run"], env(None));
    let stderr = untrusting.wait_for_stderr("UnknownIssuer", BOUND);
    assert!(stderr.contains("invalid peer certificate"), "{stderr}");
    drop(untrusting);
    assert_eq!(sim.stats().totals.identifies, 0);

    let mut first = Smolcord::spawn(&["run"], env(Some(&ca_file)));
    wait_for(&sim, "an identify over wss", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    sim.send_dm(42, "alice", "ping");
    wait_for(
        &sim,
        "the reply posted over https",
        |e| matches!(e, SimEvent::Rest { method, path, .. } if method == "POST" && path.ends_with("/messages")),
    );
    first.terminate();
    assert!(first.wait(BOUND).success(), "{}", first.stderr());
    assert!(
        first
            .stderr()
            .contains("trusting 1 extra CA certificate(s)"),
        "{}",
        first.stderr()
    );

    let mut second = Smolcord::spawn(&["run"], env(Some(&ca_file)));
    wait_for(&sim, "a resume over wss", |e| {
        matches!(e, SimEvent::Resumed { .. })
    });
    second.terminate();
    assert!(second.wait(BOUND).success(), "{}", second.stderr());
    assert_eq!(sim.stats().totals.identifies, 1, "the restart identified");
}

/// `smolcord run` with `SMOLCORD_CA_FILE=ca_file`: its exit code and stderr.
fn run_with_ca_file(ca_file: &std::path::Path) -> (Option<i32>, String) {
    let state = tempfile::tempdir().unwrap();
    let mut child = Smolcord::spawn(
        &["run"],
        [
            ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
            ("SMOLCORD_STATE_DIR", state.path().display().to_string()),
            ("SMOLCORD_CA_FILE", ca_file.display().to_string()),
        ],
    );
    let status = child.wait(BOUND);
    (status.code(), child.stderr())
}

#[test]
fn a_ca_file_without_a_certificate_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("not-a-ca.pem");
    std::fs::write(&ca_file, "hello\n").unwrap();
    let (code, stderr) = run_with_ca_file(&ca_file);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "extra_ca_file (or SMOLCORD_CA_FILE): CA file {}: no `BEGIN CERTIFICATE` block found",
            ca_file.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_ca_file_over_the_cap_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("huge.pem");
    let cap = smolcord::transport::tls::MAX_CA_FILE_BYTES;
    std::fs::write(&ca_file, vec![b'a'; cap as usize + 1]).unwrap();
    let (code, stderr) = run_with_ca_file(&ca_file);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("is larger than {cap} bytes")),
        "{stderr}"
    );
}

/// `smolcord sim --tls-cert --tls-key` serves wss:// and https:// with the
/// given certificate: the bridge, trusting its CA, gets to READY.
#[test]
fn the_sim_command_serves_tls_from_pem_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("leaf.pem"), dir.path().join("leaf.key"));
    std::fs::write(&cert, &test_ca().leaf_pem).unwrap();
    std::fs::write(&key, &test_ca().leaf_key_pem).unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &test_ca().ca_pem).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let args = ["sim", "--listen", &listen, "--tls-cert"];
    let sim = Smolcord::spawn(
        &[
            &args[..],
            &[cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()],
        ]
        .concat(),
        [("RUST_LOG", "info")],
    );
    let serving = format!("gateway  wss://{listen}");
    support::wait::poll_until(BOUND, || sim.stdout().contains(&serving).then_some(()))
        .unwrap_or_else(|| panic!("no {serving:?} from `smolcord sim`: {}", sim.stdout()));

    let state = tempfile::tempdir().unwrap();
    let bridge = Smolcord::spawn(
        &["run"],
        [
            ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
            ("SMOLCORD_GATEWAY_URL", format!("wss://{listen}")),
            ("SMOLCORD_API_BASE", format!("https://{listen}/api/v10")),
            ("SMOLCORD_STATE_DIR", state.path().display().to_string()),
            ("SMOLCORD_CA_FILE", ca_file.display().to_string()),
        ],
    );
    bridge.wait_for_stderr("ready as", BOUND);
}

#[test]
fn the_sim_command_wants_both_tls_files() {
    let mut sim = Smolcord::spawn(&["sim", "--tls-cert", "leaf.pem"], [("RUST_LOG", "info")]);
    assert_eq!(sim.wait(BOUND).code(), Some(2));
    assert!(
        sim.stderr()
            .contains("--tls-cert and --tls-key go together"),
        "{}",
        sim.stderr()
    );
}
