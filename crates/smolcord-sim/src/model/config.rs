//! What a simulator instance accepts and announces.

use super::bot_token::{bot_id_of_token, DEFAULT_SIM_TOKEN};
use crate::wire::tls::SimTls;
use smolcord::protocol::{Intents, Snowflake};
use smolcord::token::Token;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Discord's default limit on one uploaded file ("20 MiB for all users",
/// since 2026-09-04; `rest/upload_limits.rs`), the same figure as the
/// library's `smolcord::rest::MAX_FILE_BYTES` (a test checks they agree); [`SimConfig::upload_limit`]
/// changes it (a server's boost tier raises it; a test lowers it to make a
/// small file bite).
pub const DEFAULT_UPLOAD_LIMIT: usize = 20 * 1024 * 1024;

/// How the simulator behaves. Every field has a Discord-like default
/// (`SimConfig::default()`); tests override a few with struct update syntax:
///
/// ```
/// use smolcord_sim::SimConfig;
/// use std::time::Duration;
/// let config = SimConfig {
///     heartbeat_interval: Duration::from_millis(100),
///     ..SimConfig::default()
/// };
/// assert_eq!(config.heartbeat_grace, 1.5);
/// ```
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Where to listen (`127.0.0.1:0`: an ephemeral port).
    pub listen: SocketAddr,
    /// Hello's `heartbeat_interval` (41250 ms, as production Discord sends).
    pub heartbeat_interval: Duration,
    /// Close with 4009 when no heartbeat arrived for `grace × interval`
    /// (counted from Hello, then from the last beat). Discord publishes no
    /// number; 1.5 is what a known reimplementation (Spacebar) uses.
    pub heartbeat_grace: f64,
    /// A beat counts as *late* when its gap exceeds
    /// `interval × (1 + late_tolerance)` (0.05). Without a tolerance every
    /// punctual client would score half its beats late from scheduling noise.
    pub late_tolerance: f64,
    /// The accepted bot token (Identify/Resume and `Authorization: Bot …`);
    /// [`DEFAULT_SIM_TOKEN`] by default, shaped like Discord's and decoding
    /// to `bot_id`. Set both with [`SimConfig::with_token`].
    pub token: Token,
    /// The bot user's id (also the application id); the id the token's
    /// first part decodes to.
    pub bot_id: Snowflake,
    /// The bot user's name.
    pub bot_name: String,
    /// Privileged intents "enabled in the Developer Portal". Requesting one
    /// that is not here closes the connection with 4014.
    pub enabled_privileged_intents: Intents,
    /// `Some(n)`: the bot "needs" exactly n shards; an Identify with another
    /// count (no `shard` means 1) is closed with 4011.
    pub required_shards: Option<u32>,
    /// Shard ids an Identify is closed with 4010 for, though below the
    /// count: a gateway refusing one shard of a set for reasons of its own
    /// (id ≥ count, the other cause, a set never sends: it refuses such
    /// ids itself).
    pub refused_shards: Vec<u32>,
    /// Identify budget, reported by `GET /gateway/bot` and spent by each
    /// Identify; at 0 an Identify gets op 9 `false`.
    pub session_start_limit: SessionStartLimit,
    /// Enforce one identify per `max_concurrency` bucket (`shard_id %
    /// max_concurrency`) per `identify_window`, as Discord does: a too
    /// early Identify gets op 9 `false` (PROTOCOL.md §1.5: "Exceeding the
    /// concurrency limit yields op 9 Invalid Session"). Off by default so
    /// tests may re-identify quickly; too early identifies are counted in
    /// `Totals::identifies_too_early` either way.
    pub enforce_identify_concurrency: bool,
    /// Discord's identify window per bucket (5 s; shorter for fast tests).
    pub identify_window: Duration,
    /// The shard count `GET /gateway/bot` recommends (when
    /// `required_shards` is not set).
    pub recommended_shards: u32,
    /// How long a disconnected session stays resumable (90 s, as observed).
    pub resume_window: Duration,
    /// Dispatches kept per session for replay; a Resume from further back
    /// gets op 9 `false`.
    pub replay_capacity: usize,
    /// Commands allowed per `command_window` per connection, heartbeats
    /// included (Discord: 120 per 60 s; beyond it: close 4008). Tests with a
    /// very short heartbeat interval that run long may need to raise it.
    pub command_limit: u32,
    /// The window of `command_limit`.
    pub command_window: Duration,
    /// Size of the frame `Fault::Oversized` sends: by default just over the
    /// 16 MiB frame limit tungstenite-based clients apply by default.
    pub oversized_frame_bytes: usize,
    /// Guilds announced in READY (and by GUILD_CREATE when the session has
    /// the GUILDS intent).
    pub guilds: Vec<SimGuild>,
    /// How long a message's `nonce` is remembered for `enforce_nonce`
    /// (Discord: "the past few minutes", no exact figure; 2 minutes here,
    /// so a client that counts on more fails in tests first).
    pub nonce_window: Duration,
    /// Discord's clock runs this far ahead of the host's: a host whose
    /// clock is behind (a Raspberry Pi after a power cut, before NTP).
    /// New snowflakes and every REST answer's `Date` header follow it.
    pub clock_ahead: Duration,
    /// Enforce REST rate limits (429 beyond them, as Discord does);
    /// [`RestRateLimit::DISCORD`] for Discord's. Off by default so tests
    /// may post quickly.
    pub rest_rate_limit: Option<RestRateLimit>,
    /// Members of every guild beyond the bot and its owner, for Request
    /// Guild Members (op 8): `member-00001`, ... (0; at most
    /// [`MAX_GUILD_MEMBERS`]).
    pub guild_members: u32,
    /// A repeat of an all-members op 8 for one guild within this gets a
    /// RATE_LIMITED dispatch instead of chunks (Discord: 30 s).
    pub all_members_window: Duration,
    /// Serve TLS (`wss://`, `https://`) with this certificate instead of
    /// plain `ws://` and `http://`; every URL the simulator hands out
    /// follows.
    pub tls: Option<SimTls>,
    /// The most one uploaded file may be: Discord's default
    /// [`DEFAULT_UPLOAD_LIMIT`], 20 MiB (a
    /// server's boost tier raises it). Over it: 413 40005.
    pub upload_limit: usize,
}

/// The limits the simulator enforces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RestRateLimit {
    /// Requests per `window` for one route in one channel.
    pub per_route: u32,
    /// The window of `per_route`.
    pub window: Duration,
    /// Requests per second over all routes (the bot's global limit).
    pub global_per_second: u32,
}

impl RestRateLimit {
    /// What Discord applies to a bot posting messages: 5 per 5 s in a
    /// channel, 50 requests a second overall.
    pub const DISCORD: RestRateLimit = RestRateLimit {
        per_route: 5,
        window: Duration::from_secs(5),
        global_per_second: 50,
    };

    /// What the headers count against when no limits are enforced: 50
    /// requests a second per route (Discord's global figure), so a client
    /// that obeys the headers is never held back longer than a second, and
    /// a test that posts quickly stays quick.
    pub const REPORTED: RestRateLimit = RestRateLimit {
        per_route: 50,
        window: Duration::from_secs(1),
        global_per_second: 50,
    };
}

/// The largest [`SimConfig::guild_members`] (25 chunks per all-members
/// request).
pub const MAX_GUILD_MEMBERS: u32 = 25_000;

/// The `session_start_limit` object of `GET /gateway/bot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionStartLimit {
    /// Identifies allowed per reset period.
    pub total: u32,
    /// Identifies left (each Identify spends one).
    pub remaining: u32,
    /// Until the budget resets.
    pub reset_after: Duration,
    /// Identifies allowed per 5 s.
    pub max_concurrency: u32,
}

/// A guild the bot is in.
#[derive(Clone, Debug, PartialEq)]
pub struct SimGuild {
    /// Guild id.
    pub id: Snowflake,
    /// Guild name.
    pub name: String,
    /// Its text channels.
    pub channels: Vec<SimChannel>,
}

/// A text channel of a [`SimGuild`].
#[derive(Clone, Debug, PartialEq)]
pub struct SimChannel {
    /// Channel id.
    pub id: Snowflake,
    /// Channel name.
    pub name: String,
}

impl Default for SessionStartLimit {
    fn default() -> SessionStartLimit {
        SessionStartLimit {
            total: 1000,
            remaining: 1000,
            reset_after: Duration::from_secs(24 * 3600),
            max_concurrency: 1,
        }
    }
}

impl SimGuild {
    /// The default guild: "smolcord test guild" with `#general` and
    /// `#bot-log`.
    pub fn example() -> SimGuild {
        SimGuild {
            id: Snowflake::new(1_300_000_000_000_000_100),
            name: "smolcord test guild".to_owned(),
            channels: vec![
                SimChannel {
                    id: Snowflake::new(1_300_000_000_000_000_101),
                    name: "general".to_owned(),
                },
                SimChannel {
                    id: Snowflake::new(1_300_000_000_000_000_102),
                    name: "bot-log".to_owned(),
                },
            ],
        }
    }
}

impl SimConfig {
    /// The member count of every guild (GUILD_CREATE's `member_count`):
    /// the bot, its owner and [`SimConfig::guild_members`] more (capped).
    pub(crate) fn member_count(&self) -> u64 {
        2 + u64::from(self.guild_members.min(MAX_GUILD_MEMBERS))
    }

    /// Accepts `token` instead of [`DEFAULT_SIM_TOKEN`]; when it is shaped
    /// like Discord's, the bot's id becomes the id its first part decodes
    /// to, so READY and `GET /users/@me` agree with the token as they do
    /// on Discord (a token not shaped like Discord's keeps `bot_id`).
    ///
    /// ```
    /// use smolcord_sim::{sim_token_for, SimConfig};
    /// use smolcord::protocol::Snowflake;
    /// use smolcord::token::Token;
    /// let token = Token::new(&sim_token_for(Snowflake::new(77))).unwrap();
    /// let config = SimConfig::default().with_token(token);
    /// assert_eq!(config.bot_id, Snowflake::new(77));
    /// ```
    pub fn with_token(mut self, token: Token) -> SimConfig {
        if let Some(id) = bot_id_of_token(token.expose()) {
            self.bot_id = id;
        }
        self.token = token;
        self
    }
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            heartbeat_interval: Duration::from_millis(41_250),
            heartbeat_grace: 1.5,
            late_tolerance: 0.05,
            token: Token::new(DEFAULT_SIM_TOKEN).unwrap_or_else(|| unreachable!()),
            bot_id: Snowflake::new(1_100_000_000_000_000_001),
            bot_name: "smolbot".to_owned(),
            enabled_privileged_intents: Intents::empty(),
            required_shards: None,
            refused_shards: Vec::new(),
            session_start_limit: SessionStartLimit::default(),
            enforce_identify_concurrency: false,
            identify_window: Duration::from_secs(5),
            recommended_shards: 1,
            resume_window: Duration::from_secs(90),
            replay_capacity: 1024,
            command_limit: 120,
            command_window: Duration::from_secs(60),
            oversized_frame_bytes: 16 * 1024 * 1024 + 1024,
            guilds: vec![SimGuild::example()],
            nonce_window: Duration::from_secs(120),
            clock_ahead: Duration::ZERO,
            rest_rate_limit: None,
            guild_members: 0,
            all_members_window: Duration::from_secs(30),
            tls: None,
            upload_limit: DEFAULT_UPLOAD_LIMIT,
        }
    }
}
