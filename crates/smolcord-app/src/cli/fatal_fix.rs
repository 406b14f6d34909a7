//! Where the operator fixes a fatal gateway close: the protocol says what
//! is wrong ([`CloseCode::advice`]), this names the setting of smolcord's
//! own (config key, environment variable) that carries it.

use smolcord::protocol::CloseCode;

/// The setting to change after `code`, or `None` for a code that is not
/// fatal. `channel_content`: a channel in `channels` needs no mention, so
/// the bridge asked for MESSAGE_CONTENT itself: a 4014 then names that.
pub fn setting_for(code: u16, channel_content: bool) -> Option<&'static str> {
    Some(match code {
        4014 if channel_content => "a channel in `channels` has `\"mention\": false` or `\"thread\": true`, which need the MESSAGE_CONTENT intent: enable \"Message Content Intent\" on the Developer Portal's Bot page, or set `\"mention\": true` and `\"thread\": false`",
        4004 => "check DISCORD_TOKEN (or token_file)",
        4010 => "check `shard` / `shards` (or SMOLCORD_SHARDS) in the config",
        4011 => "raise the shard count in `shards` (or SMOLCORD_SHARDS), or use `\"auto\"`",
        4012 => "upgrade smolcord",
        4013 | 4014 => "check `intents` in the config",
        _ => return None,
    })
    .filter(|_| CloseCode(code).advice().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fatal_code_names_a_setting() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            assert!(setting_for(code, false).is_some(), "{code}");
        }
        assert_eq!(setting_for(4000, false), None);
        assert!(setting_for(4014, true)
            .unwrap()
            .contains("\"mention\": false"));
        assert!(!setting_for(4013, true).unwrap().contains("mention"));
    }
}
