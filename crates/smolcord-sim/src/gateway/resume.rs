//! Resume (op 6): the checks Discord makes, in order, with its named
//! close codes, then the replay of what the session missed and RESUMED;
//! an unknown or expired session, or a seq from before the replay
//! buffer, is answered op 9 `false`.

use super::identify::Answer;
use super::identify_check::token_ok;
use crate::model::payload_checks::Refusal;
use crate::state::conns::Out;
use crate::state::events::SimEvent;
use crate::state::session::ReplayError;
use crate::state::shared::Shared;
use serde_json::json;
use smolcord::protocol::{CloseCode, Frame, Resume};
use std::time::Instant;

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
