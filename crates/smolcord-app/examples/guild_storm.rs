//! Guild storm: `smolcord run` (the real binary, as a child) against the
//! embedded simulator, fed a storm of GUILD_CREATEs on one shard, then a DM.
//! It prints, per run, how late the bridge's heartbeats went out (its own
//! account, `smolcord status --json`, and its "heartbeat sent N ms late"
//! warnings), the simulator's worst gap between two beats, the bridge's CPU
//! time per GUILD_CREATE, its peak RSS (VmHWM), how long `smolcord status`
//! took to answer during the storm, and how long the DM sent right after
//! the storm took to be answered.
//!
//! Three runs, each a fresh bridge, simulator and state dir (GUILDS and
//! DIRECT_MESSAGES intents):
//!
//! - **DM only**: one small guild, then the DM (the baseline);
//! - **2 500 × 50 channels**: the simulator holds 2 500 guilds of 50
//!   channels, so the fresh session's READY is followed by 2 500
//!   GUILD_CREATEs (a full shard), then the DM;
//! - **20 000 × 20 members**: after READY, 20 000 GUILD_CREATEs of one
//!   channel and 20 members each through the simulator's dispatch, then
//!   the DM.
//!
//! Goals: worst gap ≤ 1.1 × interval, no late-beat warning, the DM
//! answered within 2 s. Exits 1 if a goal is missed.
//!
//! ```text
//! cargo build --release --bin smolcord --example guild_storm
//! target/release/examples/guild_storm [--smolcord PATH] [--interval-ms 2000] [--only dm,channels,members]
//! ```
#![allow(clippy::disallowed_methods)] // a benchmark driver: it plays Discord and the supervisor

use serde_json::{json, Value};
use smolcord::protocol::Snowflake;
use smolcord_sim::{SimChannel, SimConfig, SimEvent, SimGuild, Simulator, DEFAULT_SIM_TOKEN};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OWNER: u64 = 1_200_000_000_000_000_010;
/// The bridge's channel directory debounce (its default).
const DIRECTORY_DEBOUNCE: Duration = Duration::from_secs(2);
/// How long a DM may take before the run calls it unanswered.
const DM_BOUND: Duration = Duration::from_secs(60);
/// User-time ticks per second in `/proc/PID/stat` (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Storm {
    DmOnly,
    Channels { guilds: u64, channels: u64 },
    Members { guilds: u64, members: u64 },
}

impl Storm {
    fn label(self) -> String {
        match self {
            Storm::DmOnly => "DM only (1 guild)".into(),
            Storm::Channels { guilds, channels } => {
                format!("{guilds} GUILD_CREATE × {channels} channels (at READY)")
            }
            Storm::Members { guilds, members } => {
                format!("{guilds} GUILD_CREATE × {members} members (after READY)")
            }
        }
    }

    fn guild_creates(self) -> u64 {
        match self {
            Storm::DmOnly => 1,
            Storm::Channels { guilds, .. } | Storm::Members { guilds, .. } => guilds,
        }
    }
}

struct Outcome {
    label: String,
    guild_creates: u64,
    dm_answer: Option<Duration>,
    status_answer: Option<Duration>,
    lateness_max_ms: Option<f64>,
    lateness_p99_ms: Option<f64>,
    late_warnings: u64,
    skipped: u64,
    worst_gap_ms: f64,
    beats: u64,
    connections: u64,
    interval_ms: f64,
    cpu_s: f64,
    hwm_kib: u64,
    directory: String,
}

fn binary(args: &[String]) -> PathBuf {
    if let Some(at) = args.iter().position(|a| a == "--smolcord") {
        return PathBuf::from(args.get(at + 1).expect("--smolcord PATH"));
    }
    let exe = std::env::current_exe().expect("own path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("smolcord"))
        .expect("a target directory");
    if !bin.exists() {
        eprintln!(
            "guild_storm: {} is missing; build it: cargo build --release --bin smolcord --example guild_storm (or pass --smolcord PATH)",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

/// Kills the child on every way out.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the `(comm)` field: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / TICKS_PER_SECOND
}

fn hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn guilds_of(storm: Storm) -> Vec<SimGuild> {
    match storm {
        Storm::Channels { guilds, channels } => (0..guilds)
            .map(|g| SimGuild {
                id: Snowflake::new(1_300_000_000_000_000_000 + g),
                name: format!("guild {g}"),
                channels: (0..channels)
                    .map(|c| SimChannel {
                        id: Snowflake::new(1_310_000_000_000_000_000 + g * 1_000 + c),
                        name: format!("channel-{c}"),
                    })
                    .collect(),
            })
            .collect(),
        _ => vec![SimGuild::example()],
    }
}

/// A GUILD_CREATE as Discord sends one: one text channel and `members`
/// member objects.
fn member_guild(g: u64, members: u64) -> Value {
    let id = 1_400_000_000_000_000_000 + g;
    let members: Vec<Value> = (0..members)
        .map(|m| {
            json!({
                "user": {"id": (1_500_000_000_000_000_000 + g * 100 + m).to_string(),
                         "username": format!("member{m}"), "discriminator": "0",
                         "global_name": format!("Member {m}"), "avatar": null},
                "roles": [], "joined_at": "2026-01-01T00:00:00.000000+00:00",
                "deaf": false, "mute": false, "flags": 0, "nick": null,
            })
        })
        .collect();
    json!({
        "id": id.to_string(), "name": format!("member guild {g}"), "unavailable": false,
        "member_count": members.len(), "large": false, "roles": [], "emojis": [],
        "features": [], "joined_at": "2026-01-01T00:00:00.000000+00:00",
        "channels": [{"id": (1_410_000_000_000_000_000 + g).to_string(), "type": 0,
                      "name": "general", "position": 0}],
        "threads": [], "members": members, "presences": [], "voice_states": [],
    })
}

fn status_json(binary: &Path, state: &Path) -> (Option<Duration>, Option<Value>) {
    let started = Instant::now();
    let out = Command::new(binary)
        .args(["status", "--json"])
        .env_clear()
        .env("SMOLCORD_STATE_DIR", state)
        .stderr(Stdio::null())
        .output();
    let took = started.elapsed();
    match out {
        Ok(out) => {
            let value: Option<Value> = serde_json::from_slice(&out.stdout).ok();
            let answered = value.as_ref().is_some_and(|v| v["pid"].as_u64().is_some());
            (answered.then_some(took), value)
        }
        Err(_) => (None, None),
    }
}

fn run(binary: &Path, storm: Storm, interval: Duration) -> Outcome {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: interval,
        command_limit: u32::MAX,
        guilds: guilds_of(storm),
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().expect("a state dir");
    let config = json!({
        "owner_id": OWNER.to_string(),
        "agent_cmd": ["/bin/sh", "-c", "cat >/dev/null; echo pong"],
        "intents": 1 | (1 << 12),
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).expect("config");
    let log = state.path().join("bridge.log");
    let child = Command::new(binary)
        .arg("run")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_STATE_DIR", state.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).expect("log")))
        .spawn()
        .expect("smolcord run starts");
    let pid = child.id();
    let guard = Guard(child);
    let identified = smol::block_on(sim.wait_for(Duration::from_secs(30), |e| {
        matches!(e, SimEvent::Identified { .. })
    }));
    assert!(identified.is_some(), "no identify within 30 s");
    let cpu_before = cpu_seconds(pid);
    if let Storm::Members { guilds, members } = storm {
        for g in 0..guilds {
            sim.dispatch("GUILD_CREATE", member_guild(g, members));
        }
    }
    // Right after the storm (at READY, the simulator has queued all of it).
    let sent = Instant::now();
    let (_, channel) = sim.send_dm(OWNER, "owner", "ping after the storm");
    let (status_answer, _) = status_json(binary, state.path());
    let dm_answer = loop {
        if !sim.messages_in(channel).is_empty() {
            break Some(sent.elapsed());
        }
        if sent.elapsed() > DM_BOUND {
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let cpu_s = cpu_seconds(pid) - cpu_before;
    // The directory's debounced write, and a few beats more, inside the
    // measured window.
    std::thread::sleep(DIRECTORY_DEBOUNCE + interval * 4);
    let (_, status) = status_json(binary, state.path());
    let hwm = hwm_kib(pid);
    drop(guard);
    let lifetime = status
        .as_ref()
        .map(|s| s["heartbeat"]["lifetime"].clone())
        .unwrap_or(Value::Null);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    if dm_answer.is_none() || std::env::var_os("GUILD_STORM_LOG").is_some() {
        let lines: Vec<&str> = log_text.lines().collect();
        eprintln!(
            "guild_storm: {}: the bridge's log ends:\n{}",
            storm.label(),
            lines[lines.len().saturating_sub(12)..].join("\n")
        );
        eprintln!("status: {status:?}");
        eprintln!("simulator: {:?}", sim.stats().totals);
    }
    let late_warnings = log_text.matches("heartbeat sent").count() as u64;
    let stats = sim.stats();
    let conn = stats.connections.first();
    let directory = std::fs::read(state.path().join("channels.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .map_or("not written".into(), |d| {
            let n = |k: &str| d[k].as_object().map_or(0, |o| o.len());
            format!("{} guilds, {} channels", n("guilds"), n("channels"))
        });
    Outcome {
        label: storm.label(),
        guild_creates: storm.guild_creates(),
        dm_answer,
        status_answer,
        lateness_max_ms: lifetime["lateness"]["max_ms"].as_f64(),
        lateness_p99_ms: lifetime["lateness"]["p99_ms"].as_f64(),
        late_warnings,
        skipped: lifetime["deadlines_skipped"].as_u64().unwrap_or(0),
        // Between two beats: the first "gap" runs from Hello, while the
        // simulator itself is still queueing the storm.
        worst_gap_ms: conn.map_or(0.0, |c| {
            c.beats.iter().skip(1).map(|b| b.gap_ms).fold(0.0, f64::max)
        }),
        connections: stats.totals.connections,
        beats: conn.map_or(0, |c| c.heartbeats),
        interval_ms: interval.as_secs_f64() * 1000.0,
        cpu_s,
        hwm_kib: hwm,
        directory,
    }
}

fn cpu_per_event(o: &Outcome) -> String {
    if o.guild_creates <= 1 {
        return format!("– ({:.2} s CPU)", o.cpu_s);
    }
    format!(
        "{:.1} µs ({:.2} s CPU)",
        o.cpu_s * 1e6 / o.guild_creates as f64,
        o.cpu_s
    )
}

fn ms(d: Option<Duration>, none: &str) -> String {
    d.map_or(none.into(), |d| {
        format!("{:.0} ms", d.as_secs_f64() * 1000.0)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let binary = binary(&args);
    let interval = args
        .iter()
        .position(|a| a == "--interval-ms")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .map_or(Duration::from_millis(2000), Duration::from_millis);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|at| args.get(at + 1).cloned())
        .unwrap_or_else(|| "dm,channels,members".into());
    let mut storms = Vec::new();
    for name in only.split(',') {
        storms.push(match name {
            "dm" => Storm::DmOnly,
            "channels" => Storm::Channels {
                guilds: 2_500,
                channels: 50,
            },
            "members" => Storm::Members {
                guilds: 20_000,
                members: 20,
            },
            other => {
                eprintln!("guild_storm: unknown run `{other}` (dm, channels, members)");
                std::process::exit(2);
            }
        });
    }
    println!(
        "binary {}, heartbeat interval {} ms",
        binary.display(),
        interval.as_millis()
    );
    println!("| run | DM answered after | `status` answered in (during the storm) | beat lateness p99 / max (bridge) | late-beat warnings | deadlines skipped | simulator: worst gap (beats; connections) | CPU per GUILD_CREATE | peak RSS (VmHWM) | channels.json |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut missed = false;
    for storm in storms {
        let o = run(&binary, storm, interval);
        let ratio = o.worst_gap_ms / o.interval_ms;
        missed |= ratio > 1.1
            || o.connections != 1
            || o.late_warnings > 0
            || o.dm_answer.is_none_or(|d| d > Duration::from_secs(2));
        println!(
            "| {} | {} | {} | {} / {} | {} | {} | {:.0} ms = {:.2} × interval ({}; {}) | {} | {:.1} MiB | {} |",
            o.label,
            ms(o.dm_answer, "unanswered after 60 s"),
            ms(o.status_answer, "no answer"),
            o.lateness_p99_ms.map_or("–".into(), |v| format!("{v:.2} ms")),
            o.lateness_max_ms.map_or("–".into(), |v| format!("{v:.2} ms")),
            o.late_warnings,
            o.skipped,
            o.worst_gap_ms,
            ratio,
            o.beats,
            o.connections,
            cpu_per_event(&o),
            o.hwm_kib as f64 / 1024.0,
            o.directory,
        );
    }
    if missed {
        eprintln!("guild_storm: a goal was missed (worst gap ≤ 1.1 × interval, no late-beat warning, DM within 2 s)");
        std::process::exit(1);
    }
}
