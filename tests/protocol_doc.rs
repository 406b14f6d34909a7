//! Generates `docs/protocol.md`, the annotated walk through one gateway
//! session, from the client's real wire trace (`smolcord::wire`) against the
//! simulator, and fails when the file in the repository differs, so the
//! document cannot drift from the code. Regenerate it with
//!
//! ```text
//! SMOLCORD_BLESS=1 cargo test --test protocol_doc
//! ```
//!
//! Times, ports, snowflakes and message timestamps are normalised, and
//! heartbeats are shown only where the walkthrough is about them (elsewhere
//! their timing depends on the schedule's random start), so the output is
//! the same on every run.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods)] // a test reads and writes files

use smol::LocalExecutor;
use smolcord::shard::{
    Backoff, EndReason, Shard, ShardConfig, ShardError, ShardEvent, ShardHandle,
};
use smolcord::sim::{Fault, SimConfig, Simulator};
use smolcord::wire::CLIENT_TARGET;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BLESS_ENV: &str = "SMOLCORD_BLESS";
const DOC: &str = "docs/protocol.md";
const SOON: Duration = Duration::from_secs(20);

/// The client's trace lines, as logged.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target() == CLIENT_TARGET
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
            lines.push(record.args().to_string());
        }
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

/// Lines logged since the last call.
fn take_lines(seen: &mut usize) -> Vec<String> {
    let lines = CAPTURE.0.lock().unwrap_or_else(|e| e.into_inner());
    let new = lines[*seen..].to_vec();
    *seen = lines.len();
    new
}

/// Which heartbeat lines a step shows.
#[derive(Clone, Copy)]
enum Beats {
    /// None: their timing is not what the step is about.
    Hidden,
    /// The first two complete beat-and-ACK pairs.
    TwoPairs,
    /// Those before the connection closed (the unanswered beat of a zombie).
    UntilClose,
}

struct Step {
    title: &'static str,
    intro: &'static str,
    lines: Vec<String>,
}

async fn next_event(
    handle: &ShardHandle,
    what: &str,
    mut pred: impl FnMut(&Result<ShardEvent, ShardError>) -> bool,
) {
    let deadline = Instant::now() + SOON;
    loop {
        let event = futures_lite::future::or(async { Some(handle.next_event().await) }, async {
            async_io::Timer::at(deadline).await;
            None
        })
        .await;
        match event {
            Some(event) if pred(&event) => return,
            Some(Err(error)) => panic!("the shard stopped waiting for {what}: {error}"),
            Some(_) => {}
            None => panic!("no {what} within {SOON:?}"),
        }
    }
}

async fn dispatch(handle: &ShardHandle, name: &str) {
    next_event(
        handle,
        name,
        |e| matches!(e, Ok(ShardEvent::Dispatch(d)) if d.name == name),
    )
    .await;
}

async fn acks(handle: &ShardHandle, n: usize) {
    for _ in 0..n {
        next_event(handle, "a heartbeat ACK", |e| {
            matches!(e, Ok(ShardEvent::Heartbeat(_)))
        })
        .await;
    }
}

fn is_beat(line: &str) -> bool {
    line.contains(" op 1 Heartbeat ") || line.contains(" op 11 HeartbeatAck ")
}

fn keep_beats(lines: Vec<String>, beats: Beats) -> Vec<String> {
    match beats {
        Beats::Hidden => lines.into_iter().filter(|l| !is_beat(l)).collect(),
        Beats::UntilClose => {
            let mut closed = false;
            lines
                .into_iter()
                .filter(|line| {
                    closed |= line.contains(" -> close ");
                    !(closed && is_beat(line))
                })
                .collect()
        }
        Beats::TwoPairs => {
            let beats: Vec<&String> = lines.iter().filter(|l| is_beat(l)).collect();
            let start = beats
                .iter()
                .position(|l| l.contains(" -> op 1 "))
                .expect("a beat");
            let pairs: Vec<String> = beats[start..]
                .iter()
                .take(4)
                .map(|l| (*l).clone())
                .collect();
            assert_eq!(pairs.len(), 4, "two beats and their ACKs: {pairs:?}");
            pairs
        }
    }
}

/// Runs the script against the simulator and returns the steps with the
/// trace of each, plus the session history's summary.
fn record() -> (Vec<Step>, Vec<String>) {
    log::set_logger(&CAPTURE).expect("the only logger in this test binary");
    log::set_max_level(log::LevelFilter::Trace);
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .expect("simulator");
    let mut config = ShardConfig::new(
        sim.config().token.clone(),
        smolcord::protocol::Intents::DIRECT_MESSAGES,
    );
    config.gateway_url = Some(sim.gateway_url());
    config.backoff = Backoff::new(
        Duration::from_millis(20),
        Duration::from_millis(200),
        Duration::from_secs(60),
    );
    config.invalid_session_wait = (Duration::from_millis(10), Duration::from_millis(20));
    let ex = LocalExecutor::new();
    let (shard, handle) = Shard::new(config);
    let driver = ex.spawn(shard.run());
    let mut seen = 0;
    let mut steps = Vec::new();
    let mut step = |title, intro, beats, seen: &mut usize| {
        steps.push(Step {
            title,
            intro,
            lines: keep_beats(take_lines(seen), beats),
        });
    };
    let session_id = || {
        handle
            .status()
            .state
            .session
            .map(|s| s.session_id)
            .expect("a session")
    };
    let mut secrets = vec![sim.config().token.expose().to_owned()];
    smol::block_on(ex.run(async {
        dispatch(&handle, "READY").await;
        secrets.push(session_id());
        step(
            "Connect, Hello, Identify, READY",
            "The shard connects, the gateway says Hello with the heartbeat interval, the shard identifies (a fresh session) and the gateway answers READY. The shard then says it is online.",
            Beats::Hidden,
            &mut seen,
        );
        acks(&handle, 3).await;
        step(
            "Heartbeats",
            "On a fixed schedule the shard sends op 1 with the last sequence number it saw; the gateway answers op 11. A beat without an answer for a whole interval makes the connection a zombie (below).",
            Beats::TwoPairs,
            &mut seen,
        );
        sim.send_dm(4242, "alice", "hello, bot");
        dispatch(&handle, "MESSAGE_CREATE").await;
        step(
            "A dispatch",
            "Events arrive as op 0 with a name (`t`) and a sequence number (`s`). The shard hands each to the bridge exactly once, in order.",
            Beats::Hidden,
            &mut seen,
        );
        sim.fault(Fault::Reconnect);
        dispatch(&handle, "RESUMED").await;
        step(
            "op 7 Reconnect, then Resume and RESUMED",
            "The gateway asks the shard to reconnect. It closes with 4000 (which keeps the session), connects to the session's resume URL and resumes; the gateway replays what was missed (nothing here) and says RESUMED. No identify is spent.",
            Beats::Hidden,
            &mut seen,
        );
        acks(&handle, 1).await;
        take_lines(&mut seen);
        sim.fault(Fault::DropAcks(1));
        dispatch(&handle, "RESUMED").await;
        step(
            "A zombie connection",
            "The simulator stops answering heartbeats. At the next deadline the beat before is still unanswered, so the shard judges the connection a zombie, closes it and resumes on a new one.",
            Beats::UntilClose,
            &mut seen,
        );
        sim.fault(Fault::InvalidSession(false));
        dispatch(&handle, "READY").await;
        secrets.push(session_id());
        step(
            "op 9 Invalid Session",
            "The gateway says the session is gone (`d` false). The shard waits a moment (Discord asks for 1-5 s; shortened here), then identifies afresh and gets a new READY.",
            Beats::Hidden,
            &mut seen,
        );
        handle.shutdown();
        futures_lite::future::or(async { driver.await.expect("a clean stop") }, async {
            async_io::Timer::after(SOON).await;
            panic!("the shard did not stop");
        })
        .await;
        step(
            "Shutdown",
            "On SIGTERM the shard closes with 4000 too, so the next start can resume the session it saved.",
            Beats::Hidden,
            &mut seen,
        );
    }));
    // The whole trace, not only what the document shows, keeps its secrets.
    let all = CAPTURE
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .join("\n");
    for secret in &secrets {
        assert!(
            !all.contains(secret.as_str()),
            "a secret in the trace:\n{all}"
        );
    }
    assert!(all.contains("\"token\":\"<redacted>\""), "{all}");
    let history = handle
        .status()
        .state
        .history
        .records()
        .map(|r| {
            let end = r
                .end
                .map_or("live".to_owned(), |e: EndReason| e.to_string());
            format!("{} -> {end}", r.start.as_str())
        })
        .collect();
    (steps, history)
}

/// Makes a trace line the same on every run.
fn normalise(line: &str, ids: &mut HashMap<String, String>) -> String {
    // `conn 1 +0.123s -> ...`: drop the time.
    let mut parts = line.splitn(4, ' ');
    let mut out = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("conn"), Some(conn), Some(time), Some(rest)) if time.starts_with('+') => {
            format!("conn {conn} {rest}")
        }
        _ => line.to_owned(),
    };
    // The simulator's port.
    while let Some(at) = out.find("127.0.0.1:") {
        let start = at + "127.0.0.1:".len();
        let end = out[start..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(out.len(), |n| start + n);
        out.replace_range(at..end, "gateway.local");
    }
    // Snowflakes (15+ digits) become stable placeholders, the same id the
    // same everywhere.
    let mut result = String::with_capacity(out.len());
    let mut digits = String::new();
    for c in out.chars().chain(std::iter::once('\0')) {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        if digits.len() >= 15 {
            let next = ids.len() + 1;
            let id = ids
                .entry(digits.clone())
                .or_insert_with(|| format!("1{next:0>width$}", width = digits.len() - 1));
            result.push_str(id);
        } else {
            result.push_str(&digits);
        }
        digits.clear();
        if c != '\0' {
            result.push(c);
        }
    }
    // Message timestamps: "2026-01-02T03:04:05.678+00:00".
    let mut out = result;
    let mut from = 0;
    while let Some(found) = out[from..].find("\"timestamp\":\"") {
        let start = from + found + "\"timestamp\":\"".len();
        let Some(len) = out[start..].find('"') else {
            break;
        };
        out.replace_range(start..start + len, "2025-01-01T00:00:00.000000+00:00");
        from = start;
    }
    out
}

/// What handles a line, and where.
fn annotate(line: &str) -> &'static str {
    let has = |s: &str| line.contains(s);
    if has(" open ") {
        "[`transport`](../src/transport/mod.rs) `Connection::connect` opens the WebSocket, asking for API v10 and JSON ([`transport/url.rs`](../src/transport/url.rs)). A resume goes to the `resume_gateway_url` READY gave."
    } else if has(" <- op 10 Hello") {
        "[`shard::driver`](../src/shard/driver/connection.rs) (`drive`) reads the interval; [`heartbeat`](../src/heartbeat/mod.rs) schedules beat n at `hello + interval × jitter + n × interval`, so a late beat never delays the next."
    } else if has(" -> op 2 Identify") {
        "`converse` in [`shard::driver`](../src/shard/driver/connection.rs) builds it ([`protocol::commands`](../src/protocol/commands.rs)) after [`shard::identify_budget`](../src/shard/identify_budget.rs) allows one (1000 a day). The token is redacted by [`wire`](../src/wire.rs)."
    } else if has(" -> op 6 Resume") {
        "`converse` resumes the session saved in [`shard::session`](../src/shard/session.rs) from the last sequence number delivered; token and session id redacted."
    } else if has(" <- op 0 READY") {
        "`on_ready`: the session id and resume URL go into [`shard::session`](../src/shard/session.rs) (saved to `session.json`); [`shard::history`](../src/shard/history.rs) marks the session up."
    } else if has(" <- op 0 RESUMED") {
        "`on_resumed`: the session is up again; what it replayed came before it, and any replay of an event already delivered is dropped ([`shard::session`](../src/shard/session.rs) `check_seq`)."
    } else if has(" -> op 3 PresenceUpdate") {
        "`set_online`: online at once after READY or RESUMED; every command goes through the 120-per-60 s limiter ([`shard::ratelimit`](../src/shard/ratelimit.rs))."
    } else if has(" -> op 1 Heartbeat") {
        "`beat` in [`shard::driver`](../src/shard/driver/connection.rs) at the deadline; how late it went out is recorded in [`heartbeat::account`](../src/heartbeat/account.rs) (`smolcord status` draws it)."
    } else if has(" <- op 11 HeartbeatAck") {
        "`on_message`: the round trip goes into the account; `smolcord status` draws it as the round-trip chart."
    } else if has(" <- op 7 Reconnect") {
        "`on_message`: close and resume at once, without the reconnect backoff."
    } else if has(" <- op 9 InvalidSession") {
        "`on_message`: `d` says whether the session may be resumed; here it may not, so the shard forgets it and identifies after a pause."
    } else if has(" <- op 0 ") {
        "`on_dispatch`: the sequence number is checked ([`shard::session`](../src/shard/session.rs) `check_seq`: replays dropped, gaps logged) and the event queued for the bridge ([`shard::queue`](../src/shard/queue.rs), bounded: a slow bridge pauses reading, never the heartbeat)."
    } else if has(" -> close ") {
        "[`transport`](../src/transport/mod.rs) `Connection::close`: smolcord always closes with 4000, so the session stays resumable (1000 or 1001 would end it and show the bot offline). [`shard::history`](../src/shard/history.rs) records why the session ended."
    } else if has(" <- close ") {
        "`connection_lost`: [`protocol::close_code`](../src/protocol/close_code.rs) decides: resume, identify afresh, or stop (fatal codes)."
    } else if has("without a close frame") {
        "`connection_lost`: the TCP connection ended without a close frame; the shard resumes."
    } else {
        ""
    }
}

fn render(steps: &[Step], history: &[String]) -> String {
    let mut ids = HashMap::new();
    let mut out = String::new();
    out.push_str("# One gateway session, frame by frame\n\n");
    out.push_str("<!-- Generated by tests/protocol_doc.rs; do not edit. Regenerate: SMOLCORD_BLESS=1 cargo test --test protocol_doc -->\n\n");
    out.push_str(
        "This is a real trace of smolcord's shard against the embedded gateway simulator \
(`smolcord sim`), printed by the wire trace (`RUST_LOG=smolcord::wire=trace`; the simulator's \
side is `smolcord::sim::wire`). Each line is one gateway frame: the connection number, the \
direction (`->` sent by smolcord, `<-` received), the opcode and event, the size on the wire, \
and the JSON with the token and session id redacted; frames over 1 KiB are abbreviated. The \
live trace also shows the time since the connection opened; here times are left out, the \
port is `gateway.local`, snowflakes are numbered and timestamps fixed, so the file is the same \
on every run. Heartbeats are shown only where they are the subject.\n\n\
`tests/protocol_doc.rs` runs the session and fails when this file is stale.\n",
    );
    // Each kind of frame is explained where it first appears.
    let mut explained = std::collections::HashSet::new();
    for (n, step) in steps.iter().enumerate() {
        let _ = write!(out, "\n## {}. {}\n\n{}\n", n + 1, step.title, step.intro);
        for line in &step.lines {
            let line = normalise(line, &mut ids);
            let _ = write!(out, "\n```text\n{line}\n```\n");
            let note = annotate(&line);
            if !note.is_empty() && explained.insert(note) {
                let _ = writeln!(out, "\n{note}");
            }
        }
    }
    out.push_str("\n## What the session history kept\n\n");
    out.push_str("`smolcord status` shows these as its timeline (newest last), from [`shard::history`](../src/shard/history.rs):\n\n");
    for entry in history {
        let _ = writeln!(out, "- {entry}");
    }
    out
}

#[test]
fn docs_protocol_md_is_current() {
    let (steps, history) = record();
    let generated = render(&steps, &history);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    if std::env::var_os(BLESS_ENV).is_some() {
        std::fs::write(&path, &generated).expect("write docs/protocol.md");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != generated {
        let first = current
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(current.lines().count().min(generated.lines().count()));
        panic!(
            "{DOC} is stale (first difference at line {}):\n  file: {:?}\n  now:  {:?}\nRegenerate it with: {BLESS_ENV}=1 cargo test --test protocol_doc",
            first + 1,
            current.lines().nth(first).unwrap_or(""),
            generated.lines().nth(first).unwrap_or(""),
        );
    }
}
