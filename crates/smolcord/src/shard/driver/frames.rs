//! What each frame from the gateway means: dispatches (in order, exactly
//! once; READY and RESUMED), ACKs, op 1, op 7, op 9, and how a connection
//! ended.

use super::connection::Live;
use super::{unix_ms, Driver, Outcome};
use crate::heartbeat::Heartbeat;
use crate::protocol::{CloseAction, CloseCode, Command, Frame, OpCode, Ready};
use crate::shard::history::EndReason;
use crate::shard::ratelimit::CommandLimiter;
use crate::shard::session::checked_resume_url;
use crate::shard::session::{check_seq, SeqCheck, Session};
use crate::shard::{Dispatch, ShardEvent};
use crate::transport::{Connection, Incoming, TransportError};
use std::time::{Duration, Instant, SystemTime};

/// Largest forward jump of a dispatch's `s` believed. Discord numbers a
/// session's dispatches one by one; a jump this large is a broken or hostile
/// gateway, and obeying it would make every later dispatch look like a
/// replay (dropped) until the next READY.
const MAX_SEQ_JUMP: u64 = 1 << 20;

impl Driver {
    pub(super) async fn on_message(
        &mut self,
        message: Result<Incoming, TransportError>,
        connection: &mut Connection,
        heartbeat: &mut Heartbeat,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        live.slice.count();
        let Some(frame) = self.frame_of(message)? else {
            return Ok(());
        };
        match frame.opcode() {
            Some(OpCode::Dispatch) => {
                self.on_dispatch(frame, connection, limiter, live, heartbeat)
                    .await
            }
            Some(OpCode::HeartbeatAck) => {
                if let Some(record) = heartbeat.on_ack(Instant::now()) {
                    {
                        let mut status = self.status();
                        status.last_ack = Some(SystemTime::now());
                        status.heartbeat = heartbeat.account().clone();
                    }
                    self.notify(ShardEvent::Heartbeat(record));
                } else {
                    log::debug!("heartbeat ACK with no beat outstanding");
                }
                Ok(())
            }
            Some(OpCode::Heartbeat) => {
                // The server asks for a beat now; it does not move the schedule.
                let json = Command::Heartbeat(self.last_seq)
                    .to_json()
                    .unwrap_or_default();
                heartbeat.on_requested_sent(Instant::now());
                self.send_now(connection, limiter, json).await
            }
            Some(OpCode::Reconnect) => {
                log::info!("gateway asked us to reconnect (op 7); resuming");
                self.end_because(EndReason::Reconnect);
                Err(Outcome::Resume { immediate: true })
            }
            Some(OpCode::InvalidSession) => {
                let resumable = frame.data::<bool>().unwrap_or(false);
                self.end_because(EndReason::InvalidSession { resumable });
                if resumable && self.session().is_some() {
                    log::info!("invalid session (op 9, resumable); resuming");
                    Err(Outcome::Resume { immediate: true })
                } else {
                    // The wait is decided (and logged, at its real length)
                    // once the connection is closed: see `Driver::run`.
                    log::warn!("invalid session (op 9, not resumable): the session is gone");
                    let (low, high) = self.shard.config.invalid_session_wait;
                    let spread = high.saturating_sub(low);
                    Err(Outcome::Reidentify {
                        guard: low + spread.mul_f64(fastrand::f64()),
                    })
                }
            }
            Some(OpCode::Hello) => {
                log::warn!("unexpected second Hello; ignoring it");
                Ok(())
            }
            _ => {
                log::debug!("ignoring opcode {}", frame.raw_opcode());
                Ok(())
            }
        }
    }

    pub(super) async fn on_dispatch(
        &mut self,
        frame: Frame,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        live: &mut Live,
        heartbeat: &mut Heartbeat,
    ) -> Result<(), Outcome> {
        let name = frame.event_name().unwrap_or_default().to_owned();
        let Some(seq) = frame.sequence() else {
            self.malformed(&format!("dispatch {name} without a sequence number"));
            return Ok(());
        };
        // A new session numbers its events from the start again.
        let last = if name == "READY" { None } else { self.last_seq };
        if seq > last.unwrap_or(0).saturating_add(MAX_SEQ_JUMP) {
            self.status().malformed_frames += 1;
            log::error!(
                "the gateway sent {name} with sequence number {seq} after {}: refusing a jump of more than {MAX_SEQ_JUMP}; reconnecting",
                last.map_or("none".to_owned(), |l| l.to_string())
            );
            self.end_because(EndReason::Malformed);
            return Err(Outcome::Resume { immediate: false });
        }
        self.last_seq = last;
        match check_seq(self.last_seq, seq) {
            SeqCheck::Duplicate => {
                self.status().duplicates_dropped += 1;
                log::debug!("dropping replayed dispatch {name} #{seq} (already delivered)");
                return Ok(());
            }
            SeqCheck::Gap { after } => {
                self.status().gaps += 1;
                log::warn!(
                    "gateway sequence gap: events {}..{} were never received",
                    after + 1,
                    seq - 1
                );
            }
            SeqCheck::Deliver => {}
        }
        self.last_seq = Some(seq);
        if live.resuming && name != "RESUMED" {
            live.replayed += 1;
        }
        match name.as_str() {
            "READY" => {
                self.on_ready(&frame, seq, connection, limiter, live)
                    .await?
            }
            "RESUMED" => self.on_resumed(connection, limiter, live).await?,
            _ => {
                if let Some(session) = self.status().state.session.as_mut() {
                    session.seq = seq;
                }
            }
        }
        let generation = self.status().generation();
        self.deliver(
            Dispatch {
                name,
                seq,
                frame,
                generation,
            },
            live,
            heartbeat,
        );
        Ok(())
    }

    pub(super) async fn on_ready(
        &mut self,
        frame: &Frame,
        seq: u64,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        let ready: Ready = match frame.data() {
            Ok(ready) => ready,
            Err(err) => {
                self.malformed(&err.to_string());
                self.end_because(EndReason::Malformed);
                return Err(Outcome::Reidentify {
                    guard: Duration::ZERO,
                });
            }
        };
        self.account.reset_session();
        let resume_url =
            checked_resume_url(&ready.resume_gateway_url, &live.url).unwrap_or_else(|reason| {
                log::warn!(
                    "ignoring READY's resume_gateway_url ({reason}); resuming through {} instead",
                    live.url
                );
                live.url.clone()
            });
        let number = {
            let mut status = self.status();
            status.state.session = Some(Session {
                session_id: ready.session_id.clone(),
                seq,
                resume_gateway_url: resume_url,
            });
            status.begin_session(seq);
            status.sessions_started += 1;
            status.connected = true;
            status.last_ready = Some(SystemTime::now());
            status.state.history.established(unix_ms());
            status.user = Some(ready.user.clone());
            status.state.bot_name = Some(ready.user.username.clone());
            status.sessions_started
        };
        let [id, count] = self.shard.config.shard;
        log::info!(
            "gateway session #{number} ready as {} (shard {id}/{count})",
            ready.user.username
        );
        live.resuming = false;
        live.healthy_since = Some(Instant::now());
        self.session_ready();
        self.set_online(connection, limiter).await
    }

    pub(super) async fn on_resumed(
        &mut self,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        {
            let mut status = self.status();
            status.resumes += 1;
            status.connected = true;
            status.last_resumed = Some(SystemTime::now());
            status.state.history.established(unix_ms());
            if let (Some(session), Some(seq)) = (status.state.session.as_mut(), self.last_seq) {
                session.seq = seq;
            }
        }
        log::info!(
            "gateway session resumed ({} missed events replayed)",
            live.replayed
        );
        live.resuming = false;
        live.healthy_since = Some(Instant::now());
        self.set_online(connection, limiter).await
    }

    /// smolcord's choice, not the protocol's: Identify's presence already is
    /// the session's first one and survives a resume, but one op 3 after
    /// READY and RESUMED (one command per reconnect) makes recovery visible
    /// at once even if the presence was changed in between.
    pub(super) async fn set_online(
        &mut self,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
    ) -> Result<(), Outcome> {
        match Command::PresenceUpdate(self.shard.config.presence.clone()).to_json() {
            Ok(json) => self.send_now(connection, limiter, json).await,
            Err(err) => {
                log::warn!("not setting presence: {err}");
                Ok(())
            }
        }
    }

    /// Turns a close or transport error into what to do next.
    pub(super) fn connection_lost(&mut self, message: Result<Incoming, TransportError>) -> Outcome {
        self.end_because(match &message {
            Ok(Incoming::Closed(code)) => EndReason::from_close(*code),
            _ => EndReason::Dropped,
        });
        let reason;
        let outcome = match message {
            Ok(Incoming::Closed(Some(code))) => {
                let code = CloseCode(code);
                reason = format!("gateway closed the connection: {code}");
                match code.action() {
                    CloseAction::Fatal => Outcome::Fatal(code),
                    CloseAction::Reidentify => Outcome::Reidentify {
                        guard: Duration::ZERO,
                    },
                    CloseAction::Resume => Outcome::Resume { immediate: false },
                }
            }
            Ok(Incoming::Closed(None)) => {
                reason = "connection dropped without a close frame".to_owned();
                Outcome::Resume { immediate: false }
            }
            Ok(Incoming::Text(_) | Incoming::Control) => {
                reason = "unexpected frame".to_owned();
                Outcome::Resume { immediate: false }
            }
            Err(err) => {
                reason = err.to_string();
                Outcome::Resume { immediate: false }
            }
        };
        if !matches!(outcome, Outcome::Fatal(_)) {
            log::warn!("{reason}; reconnecting");
            self.notify(ShardEvent::Disconnected { reason });
        }
        outcome
    }
}
