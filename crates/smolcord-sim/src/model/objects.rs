//! Discord JSON objects as the simulator sends them (users, messages,
//! channels, guilds), plus snowflake ids and ISO 8601 timestamps.
//!
//! Objects carry the full documented field set, not only what smolcord
//! reads: other libraries (serenity, twilight, discord.py) deserialize them
//! strictly and must not choke on a missing field.

use super::config::{SimConfig, SimGuild};
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// Discord's epoch (2015-01-01T00:00:00Z) in Unix milliseconds.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// Hands out real-shaped snowflakes (time in the high bits), strictly
/// increasing even within one millisecond.
#[derive(Debug, Default)]
pub(crate) struct IdGen {
    last: u64,
    /// Discord's clock ahead of the host's (`SimConfig::clock_ahead`).
    ahead_ms: u64,
}

impl IdGen {
    /// Ids on a clock `ahead` of the host's.
    pub(crate) fn ahead(ahead: std::time::Duration) -> IdGen {
        IdGen {
            last: 0,
            ahead_ms: u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub(crate) fn next(&mut self) -> u64 {
        let now = unix_ms().saturating_add(self.ahead_ms);
        let candidate = now.saturating_sub(DISCORD_EPOCH_MS) << 22;
        self.last = candidate.max(self.last + 1);
        self.last
    }
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Now as Discord writes timestamps: `2026-11-29T10:00:00.123000+00:00`.
pub(crate) fn timestamp_now() -> String {
    iso8601(unix_ms())
}

/// An HTTP `Date` (IMF-fixdate, RFC 9110): `Thu, 03 Dec 2026 00:21:12 GMT`.
pub(crate) fn http_date(ms: u64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{}, {day:02} {} {year:04} {:02}:{:02}:{:02} GMT",
        // 1970-01-01 was a Thursday.
        DAYS[((days + 4) % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
    )
}

/// Howard Hinnant's civil_from_days: (year, month 1-12, day 1-31).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}000+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// A random 32-hex-digit session id.
pub(crate) fn session_id() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// A (non-bot) user.
pub(crate) fn user(id: u64, name: &str) -> Value {
    json!({
        "id": id.to_string(),
        "username": name,
        "discriminator": "0",
        "global_name": name,
        "avatar": null,
        "public_flags": 0,
        "flags": 0,
    })
}

/// The bot's own user, as READY and `GET /users/@me` carry it.
pub(crate) fn bot_user(config: &SimConfig) -> Value {
    json!({
        "id": config.bot_id.to_string(),
        "username": config.bot_name,
        "discriminator": "0",
        "global_name": null,
        "avatar": null,
        "bot": true,
        "verified": true,
        "mfa_enabled": false,
        "email": null,
        "flags": 0,
        "public_flags": 0,
        "locale": "en-US",
        "premium_type": 0,
    })
}

/// The bot as the author of a message.
pub(crate) fn bot_author(config: &SimConfig) -> Value {
    json!({
        "id": config.bot_id.to_string(),
        "username": config.bot_name,
        "discriminator": "0",
        "global_name": null,
        "avatar": null,
        "bot": true,
        "public_flags": 0,
    })
}

/// `GET /oauth2/applications/@me`.
pub(crate) fn application(config: &SimConfig) -> Value {
    json!({
        "id": config.bot_id.to_string(),
        "name": config.bot_name,
        "icon": null,
        "description": "",
        "bot_public": false,
        "bot_require_code_grant": false,
        "verify_key": "0000000000000000000000000000000000000000000000000000000000000000",
        "flags": 0,
        "team": null,
        "owner": user(config.bot_id.get() + 1, "owner"),
        "bot": bot_user(config),
    })
}

/// A DM channel with `recipient`.
pub(crate) fn dm_channel(channel_id: u64, recipient: &Value) -> Value {
    json!({
        "id": channel_id.to_string(),
        "type": 1,
        "last_message_id": null,
        "flags": 0,
        "recipients": [recipient],
    })
}

/// A guild text channel. `with_guild_id` is false inside GUILD_CREATE's
/// list, where Discord leaves `guild_id` out.
pub(crate) fn text_channel(
    channel_id: u64,
    guild_id: u64,
    name: &str,
    position: usize,
    with_guild_id: bool,
) -> Value {
    let mut channel = json!({
        "id": channel_id.to_string(),
        "type": 0,
        "name": name,
        "position": position,
        "permission_overwrites": [],
        "topic": null,
        "nsfw": false,
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "parent_id": null,
        "flags": 0,
    });
    if with_guild_id {
        channel["guild_id"] = json!(guild_id.to_string());
    }
    channel
}

/// A full GUILD_CREATE payload.
pub(crate) fn guild_create(guild: &SimGuild, config: &SimConfig) -> Value {
    let id = guild.id.get();
    let channels: Vec<Value> = guild
        .channels
        .iter()
        .enumerate()
        .map(|(position, c)| text_channel(c.id.get(), id, &c.name, position, false))
        .collect();
    let mut object = json!({
        "id": id.to_string(),
        "name": guild.name,
        "icon": null,
        "splash": null,
        "discovery_splash": null,
        "banner": null,
        "description": null,
        "owner_id": (config.bot_id.get() + 1).to_string(),
        "afk_channel_id": null,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [{
            "id": id.to_string(),
            "name": "@everyone",
            "color": 0,
            // Discord's role object carries `colors` (`color` is its
            // deprecated predecessor); twilight-model requires it.
            "colors": {"primary_color": 0, "secondary_color": null, "tertiary_color": null},
            "hoist": false,
            "icon": null,
            "unicode_emoji": null,
            "position": 0,
            "permissions": "1071698660929",
            "managed": false,
            "mentionable": false,
            "flags": 0,
        }],
        "emojis": [],
        "stickers": [],
        "features": [],
        "mfa_level": 0,
        "application_id": null,
        "system_channel_id": null,
        "system_channel_flags": 0,
        "rules_channel_id": null,
        "public_updates_channel_id": null,
        "safety_alerts_channel_id": null,
        "vanity_url_code": null,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "premium_progress_bar_enabled": false,
        "preferred_locale": "en-US",
    });
    let rest = json!({
        "nsfw_level": 0,
        "max_video_channel_users": 25,
        "joined_at": timestamp_now(),
        "large": false,
        "lazy": true,
        "unavailable": false,
        "member_count": config.member_count(),
        "voice_states": [],
        "members": [],
        "channels": channels,
        "threads": [],
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    });
    // Two literals: one would exceed json!'s macro recursion limit.
    if let (Some(guild), Value::Object(rest)) = (object.as_object_mut(), rest) {
        guild.extend(rest);
    }
    object
}

/// A guild member stub for MESSAGE_CREATE's `member`.
pub(crate) fn member() -> Value {
    json!({
        "roles": [],
        "nick": null,
        "avatar": null,
        "joined_at": timestamp_now(),
        "premium_since": null,
        "deaf": false,
        "mute": false,
        "flags": 0,
        "pending": false,
    })
}

/// Where a message is posted.
pub(crate) struct MessagePlace {
    pub channel_id: u64,
    pub guild_id: Option<u64>,
}

/// A full message object.
pub(crate) fn message(
    id: u64,
    place: &MessagePlace,
    author: Value,
    content: &str,
    attachments: Vec<Value>,
    flags: u64,
) -> Value {
    let mut message = json!({
        "id": id.to_string(),
        "channel_id": place.channel_id.to_string(),
        "author": author,
        "content": content,
        "timestamp": timestamp_now(),
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": attachments,
        "embeds": [],
        "reactions": [],
        "pinned": false,
        "type": 0,
        "flags": flags,
        "components": [],
    });
    match place.guild_id {
        Some(guild_id) => {
            message["guild_id"] = json!(guild_id.to_string());
            message["member"] = member();
            message["channel_type"] = json!(0);
        }
        None => message["channel_type"] = json!(1),
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn iso8601_known_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000000+00:00");
        // 2024-02-29T12:34:56.789Z, a leap day.
        assert_eq!(
            iso8601(1_709_210_096_789),
            "2024-02-29T12:34:56.789000+00:00"
        );
    }

    #[test]
    fn ids_increase_and_look_like_snowflakes() {
        let mut ids = IdGen::default();
        let a = ids.next();
        let b = ids.next();
        assert!(b > a);
        // The timestamp part decodes to roughly now.
        let ms = (a >> 22) + DISCORD_EPOCH_MS;
        assert!(unix_ms().abs_diff(ms) < 60_000);
    }
}
