//! Turning the config file's text into a [`Config`], with errors that name
//! the key, the file and the line.
//!
//! serde_json reports *where* a type error is but not *which key* it belongs
//! to, so the text is also read as a map of raw values: the key whose value
//! starts last before the error position is the culprit. That keeps the
//! typed `deny_unknown_fields` struct as the single list of keys, without
//! another crate.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use smolcord::transport::Compression;

use super::{
    default_agent_concurrency, default_agent_timeout_s, default_api_base,
    default_dm_fallback_timeout_s, default_heartbeat_warn_ms, default_intents,
    default_journal_capacity, default_max_attachment_bytes, default_max_result_bytes,
    default_results_poll_ms, default_safe_mode_after_failures, default_shard,
    default_transcribe_timeout_s, Config, ConfigError,
};

/// Every key, for "unknown key" messages. Keep in step with [`Config`]
/// (a unit test checks that each one parses).
pub(super) const KEYS: &[&str] = &[
    "gateway_url",
    "api_base",
    "state_dir",
    "intents",
    "shard",
    "compress",
    "owner_id",
    "allowed_user_ids",
    "tofu",
    "transcribe_cmd",
    "transcribe_timeout_s",
    "agent_cmd",
    "agent_timeout_s",
    "dm_fallback_cmd",
    "dm_fallback_timeout_s",
    "results_poll_ms",
    "max_attachment_bytes",
    "max_result_bytes",
    "heartbeat_warn_ms",
    "token_file",
    "agent_concurrency",
    "safe_mode_after_failures",
    "journal_capacity",
    "max_gateway_message_bytes",
    "shards",
    "identify_queue_url",
    "extra_ca_file",
    "channels",
    "reactions",
    "stream_replies",
];

/// Keys people reach for that must never hold the token.
const TOKEN_KEYS: &[&str] = &["token", "bot_token", "discord_token"];

/// Every key at its default (the state dir is filled in later).
pub(super) fn defaults() -> Config {
    Config {
        gateway_url: None,
        api_base: default_api_base(),
        state_dir: Default::default(),
        intents: default_intents(),
        shard: default_shard(),
        compress: Compression::None,
        owner_id: None,
        allowed_user_ids: Vec::new(),
        tofu: false,
        transcribe_cmd: None,
        transcribe_timeout_s: default_transcribe_timeout_s(),
        agent_cmd: None,
        agent_timeout_s: default_agent_timeout_s(),
        dm_fallback_cmd: None,
        dm_fallback_timeout_s: default_dm_fallback_timeout_s(),
        results_poll_ms: default_results_poll_ms(),
        max_attachment_bytes: default_max_attachment_bytes(),
        max_result_bytes: default_max_result_bytes(),
        heartbeat_warn_ms: default_heartbeat_warn_ms(),
        token_file: None,
        agent_concurrency: default_agent_concurrency(),
        safe_mode_after_failures: default_safe_mode_after_failures(),
        journal_capacity: default_journal_capacity(),
        max_gateway_message_bytes: None,
        shards: None,
        identify_queue_url: None,
        extra_ca_file: None,
        channels: Vec::new(),
        reactions: Default::default(),
        stream_replies: false,
    }
}

/// Parses the file text; no environment, no validation beyond types.
pub(super) fn from_text(text: &str, origin: &Path) -> Result<Config, ConfigError> {
    let file = origin.display();
    let raw: BTreeMap<String, &RawValue> = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "invalid JSON"
        } else {
            "expected a JSON object"
        };
        ConfigError::new(format!("config {file}: {what}: {}", located(&e)))
    })?;
    if let Some(key) = TOKEN_KEYS.iter().find(|key| raw.contains_key(**key)) {
        return Err(ConfigError::new(format!(
            "config {file}: key `{key}`: the token is not read from the config file; \
             set DISCORD_TOKEN or point `token_file` at a file holding it"
        )));
    }
    if raw.contains_key("shard") && raw.contains_key("shards") {
        return Err(ConfigError::new(format!(
            "config {file}: keys `shard` and `shards` both set: use `shards` ([first, last, count] or \"auto\") alone"
        )));
    }
    serde_json::from_str::<Config>(text).map_err(|e| {
        let mut message = message_of(&e);
        let named = quoted_key(&message);
        // A nested section's unknown field (`channels[0].mentoin`) is not a
        // top-level key: serde's message lists that section's fields.
        let top_level = named.as_ref().is_some_and(|key| raw.contains_key(key));
        let named = named.filter(|_| top_level);
        if let (Some(key), true) = (&named, message.starts_with("unknown field")) {
            message = unknown_key(key);
        }
        let key = named.or_else(|| key_at(text, &raw, e.line(), e.column()));
        let key = key.map(|k| format!("key `{k}`: ")).unwrap_or_default();
        ConfigError::new(format!(
            "config {file}: {key}{message}, line {} col {}",
            e.line(),
            e.column()
        ))
    })
}

/// serde_json's message without its " at line L column C" suffix.
fn message_of(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) => message.to_owned(),
        None => text,
    }
}

fn located(e: &serde_json::Error) -> String {
    format!("{}, line {} col {}", message_of(e), e.line(), e.column())
}

/// "unknown key", with the closest known key when one is near (a typo).
fn unknown_key(key: &str) -> String {
    let closest = KEYS
        .iter()
        .map(|known| (edit_distance(key, known), *known))
        .min()
        .filter(|(distance, _)| *distance <= 3);
    match closest {
        Some((_, known)) => format!("unknown key (did you mean `{known}`?)"),
        None => format!("unknown key (the keys are: {})", KEYS.join(", ")),
    }
}

/// Levenshtein distance (keys are short; quadratic is fine).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The key named in "unknown field `x`" / "duplicate field `x`".
fn quoted_key(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("duplicate field `"))?;
    rest.split_once('`').map(|(key, _)| key.to_owned())
}

/// The key whose value starts last at or before (line, column).
fn key_at(
    text: &str,
    raw: &BTreeMap<String, &RawValue>,
    line: usize,
    column: usize,
) -> Option<String> {
    let offset = offset_of(text, line, column)?;
    let base = text.as_ptr() as usize;
    raw.iter()
        .filter_map(|(key, value)| {
            // Borrowed raw values are slices of `text`; the address difference
            // is the value's byte offset.
            let start = (value.get().as_ptr() as usize).checked_sub(base)?;
            (start < text.len() && start <= offset).then_some((start, key))
        })
        .max_by_key(|(start, _)| *start)
        .map(|(_, key)| key.clone())
}

/// Byte offset of serde_json's 1-based line and column.
fn offset_of(text: &str, line: usize, column: usize) -> Option<usize> {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.checked_sub(1)?)
        .map(str::len)
        .sum();
    Some(line_start + column.saturating_sub(1))
}

/// A snowflake id given as a string of digits or as an integer; kept as a
/// string (JSON numbers lose precision past 2^53 in many tools).
struct Snowflake(String);

impl<'de> Deserialize<'de> for Snowflake {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SnowflakeVisitor;
        impl Visitor<'_> for SnowflakeVisitor {
            type Value = Snowflake;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a snowflake id (a string of digits, or an integer)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Snowflake, E> {
                Ok(Snowflake(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Snowflake, E> {
                u64::try_from(v)
                    .map(|v| Snowflake(v.to_string()))
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Snowflake, E> {
                if !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()) {
                    Ok(Snowflake(v.to_owned()))
                } else {
                    Err(E::invalid_value(Unexpected::Str(v), &self))
                }
            }
        }
        deserializer.deserialize_any(SnowflakeVisitor)
    }
}

pub(super) fn opt_snowflake<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Snowflake>::deserialize(d)?.map(|s| s.0))
}

pub(super) fn snowflakes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Vec::<Snowflake>::deserialize(d)?
        .into_iter()
        .map(|s| s.0)
        .collect())
}

/// `compress`: `true`/`false` as before zstd (zlib-stream / none), or the
/// name of the stream: `"zlib"`, `"zstd"`.
pub(super) fn compression<'de, D: Deserializer<'de>>(d: D) -> Result<Compression, D::Error> {
    struct CompressionVisitor;
    impl Visitor<'_> for CompressionVisitor {
        type Value = Compression;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(r#"true, false, "zlib" or "zstd""#)
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Compression, E> {
            Ok(if v {
                Compression::Zlib
            } else {
                Compression::None
            })
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Compression, E> {
            match v {
                "zlib" => Ok(Compression::Zlib),
                "zstd" => Ok(Compression::Zstd),
                _ => Err(E::invalid_value(Unexpected::Str(v), &self)),
            }
        }
    }
    d.deserialize_any(CompressionVisitor)
}

/// `[id, count]`, with a message that says so when the length is wrong.
pub(super) fn shard<'de, D: Deserializer<'de>>(d: D) -> Result<[u32; 2], D::Error> {
    let values = Vec::<u32>::deserialize(d)?;
    match values[..] {
        [id, count] => Ok([id, count]),
        _ => Err(de::Error::invalid_length(
            values.len(),
            &"[shard_id, shard_count]",
        )),
    }
}
