//! `smolcord status --json` against its documented schema,
//! `docs/status.schema.json`: the output of a real `smolcord run` against
//! the simulator, and a snapshot with every section filled. The schema
//! forbids fields it does not describe, so a field added without being
//! documented fails here.
//!
//! The validator is a small hand-written subset of JSON Schema (the
//! keywords the file uses); a keyword it does not know fails the test
//! rather than being skipped.
#![allow(clippy::disallowed_methods)] // a test may block and wait on a child process

use serde_json::Value;
use smolcord::heartbeat::Heartbeat;
use smolcord::shard::{EndReason, SessionHistory, StartKind};
use smolcord_app::status::StatusSnapshot;
use smolcord_sim::{SimConfig, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(30);

fn schema() -> Value {
    let path = smolcord_testkit::repo_root().join("docs/status.schema.json");
    let text = std::fs::read_to_string(&path).expect("docs/status.schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

/// The errors of `value` against `schema` (empty when it conforms).
fn validate(root: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(root, root, value, "$", &mut errors);
    errors
}

fn check(root: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        panic!("schema at {at} is not an object");
    };
    for (keyword, rule) in schema {
        match keyword.as_str() {
            "$schema" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or_else(|| panic!("unsupported $ref {rule} at {at}"));
                let target = &root["$defs"][name];
                assert!(!target.is_null(), "$ref to a missing definition {name}");
                check(root, target, value, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type rule at {at}"),
                };
                if !types.iter().any(|t| is_type(value, t)) {
                    errors.push(format!("{at}: {value} is not of type {types:?}"));
                }
            }
            "enum" => {
                if !rule
                    .as_array()
                    .is_some_and(|options| options.contains(value))
                {
                    errors.push(format!("{at}: {value} is not one of {rule}"));
                }
            }
            "anyOf" => {
                let options = rule.as_array().expect("anyOf is a list");
                let fits = options.iter().any(|option| {
                    let mut sub = Vec::new();
                    check(root, option, value, at, &mut sub);
                    sub.is_empty()
                });
                if !fits {
                    errors.push(format!("{at}: {value} matches none of anyOf"));
                }
            }
            "required" => {
                if let Some(object) = value.as_object() {
                    for name in rule.as_array().expect("required is a list") {
                        let name = name.as_str().expect("required names are strings");
                        if !object.contains_key(name) {
                            errors.push(format!("{at}: missing required field `{name}`"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(object) = value.as_object() {
                    for (name, sub) in rule.as_object().expect("properties is an object") {
                        if let Some(field) = object.get(name) {
                            check(root, sub, field, &format!("{at}.{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                let Some(object) = value.as_object() else {
                    continue;
                };
                let known = schema.get("properties").and_then(Value::as_object);
                for (name, field) in object {
                    if known.is_some_and(|k| k.contains_key(name)) {
                        continue;
                    }
                    match rule {
                        Value::Bool(false) => {
                            errors.push(format!("{at}: field `{name}` is not documented"))
                        }
                        Value::Bool(true) => {}
                        sub => check(root, sub, field, &format!("{at}.{name}"), errors),
                    }
                }
            }
            "items" => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    check(root, rule, item, &format!("{at}[{i}]"), errors);
                }
            }
            "minItems" | "maxItems" => {
                if let Some(items) = value.as_array() {
                    let bound = rule.as_u64().expect("an item bound") as usize;
                    let ok = if keyword == "minItems" {
                        items.len() >= bound
                    } else {
                        items.len() <= bound
                    };
                    if !ok {
                        errors.push(format!(
                            "{at}: {} items breaks {keyword} {bound}",
                            items.len()
                        ));
                    }
                }
            }
            "minimum" | "maximum" => {
                if let (Some(n), Some(bound)) = (value.as_f64(), rule.as_f64()) {
                    let ok = if keyword == "minimum" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    if !ok {
                        errors.push(format!("{at}: {n} breaks {keyword} {bound}"));
                    }
                }
            }
            other => panic!("the test's validator does not know the keyword `{other}` (at {at})"),
        }
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        other => panic!("unknown type {other}"),
    }
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
    let account = serde_json::to_value(hb.account()).unwrap();
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
        loop_stalls: serde_json::json!({"bridge-agent": {"count": 1, "worst_ms": 70.5, "total_ms": 70.5}}),
        bridge: counters.to_json(),
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
        bridge: smolcord_app::bridge::BridgeCounters::default().to_json(),
        heartbeat: serde_json::to_value(smolcord::heartbeat::Account::default()).unwrap(),
        loop_stalls: serde_json::json!({}),
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
