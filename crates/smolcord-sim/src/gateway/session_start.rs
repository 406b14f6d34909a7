//! A new session for an accepted Identify (`identify.rs` checks it): the
//! pacing of its `max_concurrency` bucket and the session start budget
//! (op 9 `false` when either says no), the session start, and READY (with
//! a GUILD_CREATE per guild of the shard when the session has GUILDS).

use super::identify::{check_identify, Accepted, Answer};
use crate::model::config::{SimConfig, SimGuild};
use crate::model::objects;
use crate::model::payload_checks::Refusal;
use crate::state::conns::Out;
use crate::state::events::SimEvent;
use crate::state::session::Session;
use crate::state::shared::{Shared, State};
use serde_json::{json, Value};
use smolcord::protocol::{shard_for_guild, Frame, Intents};
use std::time::Instant;

/// Identify on connection `conn`, whose session slot is `slot`.
pub(crate) fn handle_identify(
    shared: &Shared,
    conn: u64,
    slot: &mut Option<String>,
    frame: &Frame,
) -> Result<Answer, Refusal> {
    {
        let mut state = shared.lock();
        state.stats.totals.identifies += 1;
        if let Some(stats) = state.stats.conn(conn) {
            stats.identifies += 1;
        }
    }
    let config = &shared.config;
    let accepted = check_identify(frame, config, slot.is_some())?;
    let now = Instant::now();
    let mut state = shared.lock();
    if let Err(reason) = pace(&mut state, config, accepted.shard[0], now) {
        log::info!(
            "sim: identify of shard {} refused ({reason})",
            accepted.shard[0]
        );
        return Ok(Answer::InvalidSession);
    }
    let session_id = start_session(&mut state, config, conn, &accepted, now);
    *slot = Some(session_id.clone());

    let [shard_id, shard_count] = accepted.shard;
    let own_guilds: Vec<SimGuild> = state
        .dir
        .guilds
        .iter()
        .filter(|g| shard_for_guild(g.id, shard_count) == shard_id)
        .cloned()
        .collect();
    let ready = ready_body(
        config,
        &session_id,
        &shared.resume_gateway_url(),
        &own_guilds,
        accepted.identify.shard,
    );
    state.push_to_session(&session_id, "READY", &ready);
    if accepted.identify.intents.contains(Intents::GUILDS) {
        for guild in &own_guilds {
            let d = objects::guild_create(guild, config);
            state.push_to_session(&session_id, "GUILD_CREATE", &d);
        }
    }
    state.stats.totals.sessions_started += 1;
    if let Some(stats) = state.stats.conn(conn) {
        stats.session_id = Some(session_id.clone());
    }
    log::info!(
        "sim: connection {} identified: session {session_id}, intents {:?}",
        conn,
        accepted.identify.intents
    );
    state.emit(SimEvent::Identified {
        conn,
        session_id,
        identify: accepted.identify,
    });
    Ok(Answer::Done)
}

/// Identify pacing: counts the arrival in its `max_concurrency` bucket
/// and spends a session start, or says why not (the caller answers op 9
/// `false`): too early for its bucket while pacing is enforced, or the
/// session start budget is spent.
fn pace(
    state: &mut State,
    config: &SimConfig,
    shard_id: u32,
    now: Instant,
) -> Result<(), &'static str> {
    let pacing = state.limits.pacing();
    let bucket = state.limits.bucket_of(shard_id);
    let since_last = state.limits.since_last_identify(bucket, now);
    // Slack for when frames are read, not when they were sent: clients
    // (and gateway-queue) space identifies by exactly the window, and a busy
    // host delays one arrival more than the next. Discord publishes no
    // tolerance; a tenth of the window still catches a client that ignores
    // its queue (its identifies come milliseconds apart).
    let slack = config.identify_window / 10;
    let too_early = since_last.is_some_and(|gap| gap + slack < config.identify_window);
    {
        let totals = &mut state.stats.totals;
        *totals.identifies_by_bucket.entry(bucket).or_default() += 1;
        if too_early {
            totals.identifies_too_early += 1;
        }
        if let Some(gap) = since_last {
            let ms = gap.as_secs_f64() * 1000.0;
            totals.min_identify_gap_ms = Some(totals.min_identify_gap_ms.map_or(ms, |m| m.min(ms)));
        }
    }
    if pacing.enforce && too_early {
        return Err("too early for its max_concurrency bucket");
    }
    if !state.limits.start_session(bucket, now) {
        return Err("session start limit spent");
    }
    Ok(())
}

/// Starts the session an accepted Identify asked for on connection
/// `conn` (per-payload compression only without transport compression)
/// and returns its id.
fn start_session(
    state: &mut State,
    config: &SimConfig,
    conn: u64,
    accepted: &Accepted,
    now: Instant,
) -> String {
    state.sessions.expire(now, config.resume_window);
    let identify = &accepted.identify;
    let session_id = objects::session_id();
    let mut session = Session::new(
        session_id.clone(),
        conn,
        identify.intents,
        accepted.shard,
        config.replay_capacity,
    );
    let zlib = state
        .stats
        .conn(conn)
        .is_some_and(|s| s.compression.is_some());
    session.payload_compress = identify.compress == Some(true) && !zlib;
    if identify.compress == Some(true) && zlib {
        log::info!("sim: Identify compress ignored: transport compression is on");
    }
    state
        .conns
        .queue(conn, Out::PayloadCompression(session.payload_compress));
    if session.payload_compress {
        if let Some(stats) = state.stats.conn(conn) {
            stats.compression = Some("payload".to_owned());
        }
    }
    state.sessions.insert(session);
    session_id
}

/// READY's `d` for a new session: the shard's guilds unavailable (their
/// GUILD_CREATEs follow), `shard` only when the client sent one.
fn ready_body(
    config: &SimConfig,
    session_id: &str,
    resume_gateway_url: &str,
    own_guilds: &[SimGuild],
    shard: Option<[u32; 2]>,
) -> Value {
    let mut ready = json!({
        "v": 10,
        "user_settings": {},
        "user": objects::bot_user(config),
        "session_type": "normal",
        "session_id": session_id,
        "resume_gateway_url": resume_gateway_url,
        "relationships": [],
        "private_channels": [],
        "presences": [],
        "guilds": own_guilds
            .iter()
            .map(|g| json!({"id": g.id.to_string(), "unavailable": true}))
            .collect::<Vec<_>>(),
        "guild_join_requests": [],
        "geo_ordered_rtc_regions": ["local"],
        "application": {"id": config.bot_id.to_string(), "flags": 0},
        "_trace": ["[\"smolcord-sim\",{\"micros\":0.0}]"],
    });
    if let Some(shard) = shard {
        ready["shard"] = json!(shard);
    }
    ready
}
