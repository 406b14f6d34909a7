//! `smolcord status --json` against its documented schema,
//! `docs/status.schema.json`: the output of a real `smolcord run` against
//! the simulator, and a snapshot with every section filled. The schema
//! forbids fields it does not describe, so a field added without being
//! documented fails here.
//!
//! The validator is `support::schema`.
#![allow(clippy::disallowed_methods)] // a test may block and wait on a child process

use crate::support;

use serde_json::Value;
use smolcord::heartbeat::Heartbeat;
use smolcord::shard::{EndReason, SessionHistory, StartKind};
use smolcord_app::status::StatusSnapshot;
use smolcord_sim::{SimConfig, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::schema::validate;

const BOUND: Duration = Duration::from_secs(30);

fn schema() -> Value {
    support::schema::load("status.schema.json")
}

fn smolcord(args: &[&str], sim: &Simulator, state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_smolcord"));
    command
        .args(args)
        .env_clear()
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_STATE_DIR", state)
        .stdin(Stdio::null());
    command
}

fn status(args: &[&str], sim: &Simulator, state: &Path) -> Output {
    smolcord(args, sim, state)
        .output()
        .expect("smolcord status runs")
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_json_of_a_running_bridge_matches_the_documented_schema() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(200),
        ..SimConfig::default()
    })
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut run = Running(
        smolcord(&["run"], &sim, state.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("smolcord run starts"),
    );
    // Healthy once a heartbeat was ACKed and the snapshot written; the
    // account in the snapshot counts the ACK from the next beat on.
    let deadline = Instant::now() + BOUND;
    let output = loop {
        let output = status(&["status", "--json"], &sim, state.path());
        let acked = serde_json::from_slice::<Value>(&output.stdout)
            .is_ok_and(|json| json["heartbeat"]["lifetime"]["acks"].as_u64() > Some(0));
        if output.status.success() && acked {
            break output;
        }
        assert!(
            Instant::now() < deadline,
            "not healthy within {BOUND:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    let json: Value = serde_json::from_str(&stdout).expect("JSON");
    let errors = validate(&schema(), &json);
    assert!(errors.is_empty(), "{errors:#?}\nin {json:#}");
    assert_eq!(json["healthy"], true);

    // The person's form of the same, through a pipe: plain ASCII charts.
    let text = status(&["status"], &sim, state.path());
    let text = String::from_utf8(text.stdout).expect("UTF-8");
    assert!(text.is_ascii(), "{text}");
    assert!(
        text.contains("heartbeat lateness (sent - scheduled"),
        "{text}"
    );
    assert!(text.lines().all(|line| line.len() <= 80), "{text}");
    assert!(!text.contains('{'), "no JSON blob in the text: {text}");
    assert!(text.contains(" identify "), "the live session: {text}");

    // SIGTERM: the session's end is saved after the gateway closed, so the
    // next start does not find it open ("unrecorded").
    let pid = rustix::process::Pid::from_child(&run.0);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let deadline = Instant::now() + BOUND;
    while run.0.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "smolcord run did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let saved = std::fs::read_to_string(state.path().join("session.json")).expect("session.json");
    let saved: Value = serde_json::from_str(&saved).expect("JSON");
    let sessions = saved["history"].as_array().expect("a history");
    assert_eq!(sessions.len(), 1, "{saved:#}");
    assert_eq!(sessions[0]["start"], "identify");
    assert_eq!(sessions[0]["end"]["cause"], "shutdown", "{saved:#}");

    // Right after the stop, `status` says so: not running, exit 3, the
    // session ended by the shutdown.
    let output = status(&["status", "--json"], &sim, state.path());
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let errors = validate(&schema(), &json);
    assert!(errors.is_empty(), "{errors:#?}\nin {json:#}");
    assert_eq!(json["connected"], false, "{json:#}");
    assert_eq!(json["healthy"], false, "{json:#}");
    assert_eq!(json["stopped"]["why"], "shutdown", "{json:#}");
    let last = json["sessions"].as_array().and_then(|s| s.last()).cloned();
    assert_eq!(
        last.unwrap_or_default()["end"]["cause"],
        "shutdown",
        "{json:#}"
    );
    let text = status(&["status"], &sim, state.path());
    assert_eq!(text.status.code(), Some(3));
    let text = String::from_utf8(text.stdout).expect("UTF-8");
    assert!(text.contains("stopped cleanly"), "{text}");
}

#[test]
fn a_snapshot_with_every_section_filled_matches_the_schema() {
    let hello = Instant::now();
    let mut hb = Heartbeat::new(hello, Duration::from_millis(100), 0.0);
    for n in 0..50u32 {
        let sent =
            hello + Duration::from_millis(100) * n + Duration::from_micros(u64::from(n) * 40);
        hb.on_sent(sent);
        hb.on_ack(sent + Duration::from_millis(30 + u64::from(n)));
    }
    hb.on_zombie();
    let mut sessions = SessionHistory::default();
    let ends = [
        EndReason::Reconnect,
        EndReason::InvalidSession { resumable: true },
        EndReason::InvalidSession { resumable: false },
        EndReason::Closed { code: 4000 },
        EndReason::Closed { code: 4004 },
        EndReason::Zombie,
        EndReason::Dropped,
        EndReason::Malformed,
        EndReason::Shutdown,
    ];
    let now = 1_700_000_000_000;
    for (n, end) in ends.into_iter().enumerate() {
        let at = now - 100_000 + n as u64 * 10_000;
        sessions.started(StartKind::Resume, at);
        sessions.established(at + 10);
        sessions.ended(end, 5, Duration::from_millis(2), at + 5_000);
    }
    sessions.started(StartKind::Identify, now - 5_000);
    sessions.close_unrecorded();
    sessions.started(StartKind::Identify, now - 1_000);
    let counters = smolcord_app::bridge::BridgeCounters::default();
    let account = smolcord_app::status::HeartbeatAccount::from(hb.account());
    let snapshot = StatusSnapshot {
        written_unix_ms: now,
        pid: 1,
        shard: [0, 1],
        connected: true,
        user: Some("bot".into()),
        sessions_started: 2,
        resumes: 9,
        heartbeat_interval_ms: Some(100),
        last_ready_unix_ms: Some(now - 1_000),
        last_resumed_unix_ms: None,
        last_ack_unix_ms: Some(now - 10),
        duplicates_dropped: 1,
        gaps: 0,
        heartbeat: account,
        loop_stalls: serde_json::from_value(
            serde_json::json!({"bridge-agent": {"count": 1, "worst_ms": 70.5, "total_ms": 70.5}}),
        )
        .unwrap(),
        bridge: Some(counters.snapshot()),
        sessions,
        shards: (0..2)
            .map(|id| smolcord_app::status::ShardLine {
                shard: [id, 2],
                connected: true,
                sessions_started: 1,
                resumes: 0,
                heartbeat_interval_ms: Some(100),
                last_ack_unix_ms: Some(now - 10),
            })
            .collect(),
        stopped: Some(smolcord_app::status::Stopped {
            at_unix_ms: now,
            why: smolcord_app::status::StopCause::Shutdown,
        }),
    };
    let json = snapshot.report_json(now);
    let errors = validate(&schema(), &json);
    assert!(errors.is_empty(), "{errors:#?}\nin {json:#}");
    // Every end cause was exercised.
    let causes: Vec<&str> = json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["end"]["cause"].as_str())
        .collect();
    assert_eq!(causes.len(), 10, "{causes:?}");
}

#[test]
fn the_validator_catches_what_the_schema_forbids() {
    let schema = schema();
    let good = StatusSnapshot {
        bridge: Some(smolcord_app::bridge::BridgeCounters::default().snapshot()),
        heartbeat: (&smolcord::heartbeat::Account::default()).into(),
        loop_stalls: Default::default(),
        ..StatusSnapshot::default()
    }
    .report_json(0);
    assert_eq!(validate(&schema, &good), Vec::<String>::new());
    let mut extra = good.clone();
    extra["undocumented"] = true.into();
    assert_eq!(
        validate(&schema, &extra),
        ["$: field `undocumented` is not documented"]
    );
    let mut wrong = good.clone();
    wrong["heartbeat"]["lifetime"]["acks"] = "many".into();
    assert_eq!(
        validate(&schema, &wrong),
        ["$.heartbeat.lifetime.acks: \"many\" is not of type [\"integer\"]"]
    );
    let mut missing = good;
    missing["sessions"] = serde_json::json!([{"start": "dial", "started_unix_ms": 1}]);
    let errors = validate(&schema, &missing);
    assert!(
        errors.iter().any(|e| e.contains("is not one of")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("missing required field `end`")),
        "{errors:?}"
    );
}
