//! A local Discord gateway (and REST) simulator with fault injection and
//! heartbeat measurement.
//!
//! It is the embedded default the demo runs on without a token, the
//! fixture every smolcord test talks to, and `smolcord sim` serves it to
//! any other client. It runs on **its own thread with its own smol
//! executor**, so a test that blocks the client's event loop on purpose
//! never distorts what the simulator measures.
//!
//! One TCP port serves everything:
//!
//! | URL | what |
//! |---|---|
//! | `ws://127.0.0.1:P/` | the gateway ([`Simulator::gateway_url`]) |
//! | `ws://127.0.0.1:P/resume` | READY's `resume_gateway_url` (recorded per connection) |
//! | `http://127.0.0.1:P/api/v10/...` | REST ([`Simulator::api_base`]) |
//! | `http://127.0.0.1:P/control/...` | the control API ([`Simulator::control_url`]) |
//! | `http://127.0.0.1:P/attachments/...` | voice-note and uploaded file bytes |
//!
//! With [`SimConfig::tls`] the port speaks only TLS, and every URL above
//! (and every URL the simulator hands out: READY's `resume_gateway_url`,
//! `GET /gateway`, attachment URLs) is `wss://` / `https://`.
//!
//! ```
//! use smolcord_sim::{Simulator, SimConfig};
//! let sim = Simulator::start(SimConfig::default()).unwrap();
//! assert!(sim.gateway_url().starts_with("ws://127.0.0.1:"));
//! sim.shutdown();
//! ```
//!
//! # Gateway behaviour
//!
//! Hello (`heartbeat_interval` from the config) on connect. Query: `v` 9,
//! 10 or absent (else close 4012; Discord still serves 6-8), `encoding`
//! json or absent (else 4002), `compress=zlib-stream` (one deflate context
//! per connection, every message a binary frame ending `00 00 ff ff`) or
//! `compress=zstd-stream` (one zstd context per connection, level 3, every
//! message one binary frame flushed without ending the zstd frame); other
//! `compress` values are ignored (plain text frames). Identify
//! `compress: true` without transport compression: every later frame is a
//! self-contained zlib binary frame. Commands: over 4096 bytes 4002, not
//! JSON 4002, unknown or server-only opcode 4001, bad payload for an opcode
//! 4001, anything but Heartbeat/Identify/Resume before Identify 4003, bad
//! token 4004, second Identify/Resume 4005, Resume `seq` ahead of the
//! session 4007, more than `command_limit` per `command_window` 4008, no
//! heartbeat for `grace × interval` 4009, bad shard 4010, wrong shard count
//! 4011, unknown intent bits 4013, privileged intents not enabled 4014.
//! Heartbeats are allowed before Identify. READY carries `s: 1`. Unknown or
//! expired session, or a Resume from before the replay buffer: op 9 `false`.
//! Dispatches honour intents, shards and MESSAGE_CONTENT like Discord, and
//! a dispatch to a session whose client is away is buffered for its Resume.
//! A message sent while the bot has no session (none live, none
//! resumable) goes to its channel's history only: a later fresh session
//! never receives it, as on Discord. The bot's own REST messages come
//! back as MESSAGE_CREATE/UPDATE. op 8
//! Request Guild Members is answered with GUILD_MEMBERS_CHUNK (or
//! RATE_LIMITED; `gateway/members.rs`), against guilds of the bot, its owner and
//! [`SimConfig::guild_members`] more. The default token,
//! [`DEFAULT_SIM_TOKEN`], is shaped like Discord's: its first part is the
//! base64 of [`SimConfig::bot_id`] ([`SimConfig::with_token`] sets another).
//!
//! # REST behaviour
//!
//! Every answer under `/api/` carries `Date` (on [`SimConfig::clock_ahead`]
//! of the host's clock, as the snowflakes are: a host clock behind
//! Discord's), `Via: 1.1 google` and per-route
//! bucket headers that count down per major parameter (channel, guild,
//! webhook); 429s come in Discord's three scopes with its headers and body
//! (the table in `rest/ratelimit_headers.rs`). Limits are enforced only with
//! [`SimConfig::rest_rate_limit`]; without it the counts run against
//! [`RestRateLimit::REPORTED`] and nothing is refused. Message bodies are
//! checked field by field (`rest/message_body.rs`: 400 50035 naming the field),
//! and replies get `referenced_message` (`rest/replies.rs`). A thread started
//! from a message (`POST /channels/{id}/messages/{id}/threads`) is a
//! channel of its own whose id is the message's (`rest/threads.rs`);
//! [`Simulator::post_in_channel`] posts in it like in any channel.
//!
//! Every message in a channel (injected users' and the bot's; not raw
//! `/control/dispatch` payloads nor `Fault::Flood` DMs) is kept in its history, 10 000 per
//! channel and 200 000 in all: `GET /channels/{id}/messages` pages it as
//! Discord does (`before` / `after` / `around`, `limit` 1–100, default 50,
//! newest first) and `GET /channels/{id}/messages/{id}` fetches one (404
//! 10008 Unknown Message). Neither carries a message's `nonce`, nor the
//! gateway's extra fields of MESSAGE_CREATE (`guild_id`, `member`): a
//! message read over REST names its channel only. A guild channel the bot
//! cannot see ([`Simulator::set_view_permission`]) answers 403 50001
//! Missing Access there (and on every other route on it); a deleted one
//! 404 10003 Unknown Channel.
//!
//! `POST /channels/{id}/messages` with `"enforce_nonce": true` and a
//! `nonce` seen within `SimConfig::nonce_window` returns the original
//! message instead of creating another, as Discord does; each such answer
//! counts in [`Totals::duplicates_prevented`].
//!
//! # Where the docs leave Discord's reaction open
//!
//! Each constraint the docs state without saying what Discord does about
//! it, and what the simulator does (Discord closes 4001 for "an invalid
//! payload for an opcode", resumable; REST answers 400 50035 "Invalid Form
//! Body" naming the field). Strict where a client that breaks the rule has
//! a bug the simulator should show first; lenient where Discord is known
//! to accept, or where refusing would fail clients that work against it.
//!
//! | constraint | the simulator | why |
//! |---|---|---|
//! | op 3 / 4 / 8 / 31 `d` of the documented shape (`"garbage"`, `[1, 2]`, a missing or mistyped field) | close 4001 | the docs' meaning of 4001 |
//! | Identify `large_threshold` 50–250 | close 4001 outside it | a range in the docs; every library looked at sends 50 or 250 |
//! | presence `status` one of online, dnd, idle, invisible, offline (Identify, op 3) | close 4001 (`"banana"`) | the documented set |
//! | activity `type` 0–5 | close 4001 (42) | the documented types; a new type needs a simulator update |
//! | presence `since`: Unix ms or null | anything else is read as null | Discord takes serenity's serialized `SystemTime` |
//! | Identify `compress`: a boolean | a string (Oceanic.js 1.15 sends `"zlib-stream"`) is read as `false`, with a warning; any other type closes 4001 | Oceanic has shipped it for a year and works against Discord, so Discord takes it; `false` because the client asks for its compression in the URL, and per-payload compression on top would break it |
//! | Identify `properties` with `os`, `browser`, `device` | `{}` and the old `$os` names accepted (missing read as `""`) | Discord takes both |
//! | `v` in the gateway URL | none: served as v10, a warning, `Totals::connections_without_version` | Discord serves its default (v6) rather than refusing; the simulator has no v6 |
//! | a heartbeat's `d` is the last seq received | a seq beyond what the session sent is ACKed, warned about and counted (`Totals::heartbeats_with_unsent_seq`) | no refusal documented (4007 is for Resume); an older seq before a Resume is normal |
//! | op 8 for the whole list (`query: ""`) needs GUILD_MEMBERS | close 4001 | "required", no reaction given; answering nothing would leave the client waiting forever, 4001 keeps the session |
//! | op 8 takes one of `query` / `user_ids`, ≤ 100 ids, `limit` with `query` | close 4001 otherwise | the documented request |
//! | op 8 `nonce` ≤ 32 bytes | a longer one is not echoed | the docs say so |
//! | op 8 `presences: true` needs GUILD_PRESENCES | chunks without presences | "otherwise it will always be false" |
//! | op 8 for a guild the session does not serve (unknown, another shard) | ignored, with a warning | undocumented |
//! | all members of a guild: once per 30 s per bot | RATE_LIMITED dispatch instead of chunks | documented (PROTOCOL.md §1.2) |
//! | one Identify per `max_concurrency` bucket per 5 s | op 9 `false` for the early one when pacing is on: on in `smolcord sim` (`--identify-pacing off`), off in `SimConfig::default()` | documented; Rust tests re-identify within milliseconds on purpose (op 9, 4007, resumes gone stale), `smolcord sim` serves clients that must cope with Discord |
//! | REST `User-Agent: DiscordBot (url, version)` | served without one; a warning at the first, `Totals::rest_without_user_agent` | the docs require it, but the refusal is Cloudflare's and undocumented |
//! | message `flags` on create: only SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS, IS_VOICE_MESSAGE, IS_COMPONENTS_V2 | 400 50035 on `flags` for any other bit (`flags: 2`) | the documented settable set |
//! | a reply's `message_reference` names a message that exists (`fail_if_not_exists` defaults to true) | 400 50035 on `message_reference`; with `fail_if_not_exists: false` the message is sent without the reference | documented |
//! | only the author edits a message's content | 403 50005 | documented error code |
//! | a message's `nonce` in `GET /channels/{id}/messages` | left out | the docs list `nonce` on the message object without saying where it comes back; Discord returns it in the create answer and the MESSAGE_CREATE event only (a client building a ledger on nonces read back would pass here and fail there) |
//! | MESSAGE_CONTENT "across Discord's APIs" for REST reads | `GET /channels/{id}/messages` withholds a guild message's content unless the application has the intent enabled ([`SimConfig::enabled_privileged_intents`]), the bot wrote it or is mentioned | the gateway's rule, per application instead of per session (`model/content.rs`) |
//! | a reply's `referenced_message` without MESSAGE_CONTENT | judged on its own: its text only if the bot wrote it or is mentioned in it | undocumented; the strict reading (a mention does not open the message it answers) |
//! | custom emoji (`name:id`) in a reaction | 400 10014 Unknown Emoji: the simulator has none; any other emoji is taken as Unicode | a server's emoji list is not modelled (`rest/reactions.rs`) |
//! | a user's reply pings whom it answers | that author in `mentions` unless the post says `ping_replied: false` | Discord's client default |
//! | message body fields of their documented types and sizes (content ≤ 2000, ≤ 10 embeds, embed title ≤ 256 as a string, …) | 400 50035 naming the field | documented types and limits |
//! | files of a message create or edit: "the file upload size limit applies to each file in a request", 20 MiB by default (since 2026-09-04; 10 MiB before); 30015 "Maximum number of attachments in a message reached (10)"; 40005 "Request entity too large" | a file over [`SimConfig::upload_limit`] (20 MiB), or a request over 25 MiB in all: 413 40005; 11 files or more: 400 30015 (`rest/upload_limits.rs`) | the docs name no request total since 2024 (before: 25 MiB "applies to all files in a request"); 30015, not 50035, because it is the documented code and what Discord answered for 11 files |
//! | an interaction's answers (type 4, a deferred one's edits) | kept with the interaction ([`Simulator::interaction_answer`]), not in the channel's history, ephemeral or not | an ephemeral answer is in no history on Discord; the bridge answers only ephemerally, so a non-ephemeral answer's message is not modelled |
//! | a callback after the 3 s deadline | 404 10062 Unknown interaction, and the interaction counts as answered late | what Discord answers an interaction it has given up on (its client shows "did not respond") |
//! | `PATCH …/messages/@original` before any callback | 404 10008 Unknown Message | there is no original message yet |
//! | a token used past 15 minutes, or for another application | 401 50027 Invalid Webhook Token | Discord's answer for an expired interaction webhook |
//! | `PUT /applications/{id}/commands` for another application | 403 50001 Missing Access | the bot token is not that application's |
//! | `GET`/`PUT /applications/{id}/guilds/{guild_id}/commands` for a guild the simulator does not know | 404 10004 Unknown Guild (another application: 403 50001) | the bot is in no such guild; Discord answers 403 50001 too when the invite lacked `applications.commands`, which the simulator does not model |
//! | an interaction's or webhook's token in a request's path | kept in the REST log as `[redacted]` ([`REDACTED_TOKEN`]) | it authorises the request in the bot token's stead: a secret, and the log is served by the control API and printed by failing tests |
//! | a command used where its `contexts` do not allow, or an option it does not declare | [`Simulator::use_command`] refuses (`SimError::UnknownCommand`) | Discord's client offers only what is registered for the place |
//! | where a user's attachments are served ([`Simulator::send_dm_with_files`]) | the simulator's own host, `/attachments/{channel}/{id}/{name}?ex=…&is=…&hm=…`, no auth, with the file's `content_type`; the attachment object carries `id`, `filename`, `content_type`, `size`, `url`, `proxy_url` | Discord serves them from `cdn.discordapp.com` (signed, expiring); the simulator has one host, so a client that limits downloads to Discord's CDN must also allow the API's own host (smolcord does) |
//!
//! Application commands (`state/app_commands.rs`, `state/interactions.rs`,
//! `rest/interactions.rs`, `control/commands.rs`): `PUT
//! /applications/{id}/commands` registers the global commands (a bulk
//! overwrite, checked field by field), `PUT
//! /applications/{id}/guilds/{guild_id}/commands` a guild's (the same
//! checks, each command with its `guild_id`) and `GET` on that path lists
//! them; [`Simulator::use_command`] is a
//! user's use of one in their DM with the bot (INTERACTION_CREATE);
//! `POST /interactions/{id}/{token}/callback` (type 4 or 5, flag 64
//! ephemeral; within [`ANSWER_DEADLINE`], once) and `PATCH
//! /webhooks/{app}/{token}/messages/@original` (for [`TOKEN_LIFETIME`])
//! answer it, authorised by the token; [`Simulator::interaction_answer`]
//! reads what the bot answered.
//!
//! # Control API
//!
//! Bodies are JSON objects; ids may be strings or numbers. Errors are 400
//! `{"error": "..."}`.
//!
//! - `POST /control/fault` — `{"kind": K, ...}` with K one of `drop_acks`
//!   (`n`), `close` (`code`), `drop_tcp`, `reconnect`, `invalid_session`
//!   (`resumable`), `request_heartbeat`, `stall` (`ms`), `malformed`,
//!   `oversized`, `delay` (`ms`). Applies to every live connection; answers
//!   `{"applied_to": N}`.
//! - `POST /control/rest-fault` — `{"kind": "rate_limited" | "forbidden" |
//!   "server_error" | "unauthorized" | "delay" | "refuse_upload", "count": 1,
//!   "retry_after": 1.0, "scope": "user" | "shared" | "global", "status":
//!   500, "ms": 1000, "path_prefix": "/api/v10/channels"}` (all but `kind`
//!   optional, but `delay` needs `ms`; `"global": true` is the older
//!   spelling of the global scope): the next `count` matching REST requests
//!   fail that way (`delay`: take effect, but are answered `ms` late).
//!   `refuse_upload` (`status`, default 500; `scope`: `attachments_field`,
//!   the default, for uploads whose `payload_json` lists `attachments`,
//!   `edits` for a `PATCH` with a file, or `any`) refuses only such uploads.
//! - `GET /control/identify` — the [`IdentifyPacing`]; `POST
//!   /control/identify` — `{"enforce": bool, "max_concurrency": n,
//!   "shards": n}` (each optional) changes it and answers the new one.
//! - `POST /control/dispatch` — `{"event": "NAME", "d": {...}}` →
//!   `{"seqs": [...]}` (one per session that got it).
//! - `POST /control/dm` — `{"author_id", "author_name", "content"}`, or with
//!   `"voice_ogg_base64"` and `"duration_secs"` for a voice note →
//!   `{"message_id", "channel_id"[, "attachment_url"]}`.
//! - `POST /control/guild-message` — `{"channel_id", "author_id",
//!   "author_name", "content"}`, optionally `"mention_bot": true`,
//!   `"reply_to": ID` (a message of that channel) and `"ping_replied":
//!   false` → `{"message_id"}` ([`ChannelPost`]).
//! - `POST /control/dm-file` — `{"author_id", "author_name", "content",
//!   "filename", "content_type", "size"}`: a DM with one attachment of
//!   `size` generated bytes ([`generated_bytes`], at most
//!   [`MAX_GENERATED_BYTES`]) → `{"message_id", "channel_id"}`.
//! - `POST /control/cdn` — `{"redirect_to": URL, "count": 1}` (the next
//!   `count` attachment requests answered `302` to it) and/or
//!   `{"bytes_per_sec": N}` (attachments sent at most that fast; 0 or null:
//!   full speed) → the settings ([`CdnFault`]).
//! - `POST /control/channel-permission` — `{"channel_id", "send_messages":
//!   bool, "view_channel": bool}` (each optional): the bot's Send Messages
//!   there (without it: 403 50013), its View Channel (without it: every
//!   route on the channel, its history too, 403 50001).
//! - `POST /control/command` — `{"user_id", "user_name", "name",
//!   "options": {"code": "ABCD2345"}}`: the user uses a registered command
//!   in their DM with the bot → `{"interaction_id", "channel_id"}`;
//!   `GET /control/interaction?id=ID` — how the bot answered it:
//!   `{"answered": false}` or `{"answered": true, "deferred", "ephemeral",
//!   "content", "edits", "after_ms", "refused_callbacks"}`.
//! - `GET /control/stats` — [`SimStats`]; `GET /control/rest-log` — every
//!   [`RestRecord`]; `GET /control/messages?channel_id=ID` — the bot's
//!   messages there ([`BotMessage`]).
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs, missing_debug_implementations)]

mod control;
mod gateway;
mod model;
mod rest;
mod server;
mod state;
mod wire;

pub use control::cdn::{generated_bytes, MAX_GENERATED_BYTES};
pub use control::inject::{ChannelPost, SimFile, VoiceNote};
pub use model::bot_token::{bot_id_of_token, sim_token_for, DEFAULT_SIM_TOKEN};
pub use model::config::{
    RestRateLimit, SessionStartLimit, SimChannel, SimConfig, SimGuild, DEFAULT_UPLOAD_LIMIT,
    MAX_GUILD_MEMBERS,
};
pub use model::sim_error::SimError;
pub use rest::upload_limits::{MAX_ATTACHMENTS, MAX_REQUEST_BYTES};
pub use state::cdn::CdnFault;
pub use state::events::{next_matching, SimEvent};
pub use state::faults::{Fault, RestFault, RestFaultKind, UploadScope, FLOOD_USER_ID};
pub use state::history::BotMessage;
pub use state::interactions::{
    InteractionAnswer, UsedCommand, ANSWER_DEADLINE, INTERACTIONS_KEPT, TOKEN_LIFETIME,
};
pub use state::pacing::{IdentifyPacing, MAX_CONCURRENCY, MAX_SHARDS};
pub use state::rest_log::{RestRecord, REDACTED_TOKEN};
pub use state::stats::{BeatRecord, ConnEnd, ConnStats, SimStats, Totals};
pub use wire::tls::SimTls;
pub use wire::zlib::SYNC_FLUSH_SUFFIX;

use serde_json::Value;
use smolcord::protocol::Snowflake;
use state::shared::Shared;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running simulator. Cheap to clone (all clones share one simulator);
/// it stops on [`Simulator::shutdown`] or when the last clone is dropped.
#[derive(Clone)]
pub struct Simulator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("gateway_url", &self.gateway_url())
            .finish_non_exhaustive()
    }
}

struct Inner {
    shared: Arc<Shared>,
    stop: async_channel::Sender<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Inner {
    fn stop(&self) {
        self.stop.close();
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(handle) = handle {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Simulator {
    /// Binds `config.listen` and starts serving on a new thread.
    ///
    /// The error names the address when it cannot be bound (e.g. the port
    /// is in use).
    // Binding a literal address does not block (no DNS), so std's listener
    // is fine here; it is handed to async-io right away.
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)]
    pub fn start(config: SimConfig) -> io::Result<Simulator> {
        let listen = config.listen;
        let std_listener = std::net::TcpListener::bind(listen).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("simulator cannot listen on {listen}: {err}"),
            )
        })?;
        let listener = async_net::TcpListener::try_from(std_listener).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!("simulator cannot use its socket on {listen}: {err}"),
            )
        })?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(config, addr));
        let (stop_tx, stop_rx) = async_channel::bounded(1);
        let thread = server::spawn(shared.clone(), listener, stop_rx)?;
        log::info!("sim: listening on {addr}");
        Ok(Simulator {
            inner: Arc::new(Inner {
                shared,
                stop: stop_tx,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// Stops the simulator thread and closes every socket. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stop();
    }

    fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared().addr
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &SimConfig {
        &self.shared().config
    }

    /// `ws://127.0.0.1:P` (the gateway is at `/`; `wss://` with TLS).
    pub fn gateway_url(&self) -> String {
        self.shared().gateway_url()
    }

    /// `ws://127.0.0.1:P/resume`, the `resume_gateway_url` in READY.
    pub fn resume_gateway_url(&self) -> String {
        self.shared().resume_gateway_url()
    }

    /// `http://127.0.0.1:P/api/v10` (`https://` with TLS).
    pub fn api_base(&self) -> String {
        format!("{}/api/v10", self.shared().http_base())
    }

    /// `http://127.0.0.1:P/control`.
    pub fn control_url(&self) -> String {
        format!("{}/control", self.shared().http_base())
    }

    /// The identify queue stand-in (twilight-rs/gateway-queue's protocol:
    /// `GET {url}?shard=N`).
    pub fn identify_queue_url(&self) -> String {
        format!("{}/queue", self.shared().http_base())
    }

    /// Applies a gateway fault to every live connection; returns how many
    /// connections it reached.
    pub fn fault(&self, fault: Fault) -> usize {
        self.shared().fault(fault)
    }

    /// How identifies are paced now.
    pub fn identify_pacing(&self) -> IdentifyPacing {
        self.shared().lock().limits.pacing()
    }

    /// Changes identify pacing from now on (what `POST /control/identify`
    /// does); the error names a field out of range. A new
    /// `max_concurrency` starts every bucket afresh.
    pub fn set_identify_pacing(&self, pacing: IdentifyPacing) -> Result<(), SimError> {
        self.shared().set_pacing(pacing)
    }

    /// Ends every session whose client is away, as if its resume window
    /// had passed: the next Resume of it is answered op 9 `false`, and
    /// what is sent meanwhile reaches no session (the history only).
    /// Returns how many sessions ended.
    pub fn expire_sessions(&self) -> usize {
        let ended = self.shared().lock().sessions.forget_detached();
        log::info!("sim: {ended} detached session(s) expired");
        ended
    }

    /// Queues a REST fault for the next matching requests.
    pub fn rest_fault(&self, fault: RestFault) {
        self.shared().rest_fault(fault)
    }

    /// Dispatches `event` with payload `d` to every live session that would
    /// receive it (intents, shard), buffering it for sessions whose client
    /// is away. Returns the sequence numbers given, one per session.
    pub fn dispatch(&self, event: &str, d: Value) -> Vec<u64> {
        self.shared().dispatch(event, &d)
    }

    /// A DM from a user (its DM channel is stable per user). Returns
    /// `(message id, channel id)`.
    pub fn send_dm(
        &self,
        author_id: u64,
        author_name: &str,
        content: &str,
    ) -> (Snowflake, Snowflake) {
        self.shared().send_dm(author_id, author_name, content)
    }

    /// A DM with files attached (text may be empty), served by the
    /// simulator's CDN with their `content_type` and `size`. Returns
    /// `(message id, channel id)`.
    pub fn send_dm_with_files(
        &self,
        author_id: u64,
        author_name: &str,
        content: &str,
        files: Vec<SimFile>,
    ) -> (Snowflake, Snowflake) {
        self.shared()
            .send_dm_with_files(author_id, author_name, content, files)
    }

    /// Makes the CDN (`/attachments/`) misbehave: a redirect, a bandwidth.
    pub fn cdn_fault(&self, fault: CdnFault) {
        self.shared().lock().cdn.apply(fault);
    }

    /// A voice-note DM: flags 8192 and one `audio/ogg` attachment whose URL
    /// serves `ogg` from the simulator.
    pub fn send_voice_dm(
        &self,
        author_id: u64,
        author_name: &str,
        ogg: Vec<u8>,
        duration: Duration,
    ) -> VoiceNote {
        self.shared()
            .send_voice_dm(author_id, author_name, ogg, duration)
    }

    /// A message in a guild channel; the error names an unknown channel.
    pub fn send_guild_message(
        &self,
        channel_id: Snowflake,
        author_id: u64,
        author_name: &str,
        content: &str,
    ) -> Result<Snowflake, SimError> {
        self.shared()
            .send_guild_message(channel_id, author_id, author_name, content)
    }

    /// A user's message in a guild channel: with a mention of the bot, as
    /// a reply, or both ([`ChannelPost`]). The error names an unknown
    /// channel, or a replied-to message not in it.
    pub fn post_in_channel(&self, post: &ChannelPost) -> Result<Snowflake, SimError> {
        self.shared().post_in_channel(post)
    }

    /// Grants (`true`) or takes away (`false`) the bot's Send Messages in a
    /// guild channel: without it, posting and typing there answer 403 50013
    /// Missing Permissions, as Discord does. The error names an unknown
    /// channel.
    pub fn set_send_permission(
        &self,
        channel_id: Snowflake,
        allowed: bool,
    ) -> Result<(), SimError> {
        self.shared().set_send_permission(channel_id, allowed)
    }

    /// Grants (`true`) or takes away (`false`) the bot's View Channel in a
    /// guild channel: without it, every route on the channel (its
    /// history, posting, typing, the channel object) answers 403 50001
    /// Missing Access, as Discord does. The error names an unknown
    /// channel.
    pub fn set_view_permission(
        &self,
        channel_id: Snowflake,
        allowed: bool,
    ) -> Result<(), SimError> {
        self.shared().set_view_permission(channel_id, allowed)
    }

    /// Grants (`true`, the default) or takes away (`false`) the bot's
    /// Read Message History in a guild channel: without it, reading the
    /// channel's history (`GET /channels/{id}/messages`) answers 200 with
    /// an empty list, as Discord documents ("no messages will be
    /// returned"), not an error; every other route is unaffected (the
    /// channel object still names its `last_message_id`). The error names
    /// an unknown channel.
    pub fn set_history_permission(
        &self,
        channel_id: Snowflake,
        allowed: bool,
    ) -> Result<(), SimError> {
        self.shared().set_history_permission(channel_id, allowed)
    }

    /// Adds (or replaces) a guild and dispatches its GUILD_CREATE.
    pub fn add_guild(&self, guild: SimGuild) -> Vec<u64> {
        self.shared().add_guild(guild)
    }

    /// Creates a text channel in a known guild (CHANNEL_CREATE).
    pub fn create_channel(&self, guild_id: Snowflake, name: &str) -> Result<Snowflake, SimError> {
        self.shared().create_channel(guild_id, name)
    }

    /// Renames a guild channel (CHANNEL_UPDATE); returns the seqs given.
    pub fn update_channel(&self, channel_id: Snowflake, name: &str) -> Result<Vec<u64>, String> {
        self.shared().change_channel(channel_id, Some(name))
    }

    /// Deletes a guild channel (CHANNEL_DELETE); returns the seqs given.
    pub fn delete_channel(&self, channel_id: Snowflake) -> Result<Vec<u64>, String> {
        self.shared().change_channel(channel_id, None)
    }

    /// The DM channel with `user_id` (created on first use).
    pub fn dm_channel_of(&self, user_id: u64) -> Snowflake {
        self.shared().dm_channel_of(user_id)
    }

    /// A user uses the registered command `name` (with string `options`,
    /// `(name, value)`) in their DM with the bot: INTERACTION_CREATE goes
    /// to the bot (`control/commands.rs`). The error names a command that is
    /// not registered for the bot's DM, or an option it does not declare.
    pub fn use_command(
        &self,
        user_id: u64,
        user_name: &str,
        name: &str,
        options: &[(&str, &str)],
    ) -> Result<UsedCommand, SimError> {
        self.shared().use_command(user_id, user_name, name, options)
    }

    /// Dispatches an interaction's INTERACTION_CREATE again, as a resume
    /// replays it. Returns the seqs given.
    pub fn replay_interaction(&self, interaction_id: Snowflake) -> Result<Vec<u64>, SimError> {
        self.shared().replay_interaction(interaction_id)
    }

    /// How the bot answered an interaction (`None`: not, or not in time).
    pub fn interaction_answer(&self, interaction_id: Snowflake) -> Option<InteractionAnswer> {
        self.shared().interaction_answer(interaction_id)
    }

    /// Whether a callback for the interaction came after its deadline
    /// (refused 10062).
    pub fn interaction_answered_late(&self, interaction_id: Snowflake) -> bool {
        self.shared().interaction_late(interaction_id)
    }

    /// The application's global commands as registered, and how many bulk
    /// overwrites were taken.
    pub fn registered_commands(&self) -> (Vec<Value>, u64) {
        self.shared().registered_commands()
    }

    /// Sets the first answer's deadline ([`ANSWER_DEADLINE`]) and the
    /// token's lifetime ([`TOKEN_LIFETIME`]), for tests of late answers.
    pub fn set_interaction_deadlines(&self, answer: Duration, token: Duration) {
        self.shared().set_interaction_deadlines(answer, token)
    }

    /// Everything measured so far.
    pub fn stats(&self) -> SimStats {
        let shared = self.shared();
        shared
            .lock()
            .stats
            .snapshot(shared.config.heartbeat_grace, shared.config.late_tolerance)
    }

    /// Every REST request received (the most recent 10 000).
    pub fn rest_requests(&self) -> Vec<RestRecord> {
        self.shared().lock().rest_log.records().cloned().collect()
    }

    /// The emoji the bot reacted with on a message (empty for an unknown
    /// one), in the order they were added.
    pub fn reactions_on(&self, channel_id: Snowflake, message_id: Snowflake) -> Vec<String> {
        self.shared()
            .lock()
            .dir
            .history
            .get(channel_id.get(), message_id.get())
            .map(|m| rest::reactions::own(&m.object))
            .unwrap_or_default()
    }

    /// The bot's messages in a channel, oldest first, edits applied.
    pub fn messages_in(&self, channel_id: Snowflake) -> Vec<BotMessage> {
        self.shared()
            .lock()
            .dir
            .history
            .bot_messages(channel_id.get())
    }

    /// Events from now on (unbounded; drop the receiver when done).
    pub fn subscribe(&self) -> async_channel::Receiver<SimEvent> {
        self.shared().lock().events.subscribe()
    }

    /// The events so far (the most recent 10 000).
    pub fn events(&self) -> Vec<SimEvent> {
        self.shared().lock().events.history()
    }

    /// The first event matching `pred` — among those that already happened
    /// (the most recent 10 000), else the next one to come — or `None`
    /// after `timeout`. To wait for the *next* occurrence of something that
    /// may already have happened, [`subscribe`](Simulator::subscribe) before
    /// acting and use [`next_matching`].
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&SimEvent) -> bool,
    ) -> Option<SimEvent> {
        let found = self.shared().lock().events.find_or_subscribe(&mut pred);
        match found {
            Ok(event) => Some(event),
            Err(rx) => next_matching(&rx, timeout, pred).await,
        }
    }
}
