//! Identify (op 2) and Resume (op 6): the checks Discord makes, in order,
//! with its named close codes ([`check_identify`] is pure, so the order
//! is a unit-tested table); replay and RESUMED for a resumed session.
//! What an accepted Identify starts (pacing, the session, READY) is in
//! `session_start.rs`.

use crate::model::config::SimConfig;
use crate::model::payload_checks::{self, Refusal};
use crate::state::conns::Out;
use crate::state::events::SimEvent;
use crate::state::session::ReplayError;
use crate::state::shared::Shared;
use serde_json::{json, Value};
use smolcord::protocol::{CloseCode, Frame, Identify, Intents, Resume};
use std::time::Instant;

/// An Identify that passed every check.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub identify: Identify,
    /// `[shard_id, shard_count]` (`[0, 1]` when the client sent none).
    pub shard: [u32; 2],
}

/// Checks an Identify (`frame`) on a connection that is `authenticated`
/// already or not, against `config`.
pub(crate) fn check_identify(
    frame: &Frame,
    config: &SimConfig,
    authenticated: bool,
) -> Result<Accepted, Refusal> {
    if authenticated {
        return Err((
            CloseCode::ALREADY_AUTHENTICATED,
            "already authenticated".into(),
        ));
    }
    let identify = decode_identify(frame)?;
    if !token_ok(config, &identify.token) {
        return Err((
            CloseCode::AUTHENTICATION_FAILED,
            "authentication failed".into(),
        ));
    }
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
    Ok(Accepted {
        identify,
        shard: [shard_id, shard_count],
    })
}

/// Discord documents the Identify/Resume token as the raw token; the "Bot "
/// prefix belongs to the HTTP header. In practice the gateway accepts a
/// prefixed token too (twilight has always sent one), so the simulator
/// accepts both.
fn token_ok(config: &SimConfig, sent: &str) -> bool {
    let sent = sent.strip_prefix("Bot ").unwrap_or(sent);
    sent == config.token.expose()
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
    payload_checks::identify_extras(&d).map_err(bad)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::bot_token::DEFAULT_SIM_TOKEN;

    /// An Identify frame whose `d` is `d` with the defaults filled in.
    fn frame(d: Value) -> Frame {
        let mut full = json!({
            "token": DEFAULT_SIM_TOKEN,
            "intents": 513,
            "properties": {"os": "linux", "browser": "t", "device": "t"},
        });
        if let (Some(full), Some(d)) = (full.as_object_mut(), d.as_object()) {
            for (key, value) in d {
                full.insert(key.clone(), value.clone());
            }
        }
        Frame::decode(json!({"op": 2, "d": full}).to_string().as_bytes()).expect("a frame")
    }

    /// The close code `d` is refused with on a fresh connection, or 0.
    fn code(d: Value, config: &SimConfig) -> u16 {
        match check_identify(&frame(d), config, false) {
            Ok(_) => 0,
            Err((code, _)) => code.0,
        }
    }

    #[test]
    fn each_check_has_its_close_code() {
        let config = SimConfig::default();
        let table: &[(Value, u16)] = &[
            (json!({}), 0),
            (json!({"token": format!("Bot {DEFAULT_SIM_TOKEN}")}), 0),
            (json!({"large_threshold": 10}), 4001),
            (json!({"intents": "many"}), 4001),
            (json!({"token": "nope"}), 4004),
            (json!({"shard": [1, 1]}), 4010),
            (json!({"shard": [0, 0]}), 4010),
            (json!({"shard": [1, 2]}), 0),
            (json!({"intents": 1u64 << 40}), 4013),
            (json!({"intents": 1 << 15}), 4014),
            // Tolerated as Discord tolerates them.
            (json!({"properties": {"$os": "linux"}}), 0),
            (json!({"compress": "zlib-stream"}), 0),
        ];
        for (d, want) in table {
            assert_eq!(code(d.clone(), &config), *want, "{d}");
        }
    }

    #[test]
    fn the_checks_run_in_discords_order() {
        let config = SimConfig::default();
        // A second Identify is refused before its payload is read.
        let second = check_identify(&frame(json!({"token": "nope"})), &config, true);
        assert_eq!(
            second.map(|_| ()).map_err(|(c, _)| c),
            Err(CloseCode::ALREADY_AUTHENTICATED)
        );
        // The token before the shard and the intents.
        let d = json!({"token": "nope", "shard": [5, 1], "intents": 1u64 << 40});
        assert_eq!(code(d, &config), 4004);
        // The shard before the intents.
        assert_eq!(
            code(json!({"shard": [5, 1], "intents": 1 << 15}), &config),
            4010
        );
    }

    #[test]
    fn the_configuration_decides_shards_and_privileged_intents() {
        let config = SimConfig {
            required_shards: Some(2),
            refused_shards: vec![1],
            enabled_privileged_intents: Intents::MESSAGE_CONTENT,
            ..SimConfig::default()
        };
        assert_eq!(code(json!({}), &config), 4011);
        assert_eq!(code(json!({"shard": [1, 2]}), &config), 4010);
        assert_eq!(
            code(json!({"shard": [0, 2], "intents": 1 << 15}), &config),
            0
        );
        let accepted =
            check_identify(&frame(json!({"shard": [0, 2]})), &config, false).expect("accepted");
        assert_eq!(accepted.shard, [0, 2]);
        assert_eq!(
            check_identify(&frame(json!({})), &SimConfig::default(), false)
                .expect("accepted")
                .shard,
            [0, 1],
            "no shard is shard 0 of 1"
        );
    }
}
