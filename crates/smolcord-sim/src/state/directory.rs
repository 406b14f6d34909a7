//! What the simulator knows of the world the bot lives in: guilds, their
//! channels and the DM channels, every channel's history, the files it
//! serves, and the bot's View Channel and Send Messages per channel. Kept
//! together because a channel's rules (it exists, it is a DM or a thread,
//! the bot may see it, may post there) are read together on every post.

use super::history::History;
use crate::model::config::SimGuild;
use crate::model::objects::IdGen;
use std::collections::HashMap;
use std::sync::Arc;

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
    /// Guild channels the bot cannot see (no View Channel): every route
    /// on them (read, post, typing, the channel itself) is 403 50001
    /// Missing Access (one entry per known channel at most).
    pub(crate) view_denied: std::collections::HashSet<u64>,
    /// Guild channels where the bot lacks Read Message History: reading
    /// their history answers 200 with no messages, as Discord does; every
    /// other route is as usual (one entry per known channel at most).
    pub(crate) history_denied: std::collections::HashSet<u64>,
    /// Threads started from a message: thread (= message) id → its channel.
    pub(crate) thread_parent: HashMap<u64, u64>,
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
