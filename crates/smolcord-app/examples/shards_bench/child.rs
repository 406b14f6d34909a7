//! Measured child processes: a fresh simulator (`max_concurrency` 4,
//! identify concurrency enforced, the given identify window), the clients
//! started on their shards, then what the simulator saw (READY times,
//! identifies refused or too early) and, for one process, what /proc says
//! about it once every shard is idle-connected.

use crate::procfs::{self, Switches};
use smolcord_sim::{SessionStartLimit, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    /// `examples/bot` itself (its own identify queue keeps Discord's 5 s).
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

    /// The command for shards `range` (`FIRST-LAST/COUNT`).
    fn command(&self, sim: &Simulator, range: &str, window: Duration) -> Command {
        let program = match self {
            Client::Smolcord(path) | Client::Bot(path) | Client::Twilight(path) => path,
        };
        let mut command = Command::new(program);
        // What a container or a unit gives it: no HOME, only its variables.
        command
            .env_clear()
            .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
            .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
            .env("SMOLCORD_API_BASE", sim.api_base())
            .env("RUST_LOG", "warn");
        match self {
            Client::Smolcord(_) => command
                .args(["--client", range, "--identify-window-ms"])
                .arg(window.as_millis().to_string()),
            Client::Bot(_) => command.env("SMOLCORD_SHARDS", range).env(
                "SMOLCORD_IDENTIFY_WINDOW_MS",
                window.as_millis().to_string(),
            ),
            Client::Twilight(_) => command
                .args(["--gateway", &sim.gateway_url(), "--shards", range])
                .args(["--concurrency", &MAX_CONCURRENCY.to_string()]),
        };
        command
    }
}

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Shards `0..shards` of `shards`.
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

/// What the simulator saw until every shard was READY.
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
    /// Identifies per bucket.
    pub by_bucket: Vec<u64>,
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
    /// ... by thread name.
    pub by_thread: String,
    /// The window measured.
    pub window: Duration,
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

/// A child process and its log; killed on every way out.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(mut command: Command, log: &Path) -> Result<Proc, String> {
        let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
        Ok(Proc {
            child,
            log: log.to_owned(),
        })
    }

    /// Its last lines, to explain a failure.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn with_logs(procs: &[Proc]) -> impl Fn(String) -> String + '_ {
    move |err| {
        let mut text = err;
        for proc in procs {
            text += &format!("\n--- {}:\n{}", proc.log.display(), proc.tail());
        }
        text
    }
}

/// A simulator as Discord treats a bot with `max_concurrency` 4.
fn simulator(plan: &Plan, listen: Option<SocketAddr>) -> Result<Simulator, String> {
    let defaults = SimConfig::default();
    Simulator::start(SimConfig {
        listen: listen.unwrap_or(defaults.listen),
        heartbeat_interval: plan.heartbeat,
        enforce_identify_concurrency: true,
        identify_window: plan.window,
        recommended_shards: plan.shards,
        session_start_limit: SessionStartLimit {
            max_concurrency: MAX_CONCURRENCY,
            ..SessionStartLimit::default()
        },
        ..defaults
    })
    .map_err(|e| format!("simulator: {e}"))
}

/// Reads events until `done` says so, or `bound` passes, or a child exits.
fn watch(
    events: &smol::channel::Receiver<SimEvent>,
    procs: &mut [Proc],
    bound: Duration,
    what: &str,
    mut done: impl FnMut(&SimEvent, Instant) -> bool,
) -> Result<(), String> {
    let end = Instant::now() + bound;
    while Instant::now() < end {
        let step = (end - Instant::now()).min(Duration::from_millis(500));
        match smol::block_on(smolcord_sim::next_matching(events, step, |_| true)) {
            Some(event) => {
                if done(&event, Instant::now()) {
                    return Ok(());
                }
            }
            None => {
                for proc in procs.iter_mut() {
                    if let Ok(Some(status)) = proc.child.try_wait() {
                        return Err(format!("a client exited ({status}) before {what}"));
                    }
                }
            }
        }
    }
    Err(format!("no {what} within {bound:?}"))
}

/// Waits until every shard of `plan` is READY (the simulator's Identified
/// event is it sending READY for an accepted Identify); gives what the
/// simulator saw and the sessions' connections.
fn startup(
    sim: &Simulator,
    events: &smol::channel::Receiver<SimEvent>,
    procs: &mut [Proc],
    plan: &Plan,
    spawned: Instant,
    bound: Duration,
) -> Result<(Startup, BTreeSet<u64>), String> {
    let mut ready = BTreeSet::new();
    let mut conns = BTreeSet::new();
    let (mut first, mut last) = (None, spawned);
    watch(events, procs, bound, "every READY", |event, at| {
        if let SimEvent::Identified { conn, identify, .. } = event {
            first.get_or_insert(at);
            last = at;
            conns.insert(*conn);
            ready.insert(identify.shard.map_or(0, |s| s[0]));
        }
        ready.len() == plan.shards as usize
    })?;
    let totals = sim.stats().totals;
    let startup = Startup {
        first_to_last: last - first.unwrap_or(last),
        spawn_to_last: last - spawned,
        identifies: totals.identifies,
        refused: totals.invalid_sessions,
        too_early: totals.identifies_too_early,
        min_gap_ms: totals.min_identify_gap_ms,
        by_bucket: totals.identifies_by_bucket.values().copied().collect(),
        rest_requests: totals.rest_requests,
    };
    Ok((startup, conns))
}

/// Long enough for the blocking pool's idle threads to exit (they linger
/// 0.5 s after `GET /gateway/bot`).
const SETTLE: Duration = Duration::from_secs(3);

/// Runs `client` on shards `0..plan.shards` in one process.
pub fn measure(client: &Client, plan: Plan) -> Result<Run, String> {
    let sim = simulator(&plan, None)?;
    let logs = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let events = sim.subscribe();
    let range = format!("0-{}/{}", plan.shards - 1, plan.shards);
    let spawned = Instant::now();
    let command = client.command(&sim, &range, plan.window);
    let mut procs = [Proc::spawn(
        command,
        &logs.path().join(client.name().replace('/', "-")),
    )?];
    let pid = procs[0].child.id();
    let bound = plan.window * plan.shards.div_ceil(MAX_CONCURRENCY) * 3 + Duration::from_secs(30);
    let (startup, conns) =
        startup(&sim, &events, &mut procs, &plan, spawned, bound).map_err(with_logs(&procs))?;
    let Some(window) = plan.idle else {
        return Ok(Run {
            startup,
            idle: None,
        });
    };

    // Idle-connected: every session has beaten once (the first beat is
    // jittered over one interval), and the pools have settled.
    let mut quiet = conns;
    watch(
        &events,
        &mut procs,
        plan.heartbeat + Duration::from_secs(30),
        "a first heartbeat on every shard",
        |event, _| {
            if let SimEvent::Heartbeat { conn, .. } = event {
                quiet.remove(conn);
            }
            quiet.is_empty()
        },
    )
    .map_err(with_logs(&procs))?;
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
    let by_thread: Vec<String> = switches
        .voluntary_by_name()
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let idle = Idle {
        rss_kib: status.rss_kib,
        threads,
        wakeups: switches.voluntary(),
        by_thread: by_thread.join(", "),
        window: started.elapsed(),
        beats: sim.stats().totals.heartbeats - beats_before,
    };
    let totals = sim.stats().totals;
    if totals.sessions_started != u64::from(plan.shards)
        || totals.invalid_sessions != startup.refused
        || totals.resumes != 0
    {
        return Err(with_logs(&procs)(format!(
            "sessions changed while idle: {} started, {} resumed, {} op 9",
            totals.sessions_started, totals.resumes, totals.invalid_sessions
        )));
    }
    drop(procs);
    sim.shutdown();
    Ok(Run {
        startup,
        idle: Some(idle),
    })
}

/// Where the processes part gets its identify queue.
pub struct SharedQueue {
    /// A gateway-queue compatible service (`None`: the simulator's stand-in).
    pub url: Option<String>,
    /// Where the simulator listens (an external queue that asks `GET
    /// /gateway/bot` itself must know).
    pub listen: Option<SocketAddr>,
}

/// Two reference bots, shards `0..n/2` and `n/2..n` of `n`, sharing one
/// identify queue.
pub fn measure_processes(bot: &Path, plan: Plan, queue: &SharedQueue) -> Result<Startup, String> {
    let sim = simulator(&plan, queue.listen)?;
    let url = queue
        .url
        .clone()
        .unwrap_or_else(|| sim.identify_queue_url());
    let logs = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let events = sim.subscribe();
    let (n, half) = (plan.shards, plan.shards / 2);
    let spawned = Instant::now();
    let mut procs = Vec::new();
    for (first, last) in [(0, half - 1), (half, n - 1)] {
        let mut command =
            Client::Bot(bot.to_owned()).command(&sim, &format!("{first}-{last}/{n}"), plan.window);
        command.env("SMOLCORD_IDENTIFY_QUEUE_URL", &url);
        procs.push(Proc::spawn(
            command,
            &logs.path().join(format!("bot-{first}-{last}")),
        )?);
    }
    // A queue of its own may space identifies wider than the window
    // (gateway-queue: 6 s, one bucket without a token).
    let bound = Duration::from_secs(6) * n + Duration::from_secs(60);
    let (startup, _) =
        startup(&sim, &events, &mut procs, &plan, spawned, bound).map_err(with_logs(&procs))?;
    drop(procs);
    sim.shutdown();
    Ok(startup)
}
