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
#![allow(clippy::disallowed_methods)] // a test reads and writes files

use smol::LocalExecutor;
use smolcord::protocol::{CloseCode, Command, Intents, RequestGuildMembers, Snowflake};
use smolcord::rest::RestClient;
use smolcord::shard::{
    Backoff, EndReason, Shard, ShardConfig, ShardError, ShardEvent, ShardHandle, ShardSet,
};
use smolcord::transport::Compression;
use smolcord::wire::CLIENT_TARGET;
use smolcord_sim::{Fault, SimChannel, SimConfig, SimGuild, Simulator};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BLESS_ENV: &str = "SMOLCORD_BLESS";
const DOC: &str = "docs/protocol.md";
const SOON: Duration = Duration::from_secs(20);

/// The client's trace lines, as logged, with when they were.
struct Capture(Mutex<Vec<(Instant, String)>>);

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target() == CLIENT_TARGET
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
            lines.push((Instant::now(), record.args().to_string()));
        }
    }

    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

/// Lines logged since the last call.
fn take_lines(seen: &mut usize) -> Vec<(Instant, String)> {
    let lines = CAPTURE.0.lock().unwrap_or_else(|e| e.into_inner());
    let new = lines[*seen..].to_vec();
    *seen = lines.len();
    new
}

/// The heartbeat interval of this run, and what Discord sends.
const INTERVAL: Duration = Duration::from_millis(500);

/// Which heartbeat lines a step shows, and whether with times.
#[derive(Clone, Copy, PartialEq)]
enum Beats {
    /// None: their timing is not what the step is about.
    Hidden,
    /// The first two complete beat-and-ACK pairs, timed.
    TwoPairs,
    /// Those before the connection closed (the unanswered beat of a
    /// zombie), timed.
    UntilClose,
    /// The server's op 1 and the beat and ACK that answer it.
    Requested,
    /// None, but the other lines timed (a wait is the subject), and each
    /// connection's lines together: two connections at once interleave as
    /// the network decides, which would make the generated page differ
    /// from run to run (conn 12's open landed before conn 11's READY under
    /// load).
    HiddenTimed,
}

impl Beats {
    fn timed(self) -> bool {
        matches!(
            self,
            Beats::TwoPairs | Beats::UntilClose | Beats::HiddenTimed
        )
    }
}

/// Where a step's rules come from: a title and a link into Discord's docs.
type Source = (&'static str, &'static str);

struct Step {
    title: &'static str,
    intro: &'static str,
    sources: &'static [Source],
    /// Preformatted lines (a REST exchange) shown before the trace.
    preface: Vec<String>,
    lines: Vec<String>,
}

type Item = Result<ShardEvent, ShardError>;

async fn next_event(handle: &ShardHandle, what: &str, mut pred: impl FnMut(&Item) -> bool) {
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

async fn stopped(driver: smol::Task<Result<(), ShardError>>) -> Result<(), ShardError> {
    futures_lite::future::or(driver, async {
        async_io::Timer::after(SOON).await;
        panic!("the shard did not stop");
    })
    .await
}

fn is_beat(line: &str) -> bool {
    line.contains(" -> op 1 Heartbeat ") || line.contains(" <- op 11 HeartbeatAck ")
}

fn keep_beats(lines: Vec<(Instant, String)>, beats: Beats) -> Vec<(Instant, String)> {
    match beats {
        Beats::Hidden | Beats::HiddenTimed => {
            lines.into_iter().filter(|(_, l)| !is_beat(l)).collect()
        }
        Beats::UntilClose => {
            let mut closed = false;
            lines
                .into_iter()
                .filter(|(_, line)| {
                    closed |= line.contains(" -> close ");
                    !(closed && is_beat(line))
                })
                .collect()
        }
        Beats::TwoPairs => {
            let beats: Vec<_> = lines.iter().filter(|(_, l)| is_beat(l)).collect();
            let start = beats
                .iter()
                .position(|(_, l)| l.contains(" -> op 1 "))
                .expect("a beat");
            let pairs: Vec<_> = beats[start..].iter().take(4).map(|&l| l.clone()).collect();
            assert_eq!(pairs.len(), 4, "two beats and their ACKs: {pairs:?}");
            pairs
        }
        Beats::Requested => {
            let from = lines
                .iter()
                .position(|(_, l)| l.contains(" <- op 1 Heartbeat"))
                .expect("the server's op 1");
            let to = lines[from..]
                .iter()
                .position(|(_, l)| l.contains(" <- op 11 "))
                .expect("its ACK");
            lines[from..=from + to].to_vec()
        }
    }
}

/// The trace lines of a step, times shown as multiples of the interval
/// from the step's first line where the step is about time.
fn shown(lines: Vec<(Instant, String)>, beats: Beats) -> Vec<String> {
    let lines = keep_beats(lines, beats);
    let Some(&(t0, _)) = lines.first() else {
        return Vec::new();
    };
    let mut lines = lines;
    if beats == Beats::HiddenTimed {
        // Stable: each connection keeps its own order.
        lines.sort_by_key(|(_, line)| connection_of(line));
    }
    lines
        .into_iter()
        .map(|(at, line)| {
            if beats.timed() {
                let t = at.duration_since(t0).as_secs_f64() / INTERVAL.as_secs_f64();
                format!("[+{t:.1} T] {line}")
            } else {
                line
            }
        })
        .collect()
}

/// The number in a trace line's `conn N`.
fn connection_of(line: &str) -> u64 {
    line.split_whitespace()
        .skip_while(|word| *word != "conn")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

const GATEWAY: &str = "https://discord.com/developers/docs/events/gateway";
const EVENTS: &str = "https://discord.com/developers/docs/events/gateway-events";
const CODES: &str = "https://discord.com/developers/docs/topics/opcodes-and-status-codes";

/// The sections of Discord's docs this walkthrough links to, as their
/// pages name them (developers/events/gateway.mdx, gateway-events.mdx,
/// topics/opcodes-and-status-codes.mdx): a link to any other anchor fails
/// the generator, so a typo cannot ship.
const DISCORD_ANCHORS: &[&str] = &[
    "events/gateway#connecting",
    "events/gateway#get-gateway-bot",
    "events/gateway#hello-event",
    "events/gateway#sending-heartbeats",
    "events/gateway#heartbeat-interval",
    "events/gateway#heartbeat-requests",
    "events/gateway#identifying",
    "events/gateway#ready-event",
    "events/gateway#handling-a-disconnect",
    "events/gateway#initiating-a-disconnect",
    "events/gateway#resuming",
    "events/gateway#preparing-to-resume",
    "events/gateway#gateway-intents",
    "events/gateway#rate-limiting",
    "events/gateway#transport-compression",
    "events/gateway#sharding",
    "events/gateway#session-start-limit-object",
    "events/gateway-events#payload-structure",
    "events/gateway-events#identify",
    "events/gateway-events#ready",
    "events/gateway-events#resume",
    "events/gateway-events#resumed",
    "events/gateway-events#reconnect",
    "events/gateway-events#invalid-session",
    "events/gateway-events#heartbeat",
    "events/gateway-events#guild-create",
    "events/gateway-events#update-presence",
    "events/gateway-events#request-guild-members",
    "events/gateway-events#guild-members-chunk",
    "events/gateway-events#rate-limited",
    "topics/opcodes-and-status-codes#gateway-gateway-close-event-codes",
];

/// `GET /gateway/bot` as a plain HTTP/1.1 exchange: what the shard asks
/// before its first connection. Blocking: it runs before the executor does.
#[allow(clippy::disallowed_types)]
fn get_gateway_bot(sim: &Simulator) -> Vec<String> {
    use std::io::{Read, Write};
    let base = sim.api_base();
    let rest = base.strip_prefix("http://").expect("plain HTTP");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut stream = std::net::TcpStream::connect(host).expect("connect to the simulator");
    let token = sim.config().token.expose().to_owned();
    write!(
        stream,
        "GET /{path}/gateway/bot HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bot {token}\r\nUser-Agent: DiscordBot (smolcord, 0.1)\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.lines().next().unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(body.trim()).expect("JSON");
    vec![
        format!("GET /{path}/gateway/bot"),
        "Authorization: Bot <redacted>".to_owned(),
        String::new(),
        status.to_owned(),
        serde_json::to_string_pretty(&body).expect("JSON"),
    ]
}

fn base_config(sim: &Simulator) -> ShardConfig {
    let mut config = ShardConfig::new(sim.config().token.clone(), Intents::DIRECT_MESSAGES);
    config.backoff = Backoff::new(
        Duration::from_millis(20),
        Duration::from_millis(200),
        Duration::from_secs(60),
    );
    config.invalid_session_wait = (Duration::from_millis(10), Duration::from_millis(20));
    config.identify_window = IDENTIFY_WINDOW;
    config
}

/// The guild of this run.
const GUILD: Snowflake = Snowflake::new(197038439483310086);

/// The identify window of this run (Discord's is 5 s).
const IDENTIFY_WINDOW: Duration = Duration::from_millis(1000);

/// Runs the script against the simulator and returns the steps with the
/// trace of each, plus the session history's summary.
fn record() -> (Vec<Step>, Vec<String>) {
    log::set_logger(&CAPTURE).expect("the only logger in this test binary");
    log::set_max_level(log::LevelFilter::Trace);
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: INTERVAL,
        enabled_privileged_intents: Intents::GUILD_MEMBERS,
        guilds: vec![SimGuild {
            id: GUILD,
            name: "Lounge".to_owned(),
            channels: vec![SimChannel {
                id: Snowflake::new(197038439483310087),
                name: "general".to_owned(),
            }],
        }],
        identify_window: IDENTIFY_WINDOW,
        // Short, so that step 12's session expires while the shard is away.
        resume_window: Duration::from_millis(1500),
        ..SimConfig::default()
    })
    .expect("simulator");
    let rest = RestClient::new(&sim.api_base(), sim.config().token.clone());
    let mut config = base_config(&sim);
    config.intents = Intents::DIRECT_MESSAGES | Intents::GUILDS;
    // No URL: the shard asks `GET /gateway/bot`, as step 1 shows.
    config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));
    let ex = LocalExecutor::new();
    let (shard, handle) = Shard::new(config.clone());
    let driver = ex.spawn(shard.run());
    let mut seen = 0;
    let mut steps = Vec::new();
    let mut step = |title, intro, sources, beats, preface, seen: &mut usize| {
        steps.push(Step {
            title,
            intro,
            sources,
            preface,
            lines: shown(take_lines(seen), beats),
        });
    };
    let session_id = |handle: &ShardHandle| {
        handle
            .status()
            .state
            .session
            .map(|s| s.session_id)
            .expect("a session")
    };
    let mut secrets = vec![sim.config().token.expose().to_owned()];
    let mut history = Vec::new();
    let gateway_bot = get_gateway_bot(&sim);
    smol::block_on(ex.run(async {
        step(
            "GET /gateway/bot",
            "Before it connects, the shard asks the REST API where the gateway is, how many shards Discord recommends and how many fresh sessions it may start (`session_start_limit`: `total` and `remaining` per `reset_after` ms, `max_concurrency` per 5 s). It caches the URL and connects there again after a failed resume.",
            &[("Get Gateway Bot", "events/gateway#get-gateway-bot"), ("Session Start Limit Object", "events/gateway#session-start-limit-object")],
            Beats::Hidden,
            gateway_bot,
            &mut seen,
        );
        dispatch(&handle, "READY").await;
        secrets.push(session_id(&handle));
        dispatch(&handle, "GUILD_CREATE").await;
        step(
            "Connect, Hello, Identify, READY, GUILD_CREATE",
            "The shard connects, the gateway says Hello with the heartbeat interval, the shard identifies (a fresh session) and the gateway answers READY, whose `guilds` are unavailable stubs; each guild then arrives as GUILD_CREATE (with the GUILDS intent). The shard then sets its presence.",
            &[("Connecting", "events/gateway#connecting"), ("Hello Event", "events/gateway#hello-event"), ("Identifying", "events/gateway#identifying"), ("Ready Event", "events/gateway#ready-event"), ("Guild Create", "events/gateway-events#guild-create")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        acks(&handle, 3).await;
        step(
            "Heartbeats",
            "On a fixed schedule the shard sends op 1 with the last sequence number it saw; the gateway answers op 11. Times are multiples of the interval T from the first line shown (T is 500 ms in this run; Discord's Hello says about 41 250 ms).",
            &[("Sending Heartbeats", "events/gateway#sending-heartbeats"), ("Heartbeat Interval", "events/gateway#heartbeat-interval")],
            Beats::TwoPairs,
            Vec::new(),
            &mut seen,
        );
        sim.fault(Fault::RequestHeartbeat);
        acks(&handle, 1).await;
        step(
            "op 1 from the gateway",
            "The gateway may ask for a heartbeat now. The shard answers at once, outside its schedule (which it keeps), and the gateway ACKs it like any other.",
            &[("Heartbeat Requests", "events/gateway#heartbeat-requests")],
            Beats::Requested,
            Vec::new(),
            &mut seen,
        );
        sim.send_dm(4242, "alice", "hello, bot");
        dispatch(&handle, "MESSAGE_CREATE").await;
        step(
            "A dispatch",
            "Events arrive as op 0 with a name (`t`) and a sequence number (`s`). The shard hands each to its consumer exactly once, in order.",
            &[("Payload Structure", "events/gateway-events#payload-structure")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        sim.fault(Fault::Reconnect);
        dispatch(&handle, "RESUMED").await;
        step(
            "op 7 Reconnect, then Resume and RESUMED",
            "The gateway asks the shard to reconnect. It closes with 4000 (any code but 1000 and 1001 keeps the session), connects to the session's `resume_gateway_url` and resumes; the gateway replays what the shard missed (nothing here: step 11 shows a replay) and says RESUMED. No identify is spent.",
            &[("Reconnect", "events/gateway-events#reconnect"), ("Resuming", "events/gateway#resuming"), ("Preparing to Resume", "events/gateway#preparing-to-resume")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        sim.fault(Fault::Close(4000));
        dispatch(&handle, "RESUMED").await;
        step(
            "The gateway closes the connection",
            "A close frame from the server. Its code decides: 4000 (unknown error) and most others may be resumed; 4007 and 4009 need a fresh session; 4004 and 4010-4014 are fatal (step 15).",
            &[("Gateway Close Event Codes", "topics/opcodes-and-status-codes#gateway-gateway-close-event-codes"), ("Handling a Disconnect", "events/gateway#handling-a-disconnect")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        acks(&handle, 1).await;
        take_lines(&mut seen);
        sim.fault(Fault::DropAcks(1));
        dispatch(&handle, "RESUMED").await;
        step(
            "A zombie connection",
            "The simulator stops answering heartbeats. When the next beat falls due and the last one is still unanswered, the shard judges the connection a zombie, closes it (not with 1000 or 1001) and resumes on a new one.",
            &[("Sending Heartbeats", "events/gateway#sending-heartbeats")],
            Beats::UntilClose,
            Vec::new(),
            &mut seen,
        );
        sim.fault(Fault::InvalidSession(true));
        dispatch(&handle, "RESUMED").await;
        step(
            "op 9 Invalid Session, resumable",
            "`d` true: the session may be resumed (Discord says this is unlikely but possible). The shard reconnects and resumes.",
            &[("Invalid Session", "events/gateway-events#invalid-session")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        sim.fault(Fault::InvalidSession(false));
        dispatch(&handle, "READY").await;
        secrets.push(session_id(&handle));
        // Taken before the step ends, so its line lands in this step.
        dispatch(&handle, "GUILD_CREATE").await;
        step(
            "op 9 Invalid Session, not resumable",
            "`d` false: the session is gone. Discord's docs say to reconnect and identify; the shard waits a random 1–3 s first (a guard against every client of a restarted gateway identifying at once; older docs asked for 1–5 s; shortened here), then identifies afresh and gets a new READY.",
            &[("Invalid Session", "events/gateway-events#invalid-session")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        handle.shutdown();
        stopped(driver).await.expect("a clean stop");
        let saved = handle.status().resume_state();
        // While nobody is connected: kept for the session, replayed on resume.
        sim.send_dm(4242, "alice", "are you there?");
        let mut restarted = config.clone();
        restarted.state = saved;
        let (shard, handle) = Shard::new(restarted);
        let driver = ex.spawn(shard.run());
        dispatch(&handle, "RESUMED").await;
        step(
            "Stop, restart, resume with a replay",
            "On stop the shard closes with 4000, so the session lives on for a few minutes. A message arrives while nobody is connected. The next start resumes from the seq its consumer last took (`ShardStatus::resume_state`): the gateway replays what came after it (the MESSAGE_CREATE sent meanwhile; a dispatch the consumer had not taken before the stop would be replayed too), then says RESUMED.",
            &[("Initiating a Disconnect", "events/gateway#initiating-a-disconnect"), ("Resumed", "events/gateway-events#resumed")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        handle.shutdown();
        stopped(driver).await.expect("a clean stop");
        let saved = handle.status().resume_state();
        // Longer than the simulator's resume window: the session expires.
        async_io::Timer::after(Duration::from_millis(2000)).await;
        let mut restarted = config.clone();
        restarted.state = saved;
        let (shard, handle) = Shard::new(restarted);
        let driver = ex.spawn(shard.run());
        dispatch(&handle, "READY").await;
        secrets.push(session_id(&handle));
        dispatch(&handle, "GUILD_CREATE").await;
        step(
            "A failed resume",
            "This time the shard stays away longer than the session lives. Its Resume is answered with op 9 `false` — Discord says this is what happens most of the time after a long absence — so it connects to the cached gateway URL (not the resume URL) and identifies afresh.",
            &[("Preparing to Resume", "events/gateway#preparing-to-resume"), ("Handling a Disconnect", "events/gateway#handling-a-disconnect")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
        handle.close(CloseCode::NORMAL);
        stopped(driver).await.expect("a clean stop");
        assert!(handle.status().resume_state().session.is_none());
        // The first start's sessions and this one's: the state carries them.
        history = summary(&handle);
        step(
            "Ending the session",
            "`ShardHandle::close(CloseCode::NORMAL)` closes with 1000: Discord ends the session and shows the bot offline at once, and the shard forgets the session, so a later start identifies afresh.",
            &[("Initiating a Disconnect", "events/gateway#initiating-a-disconnect")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );

        let mut compressed = base_config(&sim);
        compressed.gateway_url = Some(sim.gateway_url());
        compressed.compress = Compression::Zlib;
        let (shard, handle) = Shard::new(compressed);
        let driver = ex.spawn(shard.run());
        dispatch(&handle, "READY").await;
        secrets.push(session_id(&handle));
        handle.close(CloseCode::NORMAL);
        stopped(driver).await.expect("a clean stop");
        step(
            "zlib-stream",
            "With `compress=zlib-stream` in the URL every frame from the gateway is a binary WebSocket message: one zlib stream for the whole connection, each gateway message ending with the sync-flush suffix `00 00 ff ff`. The trace shows each message inflated, with its inflated size.",
            &[("Transport Compression", "events/gateway#transport-compression")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );

        let mut sharded = base_config(&sim);
        sharded.gateway_url = Some(sim.gateway_url());
        let (set, set_handle) = ShardSet::new(sharded, 0..=1, 2, |_| Default::default())
            .expect("a set of two");
        let set_driver = ex.spawn(set.run());
        let mut ready = 0;
        while ready < 2 {
            match set_handle.next_event().await {
                Ok((_, ShardEvent::Dispatch(d))) if d.name == "READY" => ready += 1,
                Ok(_) => {}
                Err(error) => panic!("the set stopped: {error}"),
            }
        }
        for shard in set_handle.statuses() {
            secrets.extend(shard.state.session.map(|s| s.session_id));
        }
        set_handle.close(CloseCode::NORMAL);
        futures_lite::future::or(async { set_driver.await.expect("a clean stop") }, async {
            async_io::Timer::after(SOON).await;
            panic!("the set did not stop");
        })
        .await;
        step(
            "Two shards, one identify queue",
            "A set of shards 0 and 1 of 2 on one thread. `max_concurrency` is 1 here, so both are in bucket 0 (`shard_id % max_concurrency`): shard 1 connects and heartbeats at once but identifies only when the bucket's window (5 s at Discord; 1 s, 2 T, here) has passed since shard 0's Identify. Resumes never wait. (Times here are from the first line shown; each connection's lines are shown together.)",
            &[("Sharding", "events/gateway#sharding"), ("Session Start Limit Object", "events/gateway#session-start-limit-object")],
            Beats::HiddenTimed,
            Vec::new(),
            &mut seen,
        );

        let mut members = base_config(&sim);
        members.gateway_url = Some(sim.gateway_url());
        members.intents = Intents::GUILDS | Intents::GUILD_MEMBERS;
        let (shard, handle) = Shard::new(members);
        let driver = ex.spawn(shard.run());
        dispatch(&handle, "GUILD_CREATE").await;
        secrets.push(session_id(&handle));
        take_lines(&mut seen);
        let everyone = |nonce: &str| {
            Command::RequestGuildMembers(RequestGuildMembers {
                guild_id: GUILD,
                query: Some(String::new()),
                limit: 0,
                presences: None,
                user_ids: Vec::new(),
                nonce: Some(nonce.to_owned()),
            })
        };
        handle.send(everyone("all-1")).await.expect("op 8");
        dispatch(&handle, "GUILD_MEMBERS_CHUNK").await;
        handle.send(everyone("all-2")).await.expect("op 8");
        dispatch(&handle, "RATE_LIMITED").await;
        handle.close(CloseCode::NORMAL);
        stopped(driver).await.expect("a clean stop");
        step(
            "op 8 Request Guild Members",
            "A shard with the GUILD_MEMBERS intent (privileged: enabled on the Developer Portal) asks for every member of a guild (`query` \"\", `limit` 0); the answer comes as GUILD_MEMBERS_CHUNK dispatches, each with its `chunk_index` of `chunk_count` and the request's `nonce`. Discord allows one such request per guild per 30 s: the second is answered with a RATE_LIMITED dispatch naming the opcode and the wait. A prefix query needs no privileged intent.",
            &[("Request Guild Members", "events/gateway-events#request-guild-members"), ("Guild Members Chunk", "events/gateway-events#guild-members-chunk"), ("Rate Limited", "events/gateway-events#rate-limited")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );

        let mut fatal = base_config(&sim);
        fatal.gateway_url = Some(sim.gateway_url());
        let (shard, handle) = Shard::new(fatal);
        let driver = ex.spawn(shard.run());
        dispatch(&handle, "READY").await;
        secrets.push(session_id(&handle));
        sim.fault(Fault::Close(4004));
        let error = stopped(driver).await.expect_err("a fatal close");
        assert!(matches!(error, ShardError::Fatal { code: 4004, .. }), "{error}");
        step(
            "A fatal close",
            "4004 (authentication failed): reconnecting cannot help, so the shard stops and its consumer gets `ShardError::Fatal` with the code and what must change (here, the token). 4010-4014 stop it the same way.",
            &[("Gateway Close Event Codes", "topics/opcodes-and-status-codes#gateway-gateway-close-event-codes")],
            Beats::Hidden,
            Vec::new(),
            &mut seen,
        );
    }));
    // The whole trace, not only what the document shows, keeps its secrets.
    let all = CAPTURE
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(_, line)| line.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for secret in &secrets {
        assert!(
            !all.contains(secret.as_str()),
            "a secret in the trace:\n{all}"
        );
    }
    assert!(all.contains("\"token\":\"<redacted>\""), "{all}");
    (steps, history)
}

/// The session history's timeline, oldest first.
fn summary(handle: &ShardHandle) -> Vec<String> {
    handle
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
        .collect()
}

/// Makes a trace line the same on every run.
fn normalise(line: &str, ids: &mut HashMap<String, String>) -> String {
    // A step's own time (`[+1.0 T] `) stays in front.
    if let Some(rest) = line.strip_prefix("[+") {
        if let Some((time, rest)) = rest.split_once(" T] ") {
            return format!("[+{time} T] {}", normalise(rest, ids));
        }
    }
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
    // Timestamps (a message's, a member's `joined_at`):
    // "2026-01-02T03:04:05.678+00:00".
    let mut out = result;
    let mut from = 0;
    while let Some(found) = out[from..].find(":\"") {
        let start = from + found + 2;
        let value = &out[start..];
        let is_time = value.len() > 11
            && value.as_bytes()[..10].iter().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    *b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            })
            && value.as_bytes()[10] == b'T';
        from = start;
        if is_time {
            if let Some(len) = value.find('"') {
                out.replace_range(start..start + len, "2025-01-01T00:00:00.000000+00:00");
            }
        }
    }
    out
}

/// What handles a line, and where.
fn annotate(line: &str) -> &'static str {
    let has = |s: &str| line.contains(s);
    if has(" open ") {
        "[`transport`](../crates/smolcord/src/transport/mod.rs) `Connection::connect` opens the WebSocket, asking for API v10 and JSON ([`transport/url.rs`](../crates/smolcord/src/transport/url.rs)). A resume goes to the `resume_gateway_url` READY gave; a fresh session to the URL `GET /gateway/bot` gave."
    } else if has(" <- op 10 Hello") {
        "`drive` in [`shard::driver`](../crates/smolcord/src/shard/driver/connection.rs) reads the interval; [`heartbeat`](../crates/smolcord/src/heartbeat/mod.rs) schedules beat n at `hello + interval × jitter + n × interval`, so a late beat never delays the next."
    } else if has(" -> op 2 Identify") {
        "`identify` in [`shard::driver`](../crates/smolcord/src/shard/driver/connection.rs) sends it ([`protocol::commands`](../crates/smolcord/src/protocol/commands.rs)) once the identify queue ([`shard::identify_queue`](../crates/smolcord/src/shard/identify_queue.rs)) grants a turn in its `max_concurrency` bucket; [`shard::identify_budget`](../crates/smolcord/src/shard/identify_budget.rs) counts it against `session_start_limit` (`total` a day: 1000 for most bots). The token is redacted by [`wire`](../crates/smolcord/src/wire.rs)."
    } else if has(" -> op 6 Resume") {
        "`converse` in [`shard::driver`](../crates/smolcord/src/shard/driver/connection.rs) resumes the session kept in [`shard::session`](../crates/smolcord/src/shard/session.rs) from the last sequence number delivered; token and session id redacted."
    } else if has(" <- op 0 READY") {
        "`on_ready` in [`shard::driver`](../crates/smolcord/src/shard/driver/frames.rs): the session id and resume URL go into [`shard::session`](../crates/smolcord/src/shard/session.rs) (a consumer persists `ShardStatus::resume_state`); [`shard::history`](../crates/smolcord/src/shard/history.rs) marks the session up."
    } else if has(" <- op 0 RESUMED") {
        "`on_resumed`: the session is up again; what it replayed came before it, and any replay of an event already delivered is dropped ([`shard::session`](../crates/smolcord/src/shard/session.rs) `check_seq`)."
    } else if has(" -> op 3 PresenceUpdate") {
        "`set_online`: smolcord's choice, not the protocol's — Identify's presence already is the first one and survives a resume, but one op 3 after READY and RESUMED makes recovery visible at once. Every command goes through the 120-per-60 s limiter ([`shard::ratelimit`](../crates/smolcord/src/shard/ratelimit.rs))."
    } else if has(" <- op 1 Heartbeat") {
        "`on_message` in [`shard::driver`](../crates/smolcord/src/shard/driver/frames.rs): a heartbeat request is answered at once; the schedule stays as it was."
    } else if has(" -> op 1 Heartbeat") {
        "`beat` in [`shard::driver`](../crates/smolcord/src/shard/driver/connection.rs) at the deadline; how late it went out is recorded in [`heartbeat::account`](../crates/smolcord/src/heartbeat/account.rs) (`smolcord status` draws it)."
    } else if has(" <- op 11 HeartbeatAck") {
        "`on_message`: the round trip goes into the account. An ACK must arrive before the next beat falls due, or the connection is a zombie."
    } else if has(" <- op 7 Reconnect") {
        "`on_message`: close and resume at once, without the reconnect backoff."
    } else if has(" <- op 9 InvalidSession") {
        "`on_message`: `d` says whether the session may be resumed; if not, the shard forgets it and identifies afresh."
    } else if has(" <- op 0 ") {
        "`on_dispatch` in [`shard::driver`](../crates/smolcord/src/shard/driver/frames.rs): the sequence number is checked ([`shard::session`](../crates/smolcord/src/shard/session.rs) `check_seq`: replays dropped, gaps logged) and the event queued for the consumer ([`shard::queue`](../crates/smolcord/src/shard/queue.rs), bounded: a slow consumer pauses reading, never the heartbeat)."
    } else if has(" -> close ") {
        "[`transport`](../crates/smolcord/src/transport/mod.rs) `Connection::close`: the shard closes with 4000, which keeps the session resumable, unless its owner asked to end the session (`ShardHandle::close` with 1000). [`shard::history`](../crates/smolcord/src/shard/history.rs) records why the session ended."
    } else if has(" <- close ") {
        "`connection_lost` in [`shard::driver`](../crates/smolcord/src/shard/driver/frames.rs): [`protocol::close_code`](../crates/smolcord/src/protocol/close_code.rs) decides: resume, identify afresh, or stop (fatal codes)."
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
    out.push_str("<!-- Generated by crates/smolcord/tests/protocol_doc.rs; do not edit. Regenerate: SMOLCORD_BLESS=1 cargo test --test protocol_doc -->\n\n");
    out.push_str(
        "This is a real trace of smolcord's shard against the embedded gateway simulator \
(`smolcord sim`), printed by the wire trace (`RUST_LOG=smolcord::wire=trace`; the simulator's \
side is `smolcord::sim::wire`). Each line is one gateway frame: the connection number, the \
direction (`->` sent by the shard, `<-` received), the opcode and event, the size on the wire, \
and the JSON with the token and session id redacted; frames over 1 KiB are abbreviated. The \
port is `gateway.local`, snowflakes are numbered and timestamps fixed. Times are shown where a \
step is about time, as multiples of the heartbeat interval T from the step's first line: the \
simulator's Hello says **500 ms** to keep the run short, where Discord's says about 41 250 ms. \
Each step names the sections of [Discord's gateway documentation](https://discord.com/developers/docs/events/gateway) \
its rules come from.\n\n\
`crates/smolcord/tests/protocol_doc.rs` runs the session and fails when this file is stale (times aside) \
or a link in it does not resolve.\n",
    );
    // Each kind of frame is explained where it first appears.
    let mut explained = std::collections::HashSet::new();
    for (n, step) in steps.iter().enumerate() {
        let _ = write!(out, "\n## {}. {}\n\n{}\n", n + 1, step.title, step.intro);
        if !step.sources.is_empty() {
            let links: Vec<String> = step
                .sources
                .iter()
                .map(|(title, anchor)| {
                    let (page, section) = anchor.split_once('#').expect("an anchor");
                    let base = match page {
                        "events/gateway" => GATEWAY,
                        "events/gateway-events" => EVENTS,
                        "topics/opcodes-and-status-codes" => CODES,
                        other => panic!("no such page of Discord's docs here: {other}"),
                    };
                    format!("[{title}]({base}#{section})")
                })
                .collect();
            let _ = writeln!(out, "\nDiscord: {}.", links.join(", "));
        }
        if !step.preface.is_empty() {
            let text = normalise(&step.preface.join("\n"), &mut ids);
            let _ = write!(out, "\n```text\n{text}\n```\n");
        }
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
    out.push_str("`smolcord status` shows these as its timeline (newest last), from [`shard::history`](../crates/smolcord/src/shard/history.rs):\n\n");
    for entry in history {
        let _ = writeln!(out, "- {entry}");
    }
    out
}

/// Every link of `doc` resolves: a relative one to a file beside it, one
/// into Discord's docs to a section named in [`DISCORD_ANCHORS`].
fn check_links(doc: &str) {
    let dir = smolcord_testkit::repo_root().join("docs");
    let mut rest = doc;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').expect("a closed link");
        let target = &after[..end];
        rest = &after[end..];
        if let Some(page) = target.strip_prefix("https://discord.com/developers/docs/") {
            assert!(
                page == "events/gateway" || DISCORD_ANCHORS.contains(&page),
                "{DOC}: a link into Discord's docs to a section not known here: {target}"
            );
        } else if target.starts_with("http") {
            panic!("{DOC}: an outside link the generator cannot check: {target}");
        } else {
            let file = target.split('#').next().unwrap_or(target);
            assert!(
                dir.join(file).exists(),
                "{DOC}: a link to {target}, which does not exist"
            );
        }
    }
}

/// The document with the times of its timed steps (and a RATE_LIMITED's
/// `retry_after` and size) blanked: they differ from run to run, the frames and
/// their order do not.
fn without_times(doc: &str) -> String {
    let mut doc = doc.to_owned();
    let mut from = 0;
    while let Some(found) = doc[from..].find("\"retry_after\":") {
        let start = from + found + "\"retry_after\":".len();
        let len = doc[start..]
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(doc.len() - start);
        doc.replace_range(start..start + len, "?");
        from = start;
    }
    // Its size follows the digits of `retry_after`.
    let doc = doc
        .lines()
        .map(
            |line| match (line.contains(" RATE_LIMITED "), line.find(" B) ")) {
                (true, Some(end)) => match line[..end].rfind(" (") {
                    Some(start) => format!("{}(? B){}", &line[..start + 1], &line[end + 2..]),
                    None => line.to_owned(),
                },
                _ => line.to_owned(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n");
    let doc = doc.as_str();
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(at) = rest.find("[+") {
        out.push_str(&rest[..at]);
        match rest[at..].find(" T]") {
            Some(end) => {
                out.push_str("[+? T]");
                rest = &rest[at + end + 3..];
            }
            None => {
                out.push_str("[+");
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn docs_protocol_md_is_current() {
    let (steps, history) = record();
    let generated = render(&steps, &history);
    check_links(&generated);
    let path = smolcord_testkit::repo_root().join(DOC);
    if std::env::var_os(BLESS_ENV).is_some() {
        std::fs::write(&path, &generated).expect("write docs/protocol.md");
        return;
    }
    let current = without_times(&std::fs::read_to_string(&path).unwrap_or_default());
    let generated = without_times(&generated);
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
