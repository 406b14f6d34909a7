//! Application, not library API: the bridge's configuration, one JSON file
//! plus a few environment overrides.
//!
//! Sources, lowest precedence first: built-in defaults; the config file
//! (`--config FILE`, else `SMOLCORD_CONFIG`, else `STATE_DIR/config.json`
//! when it exists); then `SMOLCORD_GATEWAY_URL`, `SMOLCORD_API_BASE`,
//! `SMOLCORD_CA_FILE` and `SMOLCORD_STATE_DIR`. Unknown keys and wrong
//! types are refused with the key, the file and the position, because a
//! typo silently ignored (say `alowed_user_ids`) would open or close the
//! bot to the wrong people.
//!
//! The token is deliberately *not* a config key: it comes from
//! `DISCORD_TOKEN` or from the file named by `token_file`, so a config file
//! can be shared or committed without leaking it.
//!
//! The environment is passed in as a function, so tests never read the real
//! environment or `$HOME`:
//!
//! ```no_run
//! # smol::block_on(async {
//! let env = |name: &str| std::env::var(name).ok();
//! let config = smolcord_app::config::Config::load(None, &env).await?;
//! let token = config.token(&env).await?;
//! # Ok::<(), smolcord_app::config::ConfigError>(())
//! # });
//! ```

pub mod channels;
mod error;
mod parse;
pub mod reactions;
mod state_dir;
mod validate;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use channels::ChannelConfig;
pub use error::ConfigError;
pub use reactions::Reactions;

use smolcord::shard::ShardRange;
use smolcord::token::Token;
use smolcord::transport::Compression;

/// The environment, as a lookup function (`std::env::var(..).ok()` in
/// production, a map in tests).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Default REST base URL.
pub const DEFAULT_API_BASE: &str = "https://discord.com/api/v10";
/// Default gateway intents: DIRECT_MESSAGES (1 << 12).
pub const DEFAULT_INTENTS: u64 = 1 << 12;
/// Default attachment download cap: 25 MiB (Discord's request limit).
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 25 * 1024 * 1024;
/// Default cap on one spool result file: 1 MiB, as much as an `agent_cmd`
/// reply may be (its output cap), so a spooled agent can say what a piped
/// one can. The cap keeps what a delivery worker holds small.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 1024 * 1024;
/// The most `max_result_bytes` may be: 10 MiB. A result is held in memory
/// while it is delivered (4 workers: 40 MiB at worst, already much for a
/// Pi), and a long one goes out as one attachment, which must stay within
/// Discord's 20 MiB a file (`smolcord::rest::MAX_FILE_BYTES`). The cap was
/// Discord's old file limit; it stays where it was when that limit rose.
pub const MAX_RESULT_BYTES_CAP: u64 = 10 * 1024 * 1024;
const _: () = assert!(MAX_RESULT_BYTES_CAP <= smolcord::rest::MAX_FILE_BYTES as u64);

/// The resolved configuration. Every key of the file has a default; see the
/// README for one line per key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Gateway URL (`ws://` or `wss://`); `None` asks `GET /gateway/bot`.
    #[serde(default)]
    pub gateway_url: Option<String>,
    /// REST base URL, without a trailing slash.
    #[serde(default = "default_api_base")]
    pub api_base: String,
    /// Where session, access and spool state live.
    // Empty while parsing; `resolve` fills it from the environment.
    #[serde(default)]
    pub state_dir: PathBuf,
    /// Gateway intents bit set.
    #[serde(default = "default_intents")]
    pub intents: u64,
    /// `[shard_id, shard_count]`.
    #[serde(default = "default_shard", deserialize_with = "parse::shard")]
    pub shard: [u32; 2],
    /// Transport compression: `true` or `"zlib"` (zlib-stream), `"zstd"`
    /// (zstd-stream), `false` (none).
    #[serde(default, deserialize_with = "parse::compression")]
    pub compress: Compression,
    /// The owner's user id (snowflake).
    #[serde(default, deserialize_with = "parse::opt_snowflake")]
    pub owner_id: Option<String>,
    /// Further allowed user ids (snowflakes).
    #[serde(default, deserialize_with = "parse::snowflakes")]
    pub allowed_user_ids: Vec<String>,
    /// Trust on first use: the first user to DM becomes the owner.
    #[serde(default)]
    pub tofu: bool,
    /// Transcriber argv; the audio file path is appended.
    #[serde(default)]
    pub transcribe_cmd: Option<Vec<String>>,
    /// Transcriber timeout, seconds.
    #[serde(default = "default_transcribe_timeout_s")]
    pub transcribe_timeout_s: u64,
    /// Agent argv; task JSON on stdin, stdout is the reply.
    #[serde(default)]
    pub agent_cmd: Option<Vec<String>>,
    /// Agent timeout, seconds.
    #[serde(default = "default_agent_timeout_s")]
    pub agent_timeout_s: u64,
    /// DM fallback argv; result JSON on stdin.
    #[serde(default)]
    pub dm_fallback_cmd: Option<Vec<String>>,
    /// DM fallback timeout, seconds.
    #[serde(default = "default_dm_fallback_timeout_s")]
    pub dm_fallback_timeout_s: u64,
    /// Results spool poll interval, milliseconds.
    #[serde(default = "default_results_poll_ms")]
    pub results_poll_ms: u64,
    /// Largest attachment the bridge downloads, bytes.
    #[serde(default = "default_max_attachment_bytes")]
    pub max_attachment_bytes: u64,
    /// Largest spool result file read, bytes; larger ones go to
    /// `spool/rejected/` unread.
    #[serde(default = "default_max_result_bytes")]
    pub max_result_bytes: u64,
    /// A heartbeat later than this (ms) is logged as a warning.
    #[serde(default = "default_heartbeat_warn_ms")]
    pub heartbeat_warn_ms: u64,
    /// File holding the token (used when `DISCORD_TOKEN` is unset). A
    /// relative path is relative to the config file's directory.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Agent commands running at once.
    #[serde(default = "default_agent_concurrency")]
    pub agent_concurrency: usize,
    /// Consecutive failed start-ups before safe mode.
    #[serde(default = "default_safe_mode_after_failures")]
    pub safe_mode_after_failures: u32,
    /// Capacity of the failure journal (records).
    #[serde(default = "default_journal_capacity")]
    pub journal_capacity: usize,
    /// Largest gateway message accepted, bytes; unset picks by intents
    /// (1 MiB without guild state, 16 MiB with).
    #[serde(default)]
    pub max_gateway_message_bytes: Option<u64>,
    /// The shards this process runs: `"auto"` or `[first, last, count]`
    /// (also `SMOLCORD_SHARDS`: `auto` or `FIRST-LAST/COUNT`). Unset: the
    /// one shard of `shard`.
    #[serde(default)]
    pub shards: Option<ShardRange>,
    /// A twilight-rs/gateway-queue compatible service every fresh identify
    /// waits on (also `SMOLCORD_IDENTIFY_QUEUE_URL`); unset: in-process.
    #[serde(default)]
    pub identify_queue_url: Option<String>,
    /// PEM file of extra CA certificates trusted for `wss://` and
    /// `https://` besides Mozilla's roots (a TLS-inspecting proxy's CA).
    /// A relative path is relative to the config file's directory.
    #[serde(default)]
    pub extra_ca_file: Option<PathBuf>,
    /// Server channels the bot answers in (see [`channels`]); empty: DMs
    /// only.
    #[serde(default)]
    pub channels: Vec<ChannelConfig>,
    /// Emoji on a user's message when it is taken, answered, failed (see
    /// [`reactions`]); none by default.
    #[serde(default)]
    pub reactions: Reactions,
    /// Show the agent's output so far in the "working…" placeholder while
    /// it runs (an agent that prints as it thinks); the reply replaces it.
    #[serde(default)]
    pub stream_replies: bool,
}

fn default_api_base() -> String {
    DEFAULT_API_BASE.to_owned()
}
fn default_intents() -> u64 {
    DEFAULT_INTENTS
}
fn default_shard() -> [u32; 2] {
    [0, 1]
}
fn default_transcribe_timeout_s() -> u64 {
    25
}
fn default_agent_timeout_s() -> u64 {
    300
}
fn default_dm_fallback_timeout_s() -> u64 {
    15
}
fn default_results_poll_ms() -> u64 {
    1000
}
fn default_max_attachment_bytes() -> u64 {
    DEFAULT_MAX_ATTACHMENT_BYTES
}
fn default_max_result_bytes() -> u64 {
    DEFAULT_MAX_RESULT_BYTES
}
fn default_heartbeat_warn_ms() -> u64 {
    1000
}
fn default_agent_concurrency() -> usize {
    2
}
fn default_safe_mode_after_failures() -> u32 {
    3
}
fn default_journal_capacity() -> usize {
    32
}

impl Config {
    /// The shards to run: `shards`, else the one shard of `shard`.
    pub fn shard_range(&self) -> ShardRange {
        self.shards.unwrap_or(ShardRange::Range {
            first: self.shard[0],
            last: self.shard[0],
            count: self.shard[1],
        })
    }

    /// The intents to identify with: `intents`, plus what `channels`
    /// needs ([`channels::intents_for`]).
    pub fn gateway_intents(&self) -> smolcord::protocol::Intents {
        smolcord::protocol::Intents::from_bits(self.intents) | channels::intents_for(&self.channels)
    }

    /// The entry of `channels` for `channel`, if it is answered.
    pub fn channel(&self, channel: smolcord::protocol::Snowflake) -> Option<&ChannelConfig> {
        self.channels.iter().find(|entry| entry.id == channel)
    }

    /// All defaults, with the given state dir. Meant for tests and embedders
    /// that build their configuration in code.
    pub fn with_state_dir(state_dir: impl Into<PathBuf>) -> Config {
        let mut config = parse::defaults();
        config.state_dir = state_dir.into();
        config
    }

    /// Loads the configuration (see the module doc for the sources).
    ///
    /// `args_config` is `--config FILE`. An explicitly named file that is
    /// missing is an error; a missing `STATE_DIR/config.json` is not.
    pub async fn load(args_config: Option<&Path>, env: Env<'_>) -> Result<Config, ConfigError> {
        let explicit = args_config
            .map(Path::to_path_buf)
            .or_else(|| state_dir::non_empty(env, "SMOLCORD_CONFIG").map(PathBuf::from));
        match explicit {
            Some(path) => match read_file(&path, CONFIG_MAX_BYTES, "config").await? {
                Some(text) => Config::parse(&text, &path, env),
                None => Err(ConfigError::new(format!(
                    "config {}: file not found (named by --config or SMOLCORD_CONFIG)",
                    path.display()
                ))),
            },
            None => {
                let implicit = state_dir::from_env(env).map(|dir| dir.join("config.json"));
                let text = match &implicit {
                    Some(path) => read_file(path, CONFIG_MAX_BYTES, "config").await?,
                    None => None,
                };
                match (implicit, text) {
                    (Some(path), Some(text)) => Config::parse(&text, &path, env),
                    _ => Config::from_defaults(env),
                }
            }
        }
    }

    /// Parses the text of config file `origin` and applies the environment
    /// overrides. Pure: no I/O.
    pub fn parse(text: &str, origin: &Path, env: Env<'_>) -> Result<Config, ConfigError> {
        let mut config = parse::from_text(text, origin)?;
        for file in [&mut config.token_file, &mut config.extra_ca_file] {
            if let (Some(path), Some(dir)) = (file.as_mut(), origin.parent()) {
                if path.is_relative() {
                    *path = dir.join(&*path);
                }
            }
        }
        config.resolve(Some(origin), env)
    }

    /// Defaults plus the environment overrides (no config file).
    pub fn from_defaults(env: Env<'_>) -> Result<Config, ConfigError> {
        parse::defaults().resolve(None, env)
    }

    fn resolve(mut self, origin: Option<&Path>, env: Env<'_>) -> Result<Config, ConfigError> {
        if let Some(url) = state_dir::non_empty(env, "SMOLCORD_GATEWAY_URL") {
            self.gateway_url = Some(url);
        }
        if let Some(base) = state_dir::non_empty(env, "SMOLCORD_API_BASE") {
            self.api_base = base;
        }
        if let Some(shards) = state_dir::non_empty(env, "SMOLCORD_SHARDS") {
            self.shards = Some(
                ShardRange::parse(&shards)
                    .map_err(|e| ConfigError::new(format!("SMOLCORD_SHARDS: {e}")))?,
            );
        }
        if let Some(url) = state_dir::non_empty(env, "SMOLCORD_IDENTIFY_QUEUE_URL") {
            self.identify_queue_url = Some(url);
        }
        self.api_base = self.api_base.trim_end_matches('/').to_owned();
        if let Some(file) = state_dir::non_empty(env, "SMOLCORD_CA_FILE") {
            self.extra_ca_file = Some(PathBuf::from(file));
        }
        if let Some(dir) = state_dir::non_empty(env, "SMOLCORD_STATE_DIR") {
            self.state_dir = PathBuf::from(dir);
        } else if self.state_dir.as_os_str().is_empty() {
            self.state_dir = state_dir::from_env(env).ok_or_else(|| {
                ConfigError::new(
                    "no state directory: set SMOLCORD_STATE_DIR (or XDG_STATE_HOME or HOME), \
                     or `state_dir` in the config file",
                )
            })?;
        }
        validate::check(&self, origin)?;
        Ok(self)
    }

    /// The bot token: `DISCORD_TOKEN` if set and non-blank, else the
    /// contents of `token_file` (trimmed), else `None`.
    ///
    /// A `token_file` that cannot be read, or is blank, is an error naming
    /// the file (never its contents).
    pub async fn token(&self, env: Env<'_>) -> Result<Option<Token>, ConfigError> {
        if let Some(token) = env("DISCORD_TOKEN").and_then(|raw| Token::new(&raw)) {
            return Ok(Some(token));
        }
        let Some(path) = self.token_file.clone() else {
            return Ok(None);
        };
        let shown = path.display().to_string();
        let text = read_file(&path, TOKEN_FILE_MAX_BYTES, "token_file").await?;
        if text.is_some() {
            warn_if_shared(&path).await;
        }
        match text {
            None => Err(ConfigError::new(format!(
                "token_file {shown}: file not found"
            ))),
            Some(text) => match Token::new(&text) {
                Some(token) => Ok(Some(token)),
                None => Err(ConfigError::new(format!(
                    "token_file {shown}: file is empty"
                ))),
            },
        }
    }
}

/// The most read from a config file. A real one is a few KiB even with
/// hundreds of allowed users; 1 MiB is far above that, yet refuses a wrong
/// path (a log file, `/dev/zero`) at once instead of filling a Pi's memory.
pub const CONFIG_MAX_BYTES: u64 = 1024 * 1024;
/// The most read from a `token_file`. A bot token is about 72 characters;
/// 4 KiB leaves room for white space and a `Bot ` prefix, and nothing that
/// size or larger can be a token.
pub const TOKEN_FILE_MAX_BYTES: u64 = 4096;

/// Reads a text file of at most `limit` bytes on the blocking pool (never
/// more than `limit + 1` bytes, so `/dev/zero` is refused at once);
/// `Ok(None)` when it does not exist. `what` names the file in errors
/// (`config`, `token_file`). Start-up only.
async fn read_file(path: &Path, limit: u64, what: &str) -> Result<Option<String>, ConfigError> {
    let read = smolcord::offload::read_capped(
        path,
        limit,
        smolcord::offload::FileKind::RegularBehindLink,
        String::from_utf8,
    );
    let shown = path.display();
    match read.await {
        Ok(None) => Ok(None),
        Ok(Some(Ok(text))) => Ok(Some(text)),
        Ok(Some(Err(_))) => Err(ConfigError::new(format!(
            "{what} {shown}: not UTF-8 text"
        ))),
        Err(smolcord::offload::Error::TooLarge { limit, .. }) => Err(ConfigError::new(format!(
            "{what} {shown}: larger than {limit} bytes, the most smolcord reads from it; is this the right file?"
        ))),
        Err(smolcord::offload::Error::NotRegular { what: kind, .. }) => Err(ConfigError::new(
            format!("{what} {shown}: is {kind}, not a regular file"),
        )),
        Err(e) => Err(ConfigError::new(format!("{what} {shown}: {}", io_reason(&e)))),
    }
}

/// Warns when the token file can be read by its group or by others: the
/// token lets anyone run the bot (and get it reset).
async fn warn_if_shared(path: &Path) {
    let owned = path.to_path_buf();
    let mode = smolcord::offload::unblock(move || mode_blocking(&owned)).await;
    if let Some(warning) = mode.ok().and_then(|mode| shared_token_warning(path, mode)) {
        log::warn!("{warning}");
    }
}

/// The warning for a token file with permission bits `mode`, if any.
fn shared_token_warning(path: &Path, mode: u32) -> Option<String> {
    (mode & 0o077 != 0).then(|| {
        format!(
            "token_file {}: readable by {} (mode {:03o}); `chmod 600` it",
            path.display(),
            if mode & 0o007 != 0 {
                "others"
            } else {
                "its group"
            },
            mode & 0o777
        )
    })
}

#[allow(clippy::disallowed_methods)] // start-up only, and on the blocking pool
fn mode_blocking(path: &Path) -> std::io::Result<u32> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::metadata(path)?.permissions().mode())
}

/// The OS's reason, without offload's "cannot read PATH" (the caller
/// names the file already).
fn io_reason(e: &smolcord::offload::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests;
