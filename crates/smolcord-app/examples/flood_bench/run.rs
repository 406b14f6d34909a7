//! One measured run: a flood server for one case, one client as a child
//! process, and the same probe for every client: peak RSS (VmHWM from
//! /proc, sampled every 20 ms and read again at the end), the heartbeats as
//! the server saw them, when the client had consumed everything, and
//! whether every event arrived once and in order; in the cases where the
//! server stops reading, when the client dropped the connection (the
//! kernel's socket table) and when it came back.

use crate::compression::Wire;
use crate::procfs;
use crate::rest_stub::RestStub;
use crate::server::{Beat, ConnLog, Mode, Server, StopReading};
use crate::tally::Summary;
use crate::tcp_state;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Hello's heartbeat interval.
pub const INTERVAL: Duration = Duration::from_millis(500);
/// READY and the first heartbeat must come within this.
const START_BOUND: Duration = Duration::from_secs(30);
/// A client that left must be back within this to count as having left.
const LEAVE_BOUND: Duration = Duration::from_secs(30);

/// The program under test.
#[derive(Clone, Debug)]
pub enum Client {
    /// smolcord's shard alone: this example as `--shard-client`.
    Shard(PathBuf),
    /// `smolcord run`, the bridge.
    Bridge(PathBuf),
    /// The twilight peer: a directory with `twilight-flood-plain`,
    /// `twilight-flood-zlib` and `twilight-flood-zstd`.
    Twilight(PathBuf),
}

impl Client {
    pub fn name(&self) -> &'static str {
        match self {
            Client::Shard(_) => "smolcord shard",
            Client::Bridge(_) => "smolcord run",
            Client::Twilight(_) => "twilight",
        }
    }
}

/// What the server does once the heartbeat schedule has started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Case {
    /// N events at line rate.
    Burst(u64),
    /// N events at line rate, for long enough that the writer is far ahead.
    Overrun(u64),
    /// N pings at line rate; the server keeps reading (and counts pongs).
    PingFlood(u64),
    /// The server stops reading for good, then sends N pings.
    StopThenPings(u64),
    /// The server sends N pings (reading), then stops reading for good:
    /// the order issue 11 describes.
    PingsThenStop(u64),
    /// One text message of `bytes` in `fragment`-byte frames.
    Huge { bytes: usize, fragment: usize },
}

impl Case {
    pub fn name(self) -> &'static str {
        match self {
            Case::Burst(_) => "burst",
            Case::Overrun(_) => "overrun",
            Case::PingFlood(_) => "ping-flood",
            Case::StopThenPings(_) => "stop-reading-then-pings",
            Case::PingsThenStop(_) => "pings-then-stop-reading",
            Case::Huge { .. } => "big-fragmented-message",
        }
    }

    pub fn is_flood(self) -> bool {
        matches!(self, Case::Burst(_) | Case::Overrun(_))
    }

    fn mode(self, end_marker: bool) -> Mode {
        match self {
            Case::Burst(events) | Case::Overrun(events) => Mode::Flood { events, end_marker },
            Case::PingFlood(pings) => Mode::Pings {
                pings,
                stop: StopReading::Never,
            },
            Case::StopThenPings(pings) => Mode::Pings {
                pings,
                stop: StopReading::BeforePings,
            },
            Case::PingsThenStop(pings) => Mode::Pings {
                pings,
                stop: StopReading::AfterPings,
            },
            Case::Huge { bytes, fragment } => Mode::Huge {
                bytes,
                fragment,
                end_marker,
            },
        }
    }

    /// MESSAGE_CREATEs a client must count before its summary line.
    fn expected_events(self) -> u64 {
        match self {
            Case::Burst(n) | Case::Overrun(n) => n,
            Case::Huge { .. } => 2,
            Case::PingFlood(_) | Case::StopThenPings(_) | Case::PingsThenStop(_) => u64::MAX,
        }
    }

    /// How long the case may run after the flood began.
    fn bound(self) -> Duration {
        match self {
            Case::Burst(_) | Case::Overrun(_) => Duration::from_secs(600),
            Case::PingFlood(_) | Case::Huge { .. } => Duration::from_secs(120),
            Case::StopThenPings(_) | Case::PingsThenStop(_) => {
                Duration::from_secs(120) + LEAVE_BOUND
            }
        }
    }
}

/// The figures of one run (`None`: not measured, see `verdict`).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub peak_rss_kib: Option<u64>,
    /// Largest gap between heartbeats from the flood's start until the
    /// client was done (the end counts as a beat, so silence shows).
    pub max_gap: Option<Duration>,
    /// From the flood's start to the first beat after it.
    pub first_beat: Option<Duration>,
    pub beats: usize,
    pub events_per_sec: Option<f64>,
    /// The client's CPU time (user + system, every thread) from just
    /// before the flood until it was done, per event: what throughput
    /// costs, whatever else the machine was doing.
    pub cpu_per_event: Option<Duration>,
    pub once_in_order: Option<bool>,
    /// What happened, in words (the hostile cases' outcome; or why a
    /// figure is missing).
    pub verdict: String,
    /// The server had written everything this long after the flood began.
    pub written_after: Option<Duration>,
    /// ... and spent this share of that time inside `write`.
    pub in_write_share: Option<f64>,
    /// The server stopped reading: the client dropped the connection
    /// (its end left the established state) this long after...
    pub dropped_after: Option<Duration>,
    /// ... and was connected again this long after.
    pub back_after: Option<Duration>,
    /// Pongs the client still owed when the server stopped reading.
    pub pongs_owed: Option<u64>,
    pub bytes_per_event: Option<f64>,
}

/// What the clients log, and where it is kept.
#[derive(Clone, Debug)]
pub struct ClientLogs {
    /// `RUST_LOG` of smolcord's clients (the twilight peer logs nothing).
    pub level: String,
    /// Keep each run's stderr here (`--client-logs DIR`) instead of only
    /// in a temp dir.
    pub keep_in: Option<PathBuf>,
}

impl Default for ClientLogs {
    fn default() -> ClientLogs {
        ClientLogs {
            level: "warn".into(),
            keep_in: None,
        }
    }
}

/// Kills the child on every way out.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(
    client: &Client,
    url: &str,
    case: Case,
    wire: Wire,
    stub: Option<&RestStub>,
    state: &Path,
    log_level: &str,
) -> Result<Command, String> {
    let events = case.expected_events().to_string();
    // Only the variables set here: no HOME, no inherited RUST_LOG.
    let bare = |exe: &Path| {
        let mut c = Command::new(exe);
        c.env_clear();
        c
    };
    let mut command = match client {
        Client::Shard(exe) => {
            let mut c = bare(exe);
            c.args(["--shard-client", url, "--events", &events]);
            c.args(["--compress", wire.name()]);
            c
        }
        Client::Twilight(dir) => {
            let exe = dir.join(format!("twilight-flood-{}", wire.name()));
            let mut c = bare(&exe);
            c.args(["--gateway", url, "--events", &events]);
            c
        }
        Client::Bridge(exe) => {
            // The owner is someone else, so the end marker's stranger gets
            // a pairing code.
            let mut config = serde_json::json!({"owner_id": "900000000000000042", "compress": wire.config_value()});
            if crate::payload::GUILD_FLOOD.load(std::sync::atomic::Ordering::Relaxed) {
                // A bridge that answers in one server channel, flooded
                // with another's messages.
                config["channels"] = serde_json::json!([{"id": "1300000000000000101"}]);
            }
            let path = state.join("config.json");
            std::fs::write(&path, config.to_string())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let mut c = bare(exe);
            c.arg("run")
                .env("DISCORD_TOKEN", "flood-bench-token")
                .env("SMOLCORD_GATEWAY_URL", url)
                .env("SMOLCORD_STATE_DIR", state);
            if let Some(stub) = stub {
                c.env("SMOLCORD_API_BASE", stub.api_base());
            }
            c
        }
    };
    command.env("RUST_LOG", log_level);
    Ok(command)
}

/// A process's CPU time so far, user + system, all its threads (dead ones
/// too): `/proc/PID/stat` fields 14 and 15, in clock ticks.
fn cpu_time(pid: u32) -> Option<Duration> {
    /// USER_HZ: the unit of those fields, 100 on every Linux architecture
    /// this runs on (sysconf(_SC_CLK_TCK)).
    const TICK: Duration = Duration::from_millis(10);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, may hold spaces), fields
    // start at the third: utime is the 14th.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u32 = fields.next()?.parse().ok()?;
    let stime: u32 = fields.next()?.parse().ok()?;
    Some(TICK * (utime + stime))
}

/// Heartbeat figures over `[start, end]`: (max gap, first beat after
/// start, beats in the window).
fn heartbeat_figures(
    beats: &[Beat],
    start: Instant,
    end: Instant,
) -> (Duration, Option<Duration>, usize) {
    let mut previous = beats
        .iter()
        .rev()
        .find(|b| b.at < start)
        .map_or(start, |b| b.at);
    let mut max = Duration::ZERO;
    let mut count = 0;
    for beat in beats.iter().filter(|b| b.at >= start && b.at <= end) {
        max = max.max(beat.at - previous);
        previous = beat.at;
        count += 1;
    }
    max = max.max(end.saturating_duration_since(previous));
    let first = beats.iter().find(|b| b.at >= start).map(|b| b.at - start);
    (max, first, count)
}

/// What the bridge's state says after it stopped: (once and in order,
/// detail).
fn bridge_delivery(state: &Path, last_seq: u64) -> (bool, String) {
    let read = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(state.join(name)).ok()?).ok()
    };
    let (Some(status), Some(session)) = (read("status.json"), read("session.json")) else {
        return (false, "no status.json / session.json after SIGTERM".into());
    };
    let field = |name: &str| status[name].as_u64().unwrap_or(u64::MAX);
    let seq = session["session"]["seq"].as_u64();
    let ok = field("gaps") == 0
        && field("duplicates_dropped") == 0
        && field("sessions_started") == 1
        && field("resumes") == 0
        && seq == Some(last_seq);
    let detail = format!(
        "gaps {}, duplicates dropped {}, sessions {}, resumes {}, saved seq {seq:?} (want {last_seq})",
        field("gaps"),
        field("duplicates_dropped"),
        field("sessions_started"),
        field("resumes"),
    );
    (ok, detail)
}

/// How a client stands in a case, looked at every 20 ms.
enum Progress {
    Running,
    /// Done at this instant, with this verdict.
    Done(Instant, String),
}

struct Watch<'a> {
    case: Case,
    bridge: bool,
    server: &'a Server,
    stub: Option<&'a RestStub>,
    summary: &'a Option<(Instant, Summary)>,
}

impl Watch<'_> {
    fn progress(&self, logs: &[ConnLog]) -> Progress {
        let Some(first) = logs.first() else {
            return Progress::Running;
        };
        let consumed = if self.bridge {
            self.stub.and_then(|s| s.posts().first().copied())
        } else {
            self.summary.as_ref().map(|(at, _)| *at)
        };
        let reconnect = self.server.conns().get(1).map(|c| c.accepted);
        match self.case {
            Case::Burst(_) | Case::Overrun(_) => match (consumed, reconnect) {
                (Some(at), _) => Progress::Done(at, "consumed every event".into()),
                (None, Some(at)) => Progress::Done(at, "reconnected during the flood".into()),
                _ => Progress::Running,
            },
            Case::PingFlood(pings) => match (first.all_pongs, reconnect) {
                (Some(at), _) => Progress::Done(at, format!("answered all {pings} pings, stayed")),
                (None, Some(at)) => Progress::Done(
                    at,
                    format!(
                        "left and reconnected after {} pongs",
                        self.server.conns()[0]
                            .pongs
                            .load(std::sync::atomic::Ordering::Relaxed)
                    ),
                ),
                _ => Progress::Running,
            },
            Case::StopThenPings(_) | Case::PingsThenStop(_) => {
                match (first.reading_stopped, reconnect) {
                    (Some(_), Some(at)) => Progress::Done(at, "left the dead connection".into()),
                    (Some(stopped), None) if stopped.elapsed() > LEAVE_BOUND => {
                        let stuck = "STUCK: still on the dead connection";
                        let after = LEAVE_BOUND.as_secs();
                        Progress::Done(
                            Instant::now(),
                            format!("{stuck} {after} s after the server stopped reading"),
                        )
                    }
                    _ => Progress::Running,
                }
            }
            Case::Huge { bytes, .. } => {
                let mib = bytes as f64 / (1024.0 * 1024.0);
                match (consumed, first.client_close, reconnect) {
                    (Some(at), _, _) => {
                        Progress::Done(at, format!("ACCEPTED the {mib:.0} MiB message"))
                    }
                    (None, Some((at, code)), _) => Progress::Done(
                        at,
                        format!(
                            "refused it: closed with {}",
                            code.map_or("no code".into(), |c| c.to_string())
                        ),
                    ),
                    (None, None, Some(at)) => {
                        Progress::Done(at, "dropped the connection and reconnected".into())
                    }
                    _ => Progress::Running,
                }
            }
        }
    }
}

/// Runs `client` through `case` once; `tag` names the run's kept log.
pub fn measure(
    client: &Client,
    case: Case,
    wire: Wire,
    client_logs: &ClientLogs,
    tag: &str,
) -> Outcome {
    match measure_inner(client, case, wire, client_logs, tag) {
        Ok(outcome) => outcome,
        Err(verdict) => Outcome {
            verdict,
            ..Outcome::default()
        },
    }
}

fn measure_inner(
    client: &Client,
    case: Case,
    wire: Wire,
    client_logs: &ClientLogs,
    tag: &str,
) -> Result<Outcome, String> {
    let bridge = matches!(client, Client::Bridge(_));
    let mut server =
        Server::start(case.mode(bridge), INTERVAL).map_err(|e| format!("flood server: {e}"))?;
    let stub = if bridge {
        Some(RestStub::start(server.url()).map_err(|e| format!("REST stub: {e}"))?)
    } else {
        None
    };
    let state = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let log_path = state.path().join("client.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut command = command(
        client,
        &server.url(),
        case,
        wire,
        stub.as_ref(),
        state.path(),
        &client_logs.level,
    )?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    let mut child = Guard(
        command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", client.name()))?,
    );
    let pid = child.0.id();
    let (lines_tx, lines) = mpsc::channel();
    if let Some(stdout) = child.0.stdout.take() {
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
    }

    let began = Instant::now();
    // The client's CPU time at the last sample before the flood began (it
    // was idle, waiting for its first beat's turn), and at the end.
    let mut cpu_before: Option<Duration> = None;
    let mut last_cpu: Option<(Instant, Duration)> = None;
    let mut peak_kib = 0u64;
    let mut summary: Option<(Instant, Summary)> = None;
    let mut dropped = None;
    let (done_at, verdict) = loop {
        if let Ok(status) = procfs::status(pid) {
            peak_kib = peak_kib.max(status.hwm_kib);
        }
        while let Ok((at, line)) = lines.try_recv() {
            if let Some(parsed) = Summary::parse(&line) {
                summary.get_or_insert((at, parsed));
            }
        }
        let logs = server.logs();
        let flood_started = logs.first().and_then(|l| l.flood_started);
        if let (None, Some(started), Some((at, cpu))) = (cpu_before, flood_started, last_cpu) {
            if at <= started {
                cpu_before = Some(cpu);
            }
        }
        if cpu_before.is_none() {
            last_cpu = cpu_time(pid).map(|cpu| (Instant::now(), cpu));
        }
        if dropped.is_none() && logs.first().is_some_and(|l| l.reading_stopped.is_some()) {
            let first = server.conns().into_iter().next();
            if let Some(peer) = first.and_then(|c| c.peer) {
                // The client's end: a close it makes while its pongs wait for
                // a window the server never opens stays queued behind them
                // (FIN_WAIT1 there, ESTABLISHED here).
                if tcp_state::established(peer, server.addr()) == Some(false) {
                    dropped = Some(Instant::now());
                }
            }
        }
        let watch = Watch {
            case,
            bridge,
            server: &server,
            stub: stub.as_ref(),
            summary: &summary,
        };
        if let Progress::Done(at, verdict) = watch.progress(&logs) {
            break (at, verdict);
        }
        if let Some(status) = child.0.try_wait().map_err(|e| e.to_string())? {
            break (Instant::now(), format!("CLIENT EXITED ({status})"));
        }
        match flood_started {
            None if began.elapsed() > START_BOUND => {
                return Err(format!(
                    "no READY and first heartbeat within {START_BOUND:?}; log:\n{}",
                    tail(&log_path)
                ))
            }
            Some(at) if at.elapsed() > case.bound() => {
                break (
                    Instant::now(),
                    format!("no outcome within {:?}", case.bound()),
                );
            }
            _ => {}
        }
        thread::sleep(Duration::from_millis(20));
    };
    if let Ok(status) = procfs::status(pid) {
        peak_kib = peak_kib.max(status.hwm_kib);
    }
    let cpu_after = cpu_time(pid);

    let logs = server.logs();
    let first = logs.first().cloned().unwrap_or_default();
    let mut outcome = Outcome {
        peak_rss_kib: (peak_kib > 0).then_some(peak_kib),
        verdict,
        ..Outcome::default()
    };
    if let (Some(stopped), true) = (first.reading_stopped, outcome.verdict.starts_with("left")) {
        // Seen at the next sample at the latest.
        outcome.dropped_after =
            dropped.map(|d: Instant| d.min(done_at).saturating_duration_since(stopped));
        outcome.back_after = Some(done_at.saturating_duration_since(stopped));
    }
    if let Case::PingsThenStop(pings) = case {
        outcome.pongs_owed = Some(pings.saturating_sub(first.pongs_before_stop));
    }
    if let Some(started) = first.flood_started {
        // The server reads no beat once it stops reading (and 100 000 pings
        // take it about 0.1 s, far less than an interval): what these cases
        // measure is how soon the client leaves.
        if !matches!(case, Case::StopThenPings(_) | Case::PingsThenStop(_)) {
            let (max_gap, first_beat, beats) = heartbeat_figures(&first.beats, started, done_at);
            outcome.max_gap = Some(max_gap);
            outcome.first_beat = first_beat;
            outcome.beats = beats;
        }
        if let Some(written) = first.flood_written {
            let took = written - started;
            outcome.written_after = Some(took);
            outcome.in_write_share =
                Some(first.in_write.as_secs_f64() / took.as_secs_f64().max(1e-9));
        }
        if case.is_flood() {
            let events = case.expected_events();
            outcome.bytes_per_event = Some(first.bytes_written as f64 / events as f64);
            if outcome.verdict == "consumed every event" {
                outcome.events_per_sec =
                    Some(events as f64 / (done_at - started).as_secs_f64().max(1e-9));
                if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
                    outcome.cpu_per_event = Some(after.saturating_sub(before) / events as u32);
                }
                let reconnected = logs.len() > 1;
                outcome.once_in_order = Some(if bridge {
                    let (ok, detail) = stop_bridge(&mut child, state.path(), events + 2);
                    if !ok {
                        outcome.verdict = format!("not once in order: {detail}");
                    }
                    ok && !reconnected
                } else {
                    let (_, s) = summary.as_ref().ok_or("no summary")?;
                    s.once_in_order(2, events) && !reconnected
                });
            }
        }
    }
    drop(child);
    server.stop();
    if let Some(dir) = &client_logs.keep_in {
        let kept = dir.join(format!("{tag}.log"));
        if let Err(err) = std::fs::copy(&log_path, &kept) {
            eprintln!("cannot keep the client log as {}: {err}", kept.display());
        }
    }
    Ok(outcome)
}

/// SIGTERM: the bridge drains and saves its status and session; then
/// reads them (bounded: 10 s).
fn stop_bridge(child: &mut Guard, state: &Path, last_seq: u64) -> (bool, String) {
    let pid = rustix::process::Pid::from_child(&child.0);
    if let Err(e) = rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
        return (false, format!("SIGTERM: {e}"));
    }
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.0.try_wait() {
            return bridge_delivery(state, last_seq);
        }
        thread::sleep(Duration::from_millis(20));
    }
    (
        false,
        "the bridge did not exit within 10 s of SIGTERM".into(),
    )
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}
