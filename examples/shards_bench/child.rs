//! One measured child process: a fresh simulator (`max_concurrency` 4,
//! identify concurrency enforced, the given identify window), the client
//! started on shards `0..n` of `n`, then what the simulator saw (READY times,
//! identifies refused or too early) and, if asked, what /proc says about the
//! client once every shard is idle-connected.

use crate::procfs::{self, Switches};
use smolcord::sim::{SessionStartLimit, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Discord's `max_concurrency` for a bot of this size in the benchmark.
pub const MAX_CONCURRENCY: u32 = 4;

/// Which program runs the shards.
#[derive(Clone, Debug)]
pub enum Client {
    /// This example with `--client` (a shard set configured as the
    /// reference bot, with the identify window of the run).
    Smolcord(PathBuf),
    /// `examples/bot` itself (its identify window is Discord's 5 s).
    Bot(PathBuf),
    /// `scripts/compat/twilight-shards` (twilight's queue: a fixed 5 s).
    Twilight(PathBuf),
}

impl Client {
    /// The column name.
    pub fn name(&self) -> &'static str {
        match self {
            Client::Smolcord(_) => "smolcord",
            Client::Bot(_) => "examples/bot",
            Client::Twilight(_) => "twilight",
        }
    }

    fn command(&self, sim: &Simulator, shards: u32, window: Duration) -> Command {
        let range = format!("0-{}/{shards}", shards - 1);
        let mut command = match self {
            Client::Smolcord(me) => {
                let mut c = Command::new(me);
                c.args(["--client", &range, "--identify-window-ms"])
                    .arg(window.as_millis().to_string());
                c
            }
            Client::Bot(path) => {
                let mut c = Command::new(path);
                c.env("SMOLCORD_SHARDS", &range);
                c
            }
            Client::Twilight(path) => {
                let mut c = Command::new(path);
                c.args(["--gateway", &sim.gateway_url(), "--shards", &range])
                    .args(["--concurrency", &MAX_CONCURRENCY.to_string()]);
                c
            }
        };
        // What a container or a unit gives it: no HOME, only its variables.
        command
            .env_clear()
            .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
            .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
            .env("SMOLCORD_API_BASE", sim.api_base())
            .env("RUST_LOG", "warn");
        command
    }
}

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Shards `0..shards` of `shards`, in one process.
    pub shards: u32,
    /// The identify window per bucket (simulator and, where it can be set,
    /// client).
    pub window: Duration,
    /// Hello's heartbeat interval.
    pub heartbeat: Duration,
    /// Measure memory and wake-ups over this idle window (`None`: stop once
    /// every shard is READY).
    pub idle: Option<Duration>,
}

/// What the simulator saw.
#[derive(Clone, Debug)]
pub struct Startup {
    /// First accepted Identify → the last shard's READY.
    pub first_to_last: Duration,
    /// Process start → the last shard's READY.
    pub spawn_to_last: Duration,
    /// Identifies received, accepted or not.
    pub identifies: u64,
    /// op 9 sent (here: identifies refused as too early).
    pub refused: u64,
    /// Identifies within the window of their bucket's previous one.
    pub too_early: u64,
    /// The shortest gap between two identifies of one bucket, ms.
    pub min_gap_ms: Option<f64>,
    /// REST requests the simulator answered (`GET /gateway/bot`).
    pub rest_requests: u64,
}

/// What /proc said, idle-connected.
#[derive(Clone, Debug)]
pub struct Idle {
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Threads alive, by name.
    pub threads: String,
    /// Voluntary context switches over the window, all threads.
    pub wakeups: u64,
    /// The window measured.
    pub window: Duration,
    /// Wake-ups by thread name.
    pub by_thread: std::collections::BTreeMap<String, u64>,
    /// Heartbeats the simulator got in the window (all shards).
    pub beats: u64,
}

impl Idle {
    /// Wake-ups per minute.
    pub fn per_min(&self) -> f64 {
        self.wakeups as f64 * 60.0 / self.window.as_secs_f64()
    }
}

/// One run's figures.
#[derive(Clone, Debug)]
pub struct Run {
    pub startup: Startup,
    pub idle: Option<Idle>,
}

/// Kills the child on every way out.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Long enough for the blocking pool's idle threads to exit (they linger
/// 0.5 s after `GET /gateway/bot`).
const SETTLE: Duration = Duration::from_secs(3);

/// Reads events until `done` says so, or `bound` passes, or the child exits.
fn watch(
    events: &smol::channel::Receiver<SimEvent>,
    child: &mut Guard,
    bound: Duration,
    what: &str,
    mut done: impl FnMut(&SimEvent, Instant) -> bool,
) -> Result<(), String> {
    let end = Instant::now() + bound;
    while Instant::now() < end {
        let step = (end - Instant::now()).min(Duration::from_millis(500));
        match smol::block_on(smolcord::sim::next_matching(events, step, |_| true)) {
            Some(event) => {
                if done(&event, Instant::now()) {
                    return Ok(());
                }
            }
            None => {
                if let Ok(Some(status)) = child.0.try_wait() {
                    return Err(format!("the client exited ({status}) before {what}"));
                }
            }
        }
    }
    Err(format!("no {what} within {bound:?}"))
}

/// Runs `client` on `plan` against a fresh simulator.
pub fn measure(client: &Client, plan: Plan) -> Result<Run, String> {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: plan.heartbeat,
        enforce_identify_concurrency: true,
        identify_window: plan.window,
        recommended_shards: plan.shards,
        session_start_limit: SessionStartLimit {
            max_concurrency: MAX_CONCURRENCY,
            ..SessionStartLimit::default()
        },
        ..SimConfig::default()
    })
    .map_err(|e| format!("simulator: {e}"))?;
    let logs = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let log_path = logs.path().join("client.log");
    let log = std::fs::File::create(&log_path).map_err(|e| format!("client log: {e}"))?;
    let events = sim.subscribe();
    let mut command = client.command(&sim, plan.shards, plan.window);
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    let spawned = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", client.name()))?;
    let pid = child.id();
    let mut child = Guard(child);
    let with_log = |err: String| {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "{err}; the client's last lines:\n{}",
            lines[lines.len().saturating_sub(8)..].join("\n")
        )
    };

    // READY of every shard (an Identified event is the simulator sending
    // READY for an accepted Identify).
    let mut ready = BTreeSet::new();
    let mut conns = BTreeSet::new();
    let (mut first, mut last) = (None, spawned);
    let windows = plan.shards.div_ceil(MAX_CONCURRENCY);
    let bound = plan.window * windows * 3 + Duration::from_secs(30);
    watch(&events, &mut child, bound, "every READY", |event, at| {
        if let SimEvent::Identified { conn, identify, .. } = event {
            first.get_or_insert(at);
            last = at;
            conns.insert(*conn);
            ready.insert(identify.shard.map_or(0, |s| s[0]));
        }
        ready.len() == plan.shards as usize
    })
    .map_err(with_log)?;
    let totals = sim.stats().totals;
    let startup = Startup {
        first_to_last: last - first.unwrap_or(last),
        spawn_to_last: last - spawned,
        identifies: totals.identifies,
        refused: totals.invalid_sessions,
        too_early: totals.identifies_too_early,
        min_gap_ms: totals.min_identify_gap_ms,
        rest_requests: totals.rest_requests,
    };
    let Some(window) = plan.idle else {
        drop(events);
        return Ok(Run {
            startup,
            idle: None,
        });
    };

    // Idle-connected: every session has beaten once (the first beat is
    // jittered over one interval), and the pools have settled.
    let mut quiet = conns.clone();
    watch(
        &events,
        &mut child,
        plan.heartbeat + Duration::from_secs(30),
        "a first heartbeat on every shard",
        |event, _| {
            if let SimEvent::Heartbeat { conn, .. } = event {
                quiet.remove(conn);
            }
            quiet.is_empty()
        },
    )
    .map_err(with_log)?;
    drop(events);
    std::thread::sleep(SETTLE);
    let status = procfs::status(pid).map_err(|e| e.to_string())?;
    let threads = procfs::thread_names(&procfs::threads(pid).map_err(|e| e.to_string())?);

    let mut switches = Switches::default();
    let beats_before = sim.stats().totals.heartbeats;
    let started = Instant::now();
    switches.sample(pid).map_err(|e| e.to_string())?;
    while started.elapsed() < window {
        std::thread::sleep(Duration::from_millis(100));
        switches.sample(pid).map_err(|e| e.to_string())?;
    }
    let idle = Idle {
        rss_kib: status.rss_kib,
        threads,
        wakeups: switches.voluntary(),
        by_thread: switches.voluntary_by_name(),
        window: started.elapsed(),
        beats: sim.stats().totals.heartbeats - beats_before,
    };
    let totals = sim.stats().totals;
    if totals.sessions_started != u64::from(plan.shards)
        || totals.invalid_sessions != startup.refused
        || totals.resumes != 0
    {
        return Err(with_log(format!(
            "sessions changed while idle: {} started, {} resumed, {} op 9",
            totals.sessions_started, totals.resumes, totals.invalid_sessions
        )));
    }
    drop(child);
    sim.shutdown();
    Ok(Run {
        startup,
        idle: Some(idle),
    })
}
