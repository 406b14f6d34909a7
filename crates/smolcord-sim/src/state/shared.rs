//! The simulator's shared state: one mutex over typed parts, each the
//! owner of its rules ([`SessionStore`], [`Conns`], [`Directory`],
//! [`GatewayLimits`], [`RestFaults`], [`RateBook`], [`NonceBook`],
//! [`RestLog`], [`StatsBook`], [`EventBus`]). The connections, the REST
//! handlers, the control API and the Rust handle all go through it.
//!
//! Why one lock and not one per part: what the simulator does crosses
//! parts in one step, and Discord's order must hold across them. A bot's
//! post checks the rate book, writes the history and the nonce book,
//! numbers a dispatch in each session, queues it on their connections,
//! counts it and reports it; another thread must see all of it or none
//! (a test that reads the history after the event, a seq that must come
//! after the one READY took). Locks per part would need a fixed order
//! and would still let a reader see half a post. One lock cannot
//! deadlock as it is used: it is held only for short sections that never
//! await (what a connection sends is queued, not written), and it is
//! never taken twice on one path (a function that needs the state while
//! it is held takes `&mut State`, not the [`Shared`]). The parts are typed
//! so a function borrows only the parts it needs, and the rules (the
//! start budget, the fault queue, the bounded logs) live with their data
//! instead of in the handlers.

use super::cdn::Cdn;
use super::conns::Conns;
use super::directory::Directory;
use super::events::{EventBus, SimEvent};
use super::faults::{Fault, RestFault};
use super::gateway_limits::GatewayLimits;
use super::history::StoredMessage;
use super::nonces::NonceBook;
use super::pacing::IdentifyPacing;
use super::ratelimit::RateBook;
use super::rest_faults::RestFaults;
use super::rest_log::{RestLog, RestRecord};
use super::session::SessionStore;
use super::stats::StatsBook;
use crate::model::config::SimConfig;
use crate::model::objects::IdGen;
use crate::model::sim_error::SimError;
use serde_json::value::RawValue;
use serde_json::Value;
use smolcord::protocol::Intents;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// What the lock holds: the parts, each with its rules.
pub(crate) struct State {
    /// Gateway sessions and their replay buffers.
    pub(crate) sessions: SessionStore,
    /// The live websocket connections.
    pub(crate) conns: Conns,
    pub(crate) stats: StatsBook,
    pub(crate) events: EventBus,
    /// Guilds, channels, history, files, permissions.
    pub(crate) dir: Directory,
    pub(crate) rest_log: RestLog,
    pub(crate) rest_faults: RestFaults,
    /// How the CDN misbehaves (a redirect, a bandwidth).
    pub(crate) cdn: Cdn,
    pub(crate) nonces: NonceBook,
    /// Snowflakes for everything the simulator makes.
    pub(crate) ids: IdGen,
    /// Session starts, identify buckets, the queue, op 8's window.
    pub(crate) limits: GatewayLimits,
    pub(crate) rate_book: RateBook,
    /// Registered commands and their uses (`state/interactions.rs`).
    pub(crate) interactions: super::interactions::InteractionBook,
}

/// Everything the simulator's parts share.
pub(crate) struct Shared {
    pub(crate) config: SimConfig,
    pub(crate) addr: SocketAddr,
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(config: SimConfig, addr: SocketAddr) -> Shared {
        let started = Instant::now();
        let mut dir = Directory::default();
        if !config
            .enabled_privileged_intents
            .contains(Intents::MESSAGE_CONTENT)
        {
            dir.history.withhold_content_from(config.bot_id.get());
        }
        for guild in &config.guilds {
            dir.add_guild(guild.clone());
        }
        let state = State {
            sessions: SessionStore::default(),
            conns: Conns::default(),
            stats: StatsBook::new(
                started,
                config.heartbeat_interval,
                config.late_tolerance,
                config.heartbeat_grace,
            ),
            events: EventBus::default(),
            dir,
            rest_log: RestLog::default(),
            rest_faults: RestFaults::default(),
            cdn: Cdn::default(),
            nonces: NonceBook::new(config.nonce_window),
            ids: IdGen::ahead(config.clock_ahead),
            limits: GatewayLimits::new(&config),
            rate_book: RateBook::default(),
            interactions: Default::default(),
        };
        Shared {
            config,
            addr,
            state: Mutex::new(state),
        }
    }

    /// The state. A panic elsewhere while holding the lock would be a bug
    /// in the simulator; the data is still usable, so carry on.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `s` when serving TLS: `ws` → `wss`, `http` → `https`.
    fn secure(&self) -> &'static str {
        if self.config.tls.is_some() {
            "s"
        } else {
            ""
        }
    }

    pub(crate) fn gateway_url(&self) -> String {
        format!("ws{}://{}", self.secure(), self.addr)
    }

    pub(crate) fn resume_gateway_url(&self) -> String {
        format!("ws{}://{}/resume", self.secure(), self.addr)
    }

    pub(crate) fn http_base(&self) -> String {
        format!("http{}://{}", self.secure(), self.addr)
    }

    /// Applies a fault to every live connection; returns how many.
    pub(crate) fn fault(&self, fault: Fault) -> usize {
        let mut state = self.lock();
        log::info!(
            "sim: fault {fault:?} on {} connection(s)",
            state.conns.len()
        );
        state.conns.fault_all(fault)
    }

    pub(crate) fn set_pacing(&self, pacing: IdentifyPacing) -> Result<(), SimError> {
        pacing.check()?;
        log::info!("sim: identify pacing now {pacing:?}");
        self.lock().limits.set_pacing(pacing);
        Ok(())
    }

    pub(crate) fn rest_fault(&self, fault: RestFault) {
        log::info!("sim: REST fault {fault:?}");
        self.lock().rest_faults.push(fault);
    }

    pub(crate) fn dispatch(&self, event: &str, d: &Value) -> Vec<u64> {
        self.lock().dispatch(&self.config, event, d)
    }
}

/// The intent a session needs to receive `event`, if any.
fn needed_intent(event: &str, in_guild: bool) -> Option<Intents> {
    let bits = match event {
        "MESSAGE_CREATE" | "MESSAGE_UPDATE" | "MESSAGE_DELETE" | "MESSAGE_DELETE_BULK" => {
            if in_guild {
                1 << 9
            } else {
                1 << 12
            }
        }
        e if e.starts_with("MESSAGE_REACTION_") => {
            if in_guild {
                1 << 10
            } else {
                1 << 13
            }
        }
        "TYPING_START" => {
            if in_guild {
                1 << 11
            } else {
                1 << 14
            }
        }
        "CHANNEL_PINS_UPDATE" if !in_guild => 1 << 12,
        e if e.starts_with("GUILD_ROLE_")
            || e.starts_with("CHANNEL_")
            || e.starts_with("THREAD_")
            || matches!(e, "GUILD_CREATE" | "GUILD_UPDATE" | "GUILD_DELETE") =>
        {
            1
        }
        _ => return None,
    };
    Some(Intents::from_bits(bits))
}

fn as_id(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// The guild an event belongs to (for intents and shard routing).
fn guild_of(event: &str, d: &Value) -> Option<u64> {
    as_id(d.get("guild_id")).or_else(|| {
        matches!(event, "GUILD_CREATE" | "GUILD_UPDATE" | "GUILD_DELETE")
            .then(|| as_id(d.get("id")))
            .flatten()
    })
}

fn raw(d: &Value) -> Box<RawValue> {
    // Serialising a Value cannot fail; null keeps the frame well-formed.
    serde_json::value::to_raw_value(d).unwrap_or_default()
}

impl State {
    pub(crate) fn emit(&mut self, event: SimEvent) {
        self.events.emit(event);
    }

    /// Sequences `event` into session `session_id`, sends it if a
    /// connection serves the session, and reports it.
    pub(crate) fn push_to_session(
        &mut self,
        session_id: &str,
        event: &str,
        d: &Value,
    ) -> Option<u64> {
        let session = self.sessions.get_mut(session_id)?;
        let (seq, frame) = session.push(event, raw(d));
        if let Some(conn) = session.conn {
            if let Some(entry) = self.conns.get(conn) {
                entry.send_text(frame);
                if let Some(stats) = self.stats.conn(conn) {
                    stats.dispatches_sent += 1;
                }
            }
        }
        self.events.emit(SimEvent::Dispatched {
            session_id: session_id.to_owned(),
            event: event.to_owned(),
            seq,
        });
        Some(seq)
    }

    /// Numbers and buffers one flood DM for `session_id` and returns its
    /// frame (the writer sends it), or `None` if the session is gone.
    pub(crate) fn flood_frame(&mut self, session_id: &str, n: u64) -> Option<String> {
        let channel = self
            .dir
            .dm_channel(&mut self.ids, super::faults::FLOOD_USER_ID, "flooder");
        let id = self.ids.next();
        let place = crate::model::objects::MessagePlace {
            channel_id: channel,
            guild_id: None,
        };
        let d = crate::model::objects::message(
            id,
            &place,
            crate::model::objects::user(super::faults::FLOOD_USER_ID, "flooder"),
            &format!("flood {n}"),
            Vec::new(),
            0,
        );
        // Gateway-only: a flood tests the client's reading, and kept in
        // the history it would grow the simulator by its whole size.
        let session = self.sessions.get_mut(session_id)?;
        let (_, frame) = session.push("MESSAGE_CREATE", raw(&d));
        if let Some(stats) = session.conn.and_then(|conn| self.stats.conn(conn)) {
            stats.dispatches_sent += 1;
        }
        Some(frame)
    }

    /// A user's message `d` (id `id`) in `channel`: into the channel's
    /// history, and MESSAGE_CREATE to the sessions that get it. A session
    /// whose client is away gets it in its replay buffer; with no session
    /// at all it is in the history only, as on Discord (a later fresh
    /// session never receives it: only a client that reads the history
    /// finds it).
    pub(crate) fn post_from_user(&mut self, config: &SimConfig, channel: u64, id: u64, d: &Value) {
        self.dir
            .history
            .push(channel, StoredMessage::new(id, false, d.clone()));
        self.dispatch(config, "MESSAGE_CREATE", d);
    }

    /// Sends `event` to every live session that would get it from Discord
    /// (intents, shard of its guild; DMs go to shard 0), buffering it for
    /// sessions whose client is away. Returns the sequence numbers given.
    pub(crate) fn dispatch(&mut self, config: &SimConfig, event: &str, d: &Value) -> Vec<u64> {
        self.sessions.expire(Instant::now(), config.resume_window);
        let guild = guild_of(event, d);
        let needed = needed_intent(event, guild.is_some());
        let is_message = matches!(event, "MESSAGE_CREATE" | "MESSAGE_UPDATE");
        let targets: Vec<(String, bool)> = self
            .sessions
            .iter_mut()
            .filter(|s| needed.is_none_or(|i| s.intents.contains(i)))
            .filter(|s| {
                let [shard_id, count] = s.shard;
                match guild {
                    Some(g) => {
                        smolcord::protocol::shard_for_guild(
                            smolcord::protocol::Snowflake::new(g),
                            count,
                        ) == shard_id
                    }
                    None => shard_id == 0,
                }
            })
            .map(|s| {
                let strip =
                    is_message && guild.is_some() && !s.intents.contains(Intents::MESSAGE_CONTENT);
                (s.id.clone(), strip)
            })
            .collect();
        log::debug!("sim: dispatch {event} to {} session(s)", targets.len());
        let mut seqs = Vec::with_capacity(targets.len());
        for (session_id, strip) in targets {
            let payload = if strip {
                crate::model::content::withhold(d, config.bot_id.get(), true)
            } else {
                d.clone()
            };
            if let Some(seq) = self.push_to_session(&session_id, event, &payload) {
                seqs.push(seq);
            }
        }
        seqs
    }

    pub(crate) fn record_rest(&mut self, record: RestRecord) {
        self.stats.totals.rest_requests += 1;
        self.events.emit(SimEvent::Rest {
            method: record.method.clone(),
            path: record.path.clone(),
            status: record.status,
        });
        self.rest_log.push(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn intents_follow_the_event_and_its_place() {
        assert_eq!(
            needed_intent("MESSAGE_CREATE", false),
            Some(Intents::DIRECT_MESSAGES)
        );
        assert_eq!(
            needed_intent("MESSAGE_CREATE", true),
            Some(Intents::GUILD_MESSAGES)
        );
        assert_eq!(needed_intent("CHANNEL_UPDATE", true), Some(Intents::GUILDS));
        assert_eq!(needed_intent("GUILD_CREATE", true), Some(Intents::GUILDS));
        assert_eq!(needed_intent("SOME_FUTURE_EVENT", false), None);
    }

    #[test]
    fn guild_of_reads_guild_id_or_the_guild_itself() {
        assert_eq!(
            guild_of("MESSAGE_CREATE", &json!({"guild_id":"7"})),
            Some(7)
        );
        assert_eq!(guild_of("GUILD_CREATE", &json!({"id":"8"})), Some(8));
        assert_eq!(guild_of("MESSAGE_CREATE", &json!({"id":"8"})), None);
    }
}
