//! Identify (op 2) and Resume (op 6): the checks Discord makes, in order,
//! with its close codes; READY and GUILD_CREATE for a new session; replay
//! and RESUMED for a resumed one.

use crate::model::config::SimConfig;
use crate::model::objects;
use crate::state::conns::Out;
use crate::state::events::SimEvent;
use crate::state::session::{ReplayError, Session};
use crate::state::shared::Shared;
use serde_json::{json, Value};
use smolcord::protocol::{shard_for_guild, CloseCode, Frame, Identify, Intents, Resume};
use std::time::Instant;

use crate::model::payload_checks::Refusal;

/// Discord documents the Identify/Resume token as the raw token; the "Bot "
/// prefix belongs to the HTTP header. In practice the gateway accepts a
/// prefixed token too (twilight has always sent one), so the simulator
/// accepts both.
fn token_ok(config: &SimConfig, sent: &str) -> bool {
    let sent = sent.strip_prefix("Bot ").unwrap_or(sent);
    sent == config.token.expose()
}

/// What the connection does after an Identify or Resume it did not
/// refuse with a close.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Nothing more: the session is started or resumed.
    Done,
    /// Op 9 `false`: no session (limits spent, too early, unknown or
    /// expired session, a seq before the replay buffer).
    InvalidSession,
}

/// Discord documents a presence's `since` as Unix ms or null, but its
/// gateway accepts other values: serenity 0.12 sends a serialized
/// `SystemTime` (`{"secs_since_epoch":…,"nanos_since_epoch":…}`) in every
/// Identify and op 3, and works against Discord. So a `since` that is not
/// an unsigned integer is read as null rather than refused.
pub(crate) fn lenient_since(presence: &mut Value) {
    if let Some(since) = presence.get_mut("since") {
        if !since.is_null() && !since.is_u64() {
            log::debug!("sim: presence `since` {since} is not Unix ms; read as null");
            *since = Value::Null;
        }
    }
}

/// Discord documents Identify's `compress` as a boolean, but Oceanic.js
/// (1.15, shipped for a year against Discord, which must take it) sends
/// the transport's name, `"zlib-stream"`. A string is read as `false`: no
/// per-payload compression (the client asks for its compression in the
/// URL), with a warning, rather than refused with 4001.
fn lenient_compress(d: &mut Value) {
    if let Some(compress) = d.get_mut("compress") {
        if compress.is_string() {
            log::warn!(
                "sim: Identify `compress` is the string {compress}, not a boolean; read as false"
            );
            *compress = Value::Bool(false);
        }
    }
}

/// Decodes Identify, accepting the deprecated `$os`/`$browser`/`$device`
/// property names Discord still takes, a `since` and a `compress`
/// Discord tolerates.
fn decode_identify(frame: &Frame) -> Result<Identify, Refusal> {
    let bad = |err: String| {
        (
            CloseCode::UNKNOWN_OPCODE,
            format!("invalid Identify: {err}"),
        )
    };
    let mut d: Value = frame.data().map_err(|e| bad(e.to_string()))?;
    crate::model::payload_checks::identify_extras(&d).map_err(bad)?;
    lenient_compress(&mut d);
    if let Some(presence) = d.get_mut("presence") {
        lenient_since(presence);
    }
    if let Some(props) = d.get_mut("properties").and_then(Value::as_object_mut) {
        for key in ["os", "browser", "device"] {
            if !props.contains_key(key) {
                let old = props.get(&format!("${key}")).cloned();
                props.insert(key.to_owned(), old.unwrap_or_else(|| json!("")));
            }
        }
    }
    serde_json::from_value(d).map_err(|e| bad(e.to_string()))
}

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
    if slot.is_some() {
        return Err((
            CloseCode::ALREADY_AUTHENTICATED,
            "already authenticated".into(),
        ));
    }
    let identify = decode_identify(frame)?;
    if !token_ok(&shared.config, &identify.token) {
        return Err((
            CloseCode::AUTHENTICATION_FAILED,
            "authentication failed".into(),
        ));
    }
    let config = &shared.config;
    let [shard_id, shard_count] = identify.shard.unwrap_or([0, 1]);
    if shard_count == 0 || shard_id >= shard_count || config.refused_shards.contains(&shard_id) {
        return Err((
            CloseCode::INVALID_SHARD,
            format!("invalid shard [{shard_id}, {shard_count}]"),
        ));
    }
    if let Some(required) = config.required_shards {
        if shard_count != required {
            return Err((
                CloseCode::SHARDING_REQUIRED,
                format!("sharding required: {required} shards"),
            ));
        }
    }
    if identify.intents.unknown_bits() != 0 {
        return Err((
            CloseCode::INVALID_INTENTS,
            format!(
                "invalid intents: unknown bits {:#x}",
                identify.intents.unknown_bits()
            ),
        ));
    }
    let refused = Intents::from_bits(
        identify.intents.privileged_part().bits() & !config.enabled_privileged_intents.bits(),
    );
    if refused != Intents::empty() {
        return Err((
            CloseCode::DISALLOWED_INTENTS,
            format!("disallowed intents: {refused:?}"),
        ));
    }
    let now = Instant::now();
    let mut state = shared.lock();
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
    let too_fast = pacing.enforce && too_early;
    if too_fast || !state.limits.start_session(bucket, now) {
        log::info!(
            "sim: identify of shard {shard_id} refused ({})",
            if too_fast {
                "too early for its max_concurrency bucket"
            } else {
                "session start limit spent"
            }
        );
        drop(state);
        return Ok(Answer::InvalidSession);
    }
    state.sessions.expire(now, config.resume_window);

    let session_id = objects::session_id();
    let mut session = Session::new(
        session_id.clone(),
        conn,
        identify.intents,
        [shard_id, shard_count],
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
    *slot = Some(session_id.clone());

    let own_guilds: Vec<_> = state
        .dir
        .guilds
        .iter()
        .filter(|g| shard_for_guild(g.id, shard_count) == shard_id)
        .cloned()
        .collect();
    let mut ready = json!({
        "v": 10,
        "user_settings": {},
        "user": objects::bot_user(config),
        "session_type": "normal",
        "session_id": session_id,
        "resume_gateway_url": shared.resume_gateway_url(),
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
    if let Some(shard) = identify.shard {
        ready["shard"] = json!(shard);
    }
    state.push_to_session(&session_id, "READY", &ready);
    if identify.intents.contains(Intents::GUILDS) {
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
        identify.intents
    );
    state.emit(SimEvent::Identified {
        conn,
        session_id,
        identify,
    });
    Ok(Answer::Done)
}

/// Resume on connection `conn`, whose session slot is `slot`.
pub(crate) fn handle_resume(
    shared: &Shared,
    conn: u64,
    slot: &mut Option<String>,
    frame: &Frame,
) -> Result<Answer, Refusal> {
    if slot.is_some() {
        return Err((
            CloseCode::ALREADY_AUTHENTICATED,
            "already authenticated".into(),
        ));
    }
    let resume: Resume = frame
        .data()
        .map_err(|err| (CloseCode::UNKNOWN_OPCODE, format!("invalid Resume: {err}")))?;
    if !token_ok(&shared.config, &resume.token) {
        return Err((
            CloseCode::AUTHENTICATION_FAILED,
            "authentication failed".into(),
        ));
    }
    let now = Instant::now();
    let mut state = shared.lock();
    state.sessions.expire(now, shared.config.resume_window);
    let Some(session) = state.sessions.get_mut(&resume.session_id) else {
        log::info!(
            "sim: resume of unknown or expired session {}",
            resume.session_id
        );
        drop(state);
        return Ok(Answer::InvalidSession);
    };
    let frames = match session.replay_after(resume.seq) {
        Ok(frames) => frames,
        Err(ReplayError::Ahead) => {
            let have = session.seq;
            drop(state);
            // Attach so the close ends the session (4007 needs a new one).
            *slot = Some(resume.session_id.clone());
            return Err((
                CloseCode::INVALID_SEQ,
                format!("invalid seq {}: the session is at {have}", resume.seq),
            ));
        }
        Err(ReplayError::TooOld) => {
            log::info!(
                "sim: resume from seq {} is past the replay buffer",
                resume.seq
            );
            state.sessions.remove(&resume.session_id);
            drop(state);
            return Ok(Answer::InvalidSession);
        }
    };
    let previous = session.conn.replace(conn);
    session.disconnected_at = None;
    let payload_compress = session.payload_compress;
    if let Some(old) = previous.filter(|old| *old != conn) {
        state.conns.supersede(old);
    }
    let replayed = frames.len();
    if let Some(entry) = state.conns.get(conn) {
        let _ = entry
            .out
            .try_send(Out::PayloadCompression(payload_compress));
        for frame in frames {
            entry.send_text(frame);
        }
    }
    *slot = Some(resume.session_id.clone());
    state.push_to_session(
        &resume.session_id,
        "RESUMED",
        &json!({"_trace": ["[\"smolcord-sim\",{\"micros\":0.0}]"]}),
    );
    state.stats.totals.resumes += 1;
    if let Some(stats) = state.stats.conn(conn) {
        stats.resumes += 1;
        stats.dispatches_sent += replayed as u64;
        stats.session_id = Some(resume.session_id.clone());
        if payload_compress {
            stats.compression = Some("payload".to_owned());
        }
    }
    log::info!(
        "sim: connection {} resumed session {} from seq {}: {replayed} replayed",
        conn,
        resume.session_id,
        resume.seq
    );
    state.emit(SimEvent::Resumed {
        conn,
        session_id: resume.session_id,
        seq: resume.seq,
        replayed,
    });
    Ok(Answer::Done)
}
