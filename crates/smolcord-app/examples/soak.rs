//! Soak: `smolcord run` (the real binary, as a child) against the
//! simulator, with random faults while DMs and spool results flow, then
//! count the replies and results that arrived.
//!
//! Between faults two users DM the bot (the agent answers half of them in
//! two parts) and an agent drops a result into `spool/results/` (two in
//! three of three parts). Each fault is one of: a resumable gateway fault
//! (op 7, TCP drop, close 4000, op 9 `true`, dropped ACKs = zombie, stall,
//! delay, malformed frame, heartbeat request), a REST fault (a 5xx, a 429,
//! a slow answer; each within what the REST client retries), a process
//! restart (SIGKILL, or SIGTERM with its drain), or, one in 25, a gap: an
//! op 9 that cannot be resumed, or a SIGKILL after which the session
//! expires (the restart's Resume is refused), with DMs sent inside the
//! gap, where no session receives them (the bridge reads them back from
//! the history after its fresh session); every other gap, the first
//! history read of a DM channel fails past the REST client's retries
//! (three 500s), and the host's clock lags Discord's by 120 s throughout.
//! Two more faults, one in 100 each: a gap in which every one of the 40
//! allowed users DMs once (more than the read-back's 32 other channels),
//! and a crowd of 300 strangers DMing once each (their processed marks
//! push past the 512 kept; the answered users' are never evicted).
//! At the end it prints how
//! many replies and results were delivered, lost and duplicated, as the
//! simulator saw them (a re-send Discord deduplicates by nonce is not a
//! second message), and exits 1 unless every one arrived exactly once.
//!
//! ```text
//! cargo build --release --bin smolcord --example soak
//! target/release/examples/soak [FAULTS]      # default 40; docs/performance.md's: 1000
//! ```
//!
//! `SMOLCORD_BIN` names the binary (default: `smolcord` beside the
//! examples directory); `SOAK_LOG=FILE` keeps the bot's log (info level).
#![allow(clippy::disallowed_methods)] // a benchmark driver: it plays Discord and the supervisor

use rustix::process::{kill_process, Pid, Signal};
use smolcord::protocol::Snowflake;
use smolcord_sim::{
    next_matching, Fault, RestFault, RestFaultKind, SimConfig, SimEvent, Simulator,
    DEFAULT_SIM_TOKEN,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OWNER: u64 = 1_200_000_000_000_000_010;
const ALICE: u64 = 1_200_000_000_000_000_011;
/// Whose DM channel the results go to.
const RESULTS_USER: u64 = 1_200_000_000_000_000_013;
/// The allowed users besides ALICE (40 with her).
const USERS: u64 = 39;
const FIRST_USER: u64 = 1_200_000_000_000_001_000;
/// Strangers in one crowd, each DMing once.
const CROWD: u64 = 300;
const FIRST_STRANGER: u64 = 1_300_000_000_000_000_000;
/// DMs between two faults (alternating users), and their spacing.
const DMS_PER_FAULT: usize = 3;
const DM_GAP: Duration = Duration::from_millis(40);
/// After the last fault: the bound on everything arriving.
const SETTLE: Duration = Duration::from_secs(120);
/// DMs sent inside a gap (alternating users).
const GAP_DMS: usize = 2;
/// How far the host's clock lags Discord's (the simulator's).
const CLOCK_LAG: Duration = Duration::from_secs(120);
/// Bound on the fresh session after a gap (op 9's 1–5 s wait, the 5 s
/// identify pacing, a loaded machine).
const GAP_SESSION: Duration = Duration::from_secs(30);

/// The agent: one message for `<sN>`, two parts (`<lN>.0`, `<lN>.1`) for `<lN>`.
const AGENT: &str = r#"tag=$(grep -o '<[sl][0-9]*>' | head -n 1)
pad=$(printf '%01900d' 0)
case "$tag" in
  "<l"*) printf '%s.0 %s\n%s.1 %s\n' "$tag" "$pad" "$tag" "$pad" ;;
  *) printf '%s reply\n' "$tag" ;;
esac"#;

/// What must arrive exactly once: the tag each part starts with.
struct Expected {
    parts: Vec<String>,
    result: bool,
    /// Sent inside a gap: only the history has it.
    gap: bool,
    /// The DM's id (none for a result), to name a lost one.
    id: Option<Snowflake>,
}

enum Chaos {
    Gateway(Fault),
    Rest(RestFaultKind),
    Kill,
    Term,
    /// op 9 `false`, DMs in the gap before the fresh identify.
    Op9Gap,
    /// SIGKILL, the session expires, DMs in the gap, restart.
    ExpiredGap,
    /// SIGKILL, the session expires, every allowed user DMs in the gap.
    UsersGap,
    /// A crowd of strangers DM once each.
    Crowd,
}

fn random_chaos() -> Chaos {
    match fastrand::u8(0..100) {
        0 | 1 => return Chaos::Op9Gap,
        2 | 3 => return Chaos::ExpiredGap,
        4 => return Chaos::UsersGap,
        5 => return Chaos::Crowd,
        _ => {}
    }
    match fastrand::u8(0..14) {
        0 => Chaos::Gateway(Fault::Reconnect),
        1 => Chaos::Gateway(Fault::DropTcp),
        2 => Chaos::Gateway(Fault::Close(4000)),
        3 => Chaos::Gateway(Fault::InvalidSession(true)),
        4 => Chaos::Gateway(Fault::DropAcks(2)),
        5 => Chaos::Gateway(Fault::Stall(Duration::from_millis(fastrand::u64(50..300)))),
        6 => Chaos::Gateway(Fault::Malformed),
        7 => Chaos::Gateway(Fault::RequestHeartbeat),
        8 => Chaos::Gateway(Fault::Delay(Duration::from_millis(fastrand::u64(0..40)))),
        9 => Chaos::Rest(RestFaultKind::ServerError(503)),
        10 => Chaos::Rest(RestFaultKind::RateLimited {
            retry_after: 0.3,
            global: false,
        }),
        11 => Chaos::Rest(RestFaultKind::Delay(Duration::from_millis(fastrand::u64(
            100..1000,
        )))),
        12 => Chaos::Kill,
        _ => Chaos::Term,
    }
}

fn name(chaos: &Chaos) -> String {
    let full = match chaos {
        Chaos::Gateway(fault) => format!("{fault:?}"),
        Chaos::Rest(kind) => format!("Rest{kind:?}"),
        Chaos::Kill => "SIGKILL".into(),
        Chaos::Term => "SIGTERM".into(),
        Chaos::Op9Gap => "GapOp9".into(),
        Chaos::ExpiredGap => "GapExpired".into(),
        Chaos::UsersGap => "GapAllUsers".into(),
        Chaos::Crowd => "CrowdOfStrangers".into(),
    };
    full.split(['(', ' ', '{']).next().unwrap_or("?").to_owned()
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SMOLCORD_BIN") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("the soak's own path");
    // target/PROFILE/examples/soak -> target/PROFILE/smolcord
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("smolcord"))
        .expect("a target directory");
    if !bin.exists() {
        eprintln!(
            "soak: {} is missing; build it first: cargo build --release --bin smolcord --example soak (or set SMOLCORD_BIN)",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

struct Bot {
    binary: PathBuf,
    sim: Simulator,
    state: PathBuf,
    child: Child,
    log: Option<PathBuf>,
}

impl Bot {
    fn spawn(binary: &Path, sim: &Simulator, state: &Path, log: Option<&Path>) -> Child {
        let stderr = log.map_or_else(Stdio::null, |path| {
            Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("the log opens"),
            )
        });
        Command::new(binary)
            .arg("run")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
            .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
            .env("SMOLCORD_API_BASE", sim.api_base())
            .env("SMOLCORD_STATE_DIR", state)
            .env("RUST_LOG", if log.is_some() { "info" } else { "error" })
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("smolcord run starts")
    }

    /// Stops the child with `signal` and starts a new one; returns whether
    /// the old one had ended by itself before (an unexpected exit).
    fn restart(&mut self, signal: Signal) -> bool {
        let ended = self.stop(signal);
        self.start();
        ended
    }

    /// Stops the child with `signal`; returns whether it had ended by
    /// itself before.
    fn stop(&mut self, signal: Signal) -> bool {
        let ended = self.child.try_wait().expect("wait").is_some();
        if !ended {
            kill_process(Pid::from_child(&self.child), signal).expect("signal");
            // SIGTERM drains for at most 2 s; SIGKILL is at once.
            self.child.wait().expect("reaped");
        }
        ended
    }

    fn start(&mut self) {
        self.child = Bot::spawn(&self.binary, &self.sim, &self.state, self.log.as_deref());
    }
}

/// The DMs so far: tags alternate users, every other one asks for two parts.
struct Dms {
    sent: usize,
    gap_sent: usize,
}

impl Dms {
    fn send(&mut self, sim: &Simulator, expected: &mut Vec<Expected>, gap: bool) {
        let dms = self.sent;
        let (user, who) = if dms % 2 == 0 {
            (OWNER, "owner")
        } else {
            (ALICE, "alice")
        };
        let (tag, parts) = if (dms / 2) % 2 == 0 {
            let tag = format!("<s{dms}>");
            (tag.clone(), vec![tag.clone()])
        } else {
            let tag = format!("<l{dms}>");
            (tag.clone(), vec![format!("{tag}.0"), format!("{tag}.1")])
        };
        let (id, _) = sim.send_dm(user, who, &format!("message {tag}"));
        self.book(expected, parts, gap, id);
    }

    /// One DM from each allowed user (ALICE and the others), one part
    /// each.
    fn send_from_all(&mut self, sim: &Simulator, expected: &mut Vec<Expected>, gap: bool) {
        for user in std::iter::once(ALICE).chain(users()) {
            let tag = format!("<s{}>", self.sent);
            let (id, _) = sim.send_dm(user, "user", &format!("message {tag}"));
            self.book(expected, vec![tag], gap, id);
        }
    }

    fn book(&mut self, expected: &mut Vec<Expected>, parts: Vec<String>, gap: bool, id: Snowflake) {
        expected.push(Expected {
            parts,
            result: false,
            gap,
            id: Some(id),
        });
        self.sent += 1;
        self.gap_sent += usize::from(gap);
    }
}

/// The allowed users besides ALICE.
fn users() -> impl Iterator<Item = u64> {
    (0..USERS).map(|n| FIRST_USER + n)
}

/// The next event on `events` matching `pred`, within `limit`.
fn next_event(
    events: &smol::channel::Receiver<SimEvent>,
    limit: Duration,
    pred: impl FnMut(&SimEvent) -> bool,
) -> Option<SimEvent> {
    smol::block_on(next_matching(events, limit, pred))
}

/// How many of the bot's messages in `channels` start with each tag (a
/// part's first word).
fn tally(sim: &Simulator, channels: &[Snowflake]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for &channel in channels {
        for message in sim.messages_in(channel) {
            // A late answer's first line says so; the reply follows it.
            let content = match message.content.strip_prefix("(sent while I was offline") {
                Some(late) => late.split_once('\n').map_or("", |(_, reply)| reply),
                None => message.content.as_str(),
            };
            let tag = content.split(' ').next().unwrap_or_default();
            *counts.entry(tag.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// `HH:MM:SS.mmm` (UTC) of a unix ms time, as the log writes it.
fn utc(ms: u64) -> String {
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600 % 24,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

fn main() {
    let faults: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let binary = binary();
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(500),
        command_limit: u32::MAX,
        // The host's clock lags Discord's (a Pi before NTP): the
        // read-back must compare on Discord's clock.
        clock_ahead: CLOCK_LAG,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().expect("a state dir");
    let config = serde_json::json!({
        "owner_id": OWNER.to_string(),
        "allowed_user_ids": std::iter::once(ALICE)
            .chain(users())
            .map(|u| u.to_string())
            .collect::<Vec<_>>(),
        "agent_cmd": ["/bin/sh", "-c", AGENT],
        "safe_mode_after_failures": 100_000,
    });
    std::fs::write(state.path().join("config.json"), config.to_string()).expect("config");
    let log = std::env::var_os("SOAK_LOG").map(PathBuf::from);
    let child = Bot::spawn(&binary, &sim, state.path(), log.as_deref());
    let mut bot = Bot {
        binary,
        sim: sim.clone(),
        state: state.path().to_path_buf(),
        child,
        log,
    };
    // Discord delivers nothing sent before a bot ever connected.
    smol::block_on(sim.wait_for(Duration::from_secs(10), |e| {
        matches!(e, smolcord_sim::SimEvent::Identified { .. })
    }))
    .expect("the first session");

    let started = Instant::now();
    let results_dir = state.path().join("spool/results");
    let results_channel = sim.dm_channel_of(RESULTS_USER);
    let pad = "0".repeat(1900);
    let mut expected: Vec<Expected> = Vec::new();
    let mut applied = BTreeMap::<String, usize>::new();
    let mut unexpected_exits = 0;
    let mut history_failures = 0;
    let mut slow_gaps = 0;
    let mut strangers = 0u64;
    let mut dms = Dms {
        sent: 0,
        gap_sent: 0,
    };
    let mut results = 0usize;
    for n in 0..faults {
        for _ in 0..DMS_PER_FAULT {
            dms.send(&sim, &mut expected, false);
            std::thread::sleep(DM_GAP);
        }
        if n % 2 == 0 {
            let parts: Vec<String> = if results % 3 == 0 {
                vec![format!("<r{results}>")]
            } else {
                (0..3).map(|p| format!("<r{results}>.{p}")).collect()
            };
            let content = if parts.len() == 1 {
                format!("{} result in one part", parts[0])
            } else {
                parts
                    .iter()
                    .map(|p| format!("{p} {pad}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let body = serde_json::json!({
                "channel_id": results_channel.to_string(),
                "content": content,
            });
            let tmp = results_dir.join(format!(".{results}.tmp"));
            std::fs::write(&tmp, body.to_string()).expect("a result");
            std::fs::rename(&tmp, results_dir.join(format!("soak-{results}.json")))
                .expect("rename");
            expected.push(Expected {
                parts,
                result: true,
                gap: false,
                id: None,
            });
            results += 1;
        }
        let chaos = random_chaos();
        *applied.entry(name(&chaos)).or_default() += 1;
        match chaos {
            Chaos::Gateway(fault) => {
                sim.fault(fault);
                if n % 5 == 4 {
                    sim.fault(Fault::Delay(Duration::ZERO));
                }
            }
            Chaos::Rest(kind) => sim.rest_fault(RestFault {
                kind,
                count: 1,
                path_prefix: None,
            }),
            Chaos::Crowd => {
                for _ in 0..CROWD {
                    sim.send_dm(FIRST_STRANGER + strangers, "stranger", "hello?");
                    strangers += 1;
                }
            }
            Chaos::Kill => unexpected_exits += usize::from(bot.restart(Signal::KILL)),
            Chaos::Term => unexpected_exits += usize::from(bot.restart(Signal::TERM)),
            Chaos::Op9Gap | Chaos::ExpiredGap | Chaos::UsersGap => {
                let events = sim.subscribe();
                let op9 = matches!(chaos, Chaos::Op9Gap);
                let gap = if op9 {
                    // The connection serving the session is the one that
                    // identified or resumed last; an op 9 on a socket on
                    // its way out makes no gap.
                    let live = sim.events().iter().rev().find_map(|e| match e {
                        SimEvent::Identified { conn, .. } | SimEvent::Resumed { conn, .. } => {
                            Some(*conn)
                        }
                        _ => None,
                    });
                    sim.fault(Fault::InvalidSession(false)) > 0
                        && next_event(&events, Duration::from_secs(5), |e| {
                            matches!(e, SimEvent::InvalidSession { conn, .. } if Some(*conn) == live)
                        })
                        .is_some()
                } else {
                    unexpected_exits += usize::from(bot.stop(Signal::KILL));
                    // Once the simulator has seen the socket go, the
                    // session is only resumable; then it expires.
                    next_event(&events, Duration::from_secs(5), |e| {
                        matches!(e, SimEvent::ClientClosed { .. })
                    });
                    sim.expire_sessions();
                    true
                };
                if gap {
                    if matches!(chaos, Chaos::UsersGap) {
                        dms.send_from_all(&sim, &mut expected, true);
                    }
                    for _ in 0..GAP_DMS {
                        dms.send(&sim, &mut expected, true);
                    }
                    // And every other gap, the first history read of a
                    // DM channel fails past the REST client's retries.
                    if fastrand::bool() {
                        let user = if fastrand::bool() { OWNER } else { ALICE };
                        let channel = sim.dm_channel_of(user);
                        sim.rest_fault(RestFault {
                            kind: RestFaultKind::ServerError(500),
                            count: 3,
                            path_prefix: Some(format!("GET /api/v10/channels/{channel}/messages")),
                        });
                        history_failures += 1;
                    }
                }
                if !op9 {
                    bot.start();
                }
                if gap
                    && next_event(&events, GAP_SESSION, |e| {
                        matches!(e, SimEvent::Identified { .. })
                    })
                    .is_none()
                {
                    slow_gaps += 1;
                }
            }
        }
    }
    sim.fault(Fault::Delay(Duration::ZERO));
    let injected = started.elapsed();

    // Wait for every part (bounded), then stop the bot properly.
    let deadline = Instant::now() + SETTLE;
    let mut channels = vec![
        sim.dm_channel_of(OWNER),
        sim.dm_channel_of(ALICE),
        results_channel,
    ];
    channels.extend(users().map(|user| sim.dm_channel_of(user)));
    let copies = |counts: &HashMap<String, usize>, part: &String| -> usize {
        counts.get(part).copied().unwrap_or(0)
    };
    loop {
        let counts = tally(&sim, &channels);
        let arrived = expected
            .iter()
            .all(|e| e.parts.iter().all(|p| copies(&counts, p) > 0));
        if arrived || Instant::now() > deadline {
            break;
        }
        if bot.child.try_wait().expect("wait").is_some() {
            unexpected_exits += 1;
            bot.restart(Signal::TERM);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    kill_process(Pid::from_child(&bot.child), Signal::TERM).expect("SIGTERM");
    let status = bot.child.wait().expect("reaped");

    // [replies, results, gap DMs] x [delivered, lost, duplicated]
    let mut figures = [[0usize; 3]; 3];
    let counts = tally(&sim, &channels);
    for e in &expected {
        let counts: Vec<usize> = e.parts.iter().map(|p| copies(&counts, p)).collect();
        let rows = [Some(usize::from(e.result)), e.gap.then_some(2)];
        for row in rows.into_iter().flatten() {
            let row = &mut figures[row];
            if counts.contains(&0) {
                row[1] += 1;
            } else {
                row[0] += 1;
            }
            if counts.iter().any(|&c| c > 1) {
                row[2] += 1;
            }
        }
    }
    let totals = sim.stats().totals;
    let lost: Vec<&Expected> = expected
        .iter()
        .filter(|e| e.parts.iter().any(|p| copies(&counts, p) == 0))
        .collect();
    if !lost.is_empty() {
        // Each lost one named (the first 40), with when it was sent (the
        // log's clock is the host's: Discord's less the lag), and the
        // bot's notices in the chats, to tell noticed from silent.
        println!("lost (the first 40 of {}):", lost.len());
        for e in lost.iter().take(40) {
            let sent = e.id.map(|id| (id.get() >> 22) + 1_420_070_400_000);
            let host = sent.map(|ms| ms.saturating_sub(CLOCK_LAG.as_millis() as u64));
            println!(
                "  {} gap={} id={:?} sent (host clock) {}",
                e.parts[0],
                e.gap,
                e.id.map(Snowflake::get),
                host.map_or("-".into(), utc)
            );
        }
        for &channel in &channels {
            for message in sim.messages_in(channel) {
                if message.content.starts_with("While I was offline") {
                    let answers = &message.object["message_reference"]["message_id"];
                    println!(
                        "  notice in {channel} (replying to {answers}): {}",
                        message.content.chars().take(90).collect::<String>()
                    );
                }
            }
        }
    }
    println!("faults applied: {applied:?}");
    println!(
        "{faults} faults in {:.0} s; gateway: {} session(s) started, {} resumes; \
         {unexpected_exits} unexpected exit(s); last exit {status}",
        injected.as_secs_f64(),
        totals.sessions_started,
        totals.resumes,
    );
    println!(
        "replies delivered / lost / duplicated: {} / {} / {}  (of {} DMs)",
        figures[0][0], figures[0][1], figures[0][2], dms.sent
    );
    println!(
        "  of them sent inside gaps: {} / {} / {}  (of {}; {slow_gaps} gap(s) without a fresh session in {} s)",
        figures[2][0],
        figures[2][1],
        figures[2][2],
        dms.gap_sent,
        GAP_SESSION.as_secs()
    );
    println!(
        "results delivered / lost / duplicated: {} / {} / {}  (of {results})",
        figures[1][0], figures[1][1], figures[1][2]
    );
    println!(
        "re-sends Discord deduplicated by nonce: {}; gaps whose first history read failed: {history_failures}; {strangers} strangers DMed; host clock {} s behind Discord's",
        totals.duplicates_prevented,
        CLOCK_LAG.as_secs()
    );
    let clean = figures.iter().all(|row| row[1] == 0 && row[2] == 0);
    if !clean || !status.success() || unexpected_exits > 0 {
        std::process::exit(1);
    }
}
