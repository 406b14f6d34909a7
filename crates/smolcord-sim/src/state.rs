//! The simulator's shared state: one mutex around everything that the
//! connections, the REST handlers, the control API and the Rust handle
//! touch. It is held only for short, non-awaiting sections, so a handle on
//! a test's thread and the simulator's own thread never wait on each other
//! for long.

use super::clock::later;
use super::config::{SimConfig, SimGuild};
use super::events::{EventBus, SimEvent};
use super::faults::{Fault, RestFault};
use super::history::{History, StoredMessage};
use super::nonces::NonceBook;
use super::objects::IdGen;
use super::rest::RestRecord;
use super::session::SessionStore;
use super::stats::StatsBook;
use serde_json::value::RawValue;
use serde_json::Value;
use smolcord::protocol::Intents;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// REST requests kept in the log.
const REST_LOG_KEPT: usize = 10_000;

/// What a connection's writer sends, in order.
pub(crate) enum Out {
    /// A JSON frame (compressed by the writer if the connection asked).
    Text { text: String, not_before: Instant },
    /// A close frame; the writer stops after it.
    Close {
        code: u16,
        reason: String,
        not_before: Instant,
    },
    /// Switch per-payload compression (Identify `compress: true`).
    PayloadCompression(bool),
    /// `Fault::Flood`: this many DMs for the session, made one at a time
    /// as the socket takes them.
    Flood { session_id: String, count: u64 },
    /// `Fault::PingFlood`.
    Pings(u64),
    /// `Fault::Fragmented`.
    Fragmented { total: usize, fragment: usize },
}

/// What the rest of the simulator asks of a connection's reader.
pub(crate) enum ConnCmd {
    Fault(Fault),
    /// Another connection resumed this one's session: drop this one.
    Superseded,
}

/// The simulator's handle on one live websocket connection.
pub(crate) struct ConnEntry {
    pub(crate) out: async_channel::Sender<Out>,
    pub(crate) cmd: async_channel::Sender<ConnCmd>,
    /// `Fault::Delay`: hold every frame back this long.
    pub(crate) delay: Duration,
}

impl ConnEntry {
    pub(crate) fn send_text(&self, text: String) {
        // A full or closed queue means the connection is going away; the
        // session's replay buffer still has every dispatch.
        let _ = self.out.try_send(Out::Text {
            text,
            not_before: later(Instant::now(), self.delay),
        });
    }

    pub(crate) fn send_close(&self, code: u16, reason: &str) {
        let _ = self.out.try_send(Out::Close {
            code,
            reason: reason.to_owned(),
            not_before: later(Instant::now(), self.delay),
        });
    }
}

/// A channel the simulator knows.
#[derive(Clone, Debug)]
pub(crate) struct ChannelInfo {
    pub(crate) guild_id: Option<u64>,
    pub(crate) name: Option<String>,
    /// DM channels: the other user.
    pub(crate) recipient: Option<(u64, String)>,
}

/// A file served under `/attachments/`.
pub(crate) struct StoredFile {
    pub(crate) content_type: String,
    pub(crate) bytes: Arc<Vec<u8>>,
}

/// Guilds, channels, messages and files.
#[derive(Default)]
pub(crate) struct Directory {
    pub(crate) guilds: Vec<SimGuild>,
    pub(crate) channels: HashMap<u64, ChannelInfo>,
    pub(crate) dm_by_user: HashMap<u64, u64>,
    /// Every message per channel (users' and the bot's), bounded.
    pub(crate) history: History,
    pub(crate) files: HashMap<u64, StoredFile>,
    /// Guild channels where the bot lacks Send Messages: posting and
    /// typing there are 403 50013 (one entry per known channel at most).
    pub(crate) send_denied: std::collections::HashSet<u64>,
    /// Threads started from a message: thread (= message) id → its channel.
    pub(crate) thread_parent: HashMap<u64, u64>,
}

pub(crate) struct State {
    pub(crate) sessions: SessionStore,
    pub(crate) conns: HashMap<u64, ConnEntry>,
    pub(crate) next_conn: u64,
    pub(crate) stats: StatsBook,
    pub(crate) events: EventBus,
    pub(crate) dir: Directory,
    pub(crate) rest_log: VecDeque<RestRecord>,
    pub(crate) rest_faults: VecDeque<RestFault>,
    pub(crate) cdn: super::cdn::Cdn,
    pub(crate) nonces: NonceBook,
    pub(crate) ids: IdGen,
    pub(crate) start_remaining: u32,
    /// The last identify of each `max_concurrency` bucket.
    pub(crate) last_identify: HashMap<u32, Instant>,
    /// The identify queue stand-in: when each bucket's next turn is.
    pub(crate) queue_next: HashMap<u32, Instant>,
    pub(crate) rate_book: super::ratelimit::RateBook,
    /// When each guild's member list was last asked for whole (op 8); one
    /// entry per known guild at most.
    pub(crate) all_member_requests: HashMap<u64, Instant>,
    /// Identify pacing as it stands (the config's, or the control API's).
    pub(crate) pacing: super::pacing::IdentifyPacing,
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
            conns: HashMap::new(),
            next_conn: 1,
            stats: StatsBook::new(
                started,
                config.heartbeat_interval,
                config.late_tolerance,
                config.heartbeat_grace,
            ),
            events: EventBus::default(),
            dir,
            rest_log: VecDeque::new(),
            rest_faults: VecDeque::new(),
            cdn: Default::default(),
            nonces: NonceBook::new(config.nonce_window),
            ids: IdGen::ahead(config.clock_ahead),
            start_remaining: config.session_start_limit.remaining,
            last_identify: HashMap::new(),
            queue_next: HashMap::new(),
            rate_book: Default::default(),
            all_member_requests: HashMap::new(),
            pacing: super::pacing::IdentifyPacing::from_config(&config),
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
        if let Fault::Delay(delay) = fault {
            for entry in state.conns.values_mut() {
                entry.delay = delay;
            }
            return state.conns.len();
        }
        state
            .conns
            .values()
            .filter(|entry| entry.cmd.try_send(ConnCmd::Fault(fault.clone())).is_ok())
            .count()
    }

    pub(crate) fn set_pacing(
        &self,
        pacing: super::pacing::IdentifyPacing,
    ) -> Result<(), super::sim_error::SimError> {
        pacing.check()?;
        let mut state = self.lock();
        if pacing.max_concurrency != state.pacing.max_concurrency {
            state.last_identify.clear();
            state.queue_next.clear();
        }
        log::info!("sim: identify pacing now {pacing:?}");
        state.pacing = pacing;
        Ok(())
    }

    pub(crate) fn rest_fault(&self, fault: RestFault) {
        log::info!("sim: REST fault {fault:?}");
        self.lock().rest_faults.push_back(fault);
    }

    pub(crate) fn dispatch(&self, event: &str, d: &Value) -> Vec<u64> {
        self.lock().dispatch(&self.config, event, d)
    }
}

impl Directory {
    pub(crate) fn add_guild(&mut self, guild: SimGuild) {
        for channel in &guild.channels {
            self.channels.insert(
                channel.id.get(),
                ChannelInfo {
                    guild_id: Some(guild.id.get()),
                    name: Some(channel.name.clone()),
                    recipient: None,
                },
            );
        }
        self.guilds.retain(|g| g.id != guild.id);
        self.guilds.push(guild);
    }

    /// The DM channel with `user_id`, created on first use (stable after).
    pub(crate) fn dm_channel(&mut self, ids: &mut IdGen, user_id: u64, name: &str) -> u64 {
        if let Some(channel) = self.dm_by_user.get(&user_id) {
            return *channel;
        }
        let channel = ids.next();
        self.dm_by_user.insert(user_id, channel);
        self.channels.insert(
            channel,
            ChannelInfo {
                guild_id: None,
                name: None,
                recipient: Some((user_id, name.to_owned())),
            },
        );
        channel
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
            if let Some(entry) = self.conns.get(&conn) {
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
        let place = super::objects::MessagePlace {
            channel_id: channel,
            guild_id: None,
        };
        let d = super::objects::message(
            id,
            &place,
            super::objects::user(super::faults::FLOOD_USER_ID, "flooder"),
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
                super::content::withhold(d, config.bot_id.get(), true)
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
        if self.rest_log.len() == REST_LOG_KEPT {
            self.rest_log.pop_front();
        }
        self.rest_log.push_back(record);
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
