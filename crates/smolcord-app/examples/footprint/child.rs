//! A client as a child process against an in-process simulator: idle RSS
//! and threads once connected, wake-ups over an idle window, RSS after a
//! burst of MESSAGE_CREATE events, and how it takes SIGTERM.

use crate::procfs::{self, Status};
use crate::shard_client::BlockOn;
use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Which program runs as the child.
pub enum Client {
    /// `smolcord run` (the bridge) from this binary path.
    Bridge(PathBuf),
    /// `footprint --shard-client` (the library's shard alone).
    ShardOnly(PathBuf, BlockOn),
    /// The twilight-gateway idle peer (scripts/compat/twilight-idle).
    Twilight(PathBuf),
}

/// What to do.
pub struct Plan {
    /// The simulator's heartbeat interval (41.25 s like Discord's).
    pub heartbeat: Duration,
    /// The idle window for wake-ups.
    pub window: Duration,
    /// MESSAGE_CREATE events to inject afterwards.
    pub events: u64,
    /// Agent subprocesses to run at once in the bridge (0: skip).
    pub subprocesses: u32,
    /// More keys for the bridge's `config.json` (a JSON object).
    pub config_json: Option<String>,
    /// Author them as the bot itself (the bridge ignores its own messages)
    /// rather than as a stranger (who gets a pairing reply).
    pub from_self: bool,
    /// More environment for smolcord's children (e.g. `GLIBC_TUNABLES`).
    pub child_env: Vec<(String, String)>,
    /// How often the idle windows sample every thread.
    pub sample_every: Duration,
    /// How long the simulator holds back each frame once READY: a network
    /// round trip, so a heartbeat's ACK arrives after the client went back
    /// to sleep, as from Discord (on loopback it would arrive at once).
    pub rtt: Duration,
}

/// What was measured.
pub struct Report {
    /// Once READY, first heartbeat ACKed, settled.
    pub idle: Status,
    /// Threads alive when idle, by name.
    pub idle_threads: String,
    /// Whether it runs with a dynamic loader (a glibc build), not static.
    pub dynamic: bool,
    /// After the events were all read, settled.
    pub after_events: Status,
    /// Threads then.
    pub after_threads: String,
    /// How long until the client had read all the events.
    pub events_elapsed: Duration,
    /// The subprocess phase: (peak RSS sampled, KiB; most children at
    /// once; how long), if it ran.
    pub subprocesses: Option<Result<(u64, usize, Duration), String>>,
    /// Idle again after the subprocesses (the blocking pool and the
    /// subprocess timers have been used): wake-ups/min, per thread, threads
    /// alive at the end, RSS.
    pub idle_after_work: Option<Result<AfterWork, String>>,
    /// SIGTERM to exit, and how it exited (`None`: killed after 10 s).
    pub stop: (Duration, Option<ExitStatus>),
}

/// The idle window after the subprocess phase.
pub struct AfterWork {
    /// Wake-ups per minute, all threads.
    pub per_min: f64,
    /// ... per thread family, per minute.
    pub by_thread: String,
    /// Threads alive at the end.
    pub threads: String,
    /// RSS then, and its anonymous part.
    pub rss_kib: u64,
    pub anon_kib: u64,
}

/// Kills the child on every way out.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// After READY and between steps: long enough for the blocking pool's idle
/// threads to exit (they linger 0.5 s) and a status write to finish.
const SETTLE: Duration = Duration::from_secs(3);

fn wait_event(
    sim: &Simulator,
    timeout: Duration,
    what: &str,
    pred: impl FnMut(&SimEvent) -> bool,
) -> Result<SimEvent, String> {
    smol::block_on(sim.wait_for(timeout, pred))
        .ok_or_else(|| format!("no {what} within {timeout:?}"))
}

fn beats_of(sim: &Simulator, conn: u64) -> u64 {
    sim.stats()
        .connections
        .iter()
        .find(|c| c.id == conn)
        .map_or(0, |c| c.heartbeats)
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// The first user of the subprocess phase (the bridge's owner; the others
/// follow it and are allowed users).
const OWNER: u64 = 900_000_000_000_000_042;

/// The bridge's config.json: the owner and an agent command that holds a
/// subprocess for two seconds, `plan.subprocesses` at once; then the
/// caller's `--config` keys on top.
fn bridge_config(plan: &Plan) -> Result<String, String> {
    // One user per subprocess: the bridge runs one task per user at a time.
    let allowed: Vec<String> = (1..u64::from(plan.subprocesses.max(1)))
        .map(|i| (OWNER + i).to_string())
        .collect();
    let mut config = serde_json::json!({
        "owner_id": OWNER.to_string(),
        "allowed_user_ids": allowed,
        "agent_cmd": ["/bin/sh", "-c", "cat >/dev/null; sleep 2; echo done"],
        "agent_concurrency": plan.subprocesses.max(1),
    });
    if let Some(extra) = &plan.config_json {
        let extra: serde_json::Value =
            serde_json::from_str(extra).map_err(|e| format!("--config is not JSON: {e}"))?;
        let (Some(base), Some(extra)) = (config.as_object_mut(), extra.as_object()) else {
            return Err("--config must be a JSON object".into());
        };
        base.extend(extra.clone());
    }
    Ok(config.to_string())
}

/// Child processes of `pid` (its threads' `children` lists).
fn children(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .map(|list| list.split_whitespace().count())
        .sum()
}

/// The subprocess phase: a DM from each of `n` users, each running the agent
/// command; samples RSS and children every 20 ms until they are all done.
fn subprocess_phase(sim: &Simulator, pid: u32, n: u32) -> Result<(u64, usize, Duration), String> {
    let started = Instant::now();
    for i in 0..u64::from(n) {
        sim.send_dm(OWNER + i, &format!("user{i}"), "say done");
    }
    let (mut peak_kib, mut most, mut idle_since) = (0, 0, None::<Instant>);
    while started.elapsed() < Duration::from_secs(60) {
        let status = procfs::status(pid).map_err(|e| e.to_string())?;
        peak_kib = peak_kib.max(status.rss_kib);
        let now = children(pid);
        most = most.max(now);
        if most > 0 && now == 0 {
            // Done when none has run for a second (a late one would show).
            if idle_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(1) {
                return Ok((peak_kib, most, started.elapsed()));
            }
        } else {
            idle_since = None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "subprocesses still running after 60 s (at most {most} at once)"
    ))
}

/// A client running as a child against its own simulator, READY and past
/// its first heartbeat.
pub struct Running {
    /// Its simulator (the child's gateway and REST).
    pub sim: Simulator,
    /// Its state dir (removed on drop).
    _state: tempfile::TempDir,
    /// The process (killed on drop).
    child: Guard,
    /// Its pid.
    pub pid: u32,
    /// Its live connection, as the simulator numbers it.
    pub conn: u64,
}

impl Running {
    /// Heartbeats the simulator has counted on the live connection.
    pub fn beats(&self) -> u64 {
        beats_of(&self.sim, self.conn)
    }

    /// SIGTERM, then waits up to 10 s: how long it took and how it exited
    /// (`None`: still running, killed on drop).
    pub fn stop(mut self) -> Result<(Duration, Option<ExitStatus>), String> {
        let started = Instant::now();
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child.0),
            rustix::process::Signal::TERM,
        )
        .map_err(|e| format!("SIGTERM: {e}"))?;
        let mut exit = None;
        while started.elapsed() < Duration::from_secs(10) {
            if let Some(status) = self.child.0.try_wait().map_err(|e| e.to_string())? {
                exit = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let took = started.elapsed();
        drop(self.child);
        self.sim.shutdown();
        Ok((took, exit))
    }
}

/// Starts `client` against a fresh simulator and waits for READY and its
/// first heartbeat (the first is jittered over one interval).
pub fn start(client: &Client, plan: &Plan) -> Result<Running, String> {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: plan.heartbeat,
        ..SimConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let state = tempfile::tempdir().map_err(|e| format!("temp state dir: {e}"))?;
    if let Client::Bridge(_) = client {
        let path = state.path().join("config.json");
        let json = bridge_config(plan)?;
        std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let log = state.path().join("client.log");
    let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;

    let mut command = match client {
        Client::Bridge(path) => {
            let mut c = Command::new(path);
            c.arg("run");
            c
        }
        Client::ShardOnly(path, block_on) => {
            let mut c = Command::new(path);
            c.args([
                "--shard-client",
                &sim.gateway_url(),
                "--block-on",
                block_on.name(),
            ]);
            c
        }
        Client::Twilight(path) => Command::new(path),
    };
    // What the container and the unit give it: no HOME, only its variables.
    command
        .env_clear()
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_STATE_DIR", state.path())
        .env("RUST_LOG", "warn")
        .envs(
            match client {
                Client::Twilight(_) => &[][..],
                _ => &plan.child_env[..],
            }
            .iter()
            .map(|(k, v)| (k, v)),
        )
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start the client: {e}"))?;
    let pid = child.id();
    let mut child = Guard(child);

    let ready = wait_event(&sim, Duration::from_secs(30), "READY", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    let conn = match ready {
        Ok(SimEvent::Identified { conn, .. }) => conn,
        Ok(other) => return Err(format!("expected READY, got {other:?}")),
        Err(err) => {
            let exited = child.0.try_wait().ok().flatten();
            return Err(format!(
                "{err} (client exit: {exited:?}); its log:\n{}",
                tail(&log)
            ));
        }
    };
    sim.fault(Fault::Delay(plan.rtt));
    wait_event(
        &sim,
        plan.heartbeat + Duration::from_secs(10),
        "first heartbeat",
        |e| matches!(e, SimEvent::Heartbeat { conn: c, .. } if *c == conn),
    )?;
    Ok(Running {
        sim,
        _state: state,
        child,
        pid,
        conn,
    })
}

/// Runs the plan against `client`.
pub fn measure(client: &Client, plan: &Plan) -> Result<Report, String> {
    let running = start(client, plan)?;
    let (sim, pid, conn) = (&running.sim, running.pid, running.conn);
    // Settle: the blocking pool's idle threads exit, a start-up write ends.
    std::thread::sleep(SETTLE);
    let idle = procfs::status(pid).map_err(|e| e.to_string())?;
    let idle_threads = procfs::thread_names(&procfs::threads(pid).map_err(|e| e.to_string())?);
    let dynamic = procfs::is_dynamic(pid).map_err(|e| e.to_string())?;

    // The burst. A heartbeat asked for after it arrives after every event
    // in the stream: once it is in, the client has read them all.
    let bot = sim.config().bot_id.get();
    let events_started = Instant::now();
    for i in 0..plan.events {
        if plan.from_self {
            sim.send_dm(bot, &sim.config().bot_name, "a message the bot itself sent");
        } else {
            sim.send_dm(
                900_000_000_000_000_000 + (i % 7),
                "someone",
                "hey, are you there?",
            );
        }
    }
    let beats = sim.subscribe();
    sim.fault(Fault::RequestHeartbeat);
    smol::block_on(smolcord_sim::next_matching(
        &beats,
        Duration::from_secs(120),
        |e| matches!(e, SimEvent::Heartbeat { conn: c, .. } if *c == conn),
    ))
    .ok_or("the client did not answer the heartbeat request after the burst within 120 s")?;
    drop(beats);
    let events_elapsed = events_started.elapsed();
    std::thread::sleep(SETTLE);
    let after_events = procfs::status(pid).map_err(|e| e.to_string())?;
    let after_threads = procfs::thread_names(&procfs::threads(pid).map_err(|e| e.to_string())?);

    let subprocesses = match client {
        Client::Bridge(_) if plan.subprocesses > 0 => {
            Some(subprocess_phase(sim, pid, plan.subprocesses))
        }
        _ => None,
    };

    let idle_after_work = subprocesses.as_ref().map(|_| {
        std::thread::sleep(SETTLE);
        let (switches, window) = procfs::sample_window(pid, plan.window, plan.sample_every)
            .map_err(|e| e.to_string())?;
        let minutes = window.as_secs_f64() / 60.0;
        let status = procfs::status(pid).map_err(|e| e.to_string())?;
        Ok(AfterWork {
            per_min: switches.voluntary() as f64 / minutes,
            by_thread: switches
                .voluntary_by_name()
                .into_iter()
                .map(|(name, n)| format!("{name} {:.1}", n as f64 / minutes))
                .collect::<Vec<_>>()
                .join(", "),
            threads: procfs::thread_names(&procfs::threads(pid).map_err(|e| e.to_string())?),
            rss_kib: status.rss_kib,
            anon_kib: status.anon_kib,
        })
    });

    // SIGTERM: drain and exit 0 within a few seconds.
    let stop = running.stop()?;

    Ok(Report {
        idle,
        idle_threads,
        dynamic,
        after_events,
        after_threads,
        events_elapsed,
        subprocesses,
        idle_after_work,
        stop,
    })
}
