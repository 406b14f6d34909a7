//! Ready-made dispatches: DMs (text and voice notes), guild messages,
//! GUILD_CREATE and CHANNEL_CREATE/UPDATE/DELETE, kept consistent with the
//! simulator's directory so REST calls about them work.

use crate::model::config::SimGuild;
use crate::model::objects::{self, MessagePlace};
use crate::model::sim_error::SimError;
use crate::state::directory::{ChannelInfo, Directory, StoredFile};
use crate::state::shared::{Shared, State};
use base64::Engine;
use serde_json::{json, Value};
use smolcord::protocol::{Snowflake, MESSAGE_FLAG_IS_VOICE_MESSAGE};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// A voice note sent by [`Simulator::send_voice_dm`](crate::Simulator::send_voice_dm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoiceNote {
    /// The message.
    pub message_id: Snowflake,
    /// The DM channel.
    pub channel_id: Snowflake,
    /// Where the simulator serves the audio bytes.
    pub url: String,
}

/// A file a user attaches to a DM ([`Simulator::send_dm_with_files`](crate::Simulator::send_dm_with_files)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimFile {
    /// Its name, as the user's client gave it.
    pub filename: String,
    /// Its MIME type (Discord's `content_type`).
    pub content_type: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl SimFile {
    /// A file named `filename` of type `content_type`.
    pub fn new(filename: &str, content_type: &str, bytes: impl Into<Vec<u8>>) -> SimFile {
        SimFile {
            filename: filename.to_owned(),
            content_type: content_type.to_owned(),
            bytes: bytes.into(),
        }
    }
}

/// A user's message in a guild channel, for
/// [`Simulator::post_in_channel`](crate::Simulator::post_in_channel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelPost {
    /// The guild channel.
    pub channel_id: Snowflake,
    /// The author.
    pub author_id: u64,
    /// The author's name.
    pub author_name: String,
    /// The text (after the mention, when there is one).
    pub content: String,
    /// Mention the bot (`<@BOT> ` before the text, the bot in `mentions`).
    pub mention_bot: bool,
    /// Reply to this message of the channel.
    pub reply_to: Option<Snowflake>,
    /// A reply pings the author it answers (Discord's default; false is
    /// the client's "@ OFF").
    pub ping_replied: bool,
}

impl ChannelPost {
    /// Plain text, no mention, no reply.
    pub fn new(channel_id: Snowflake, author_id: u64, author_name: &str, content: &str) -> Self {
        ChannelPost {
            channel_id,
            author_id,
            author_name: author_name.to_owned(),
            content: content.to_owned(),
            mention_bot: false,
            reply_to: None,
            ping_replied: true,
        }
    }

    /// The same, mentioning the bot.
    pub fn mentioning(mut self) -> Self {
        self.mention_bot = true;
        self
    }

    /// The same, as a reply to `message`.
    pub fn replying_to(mut self, message: Snowflake) -> Self {
        self.reply_to = Some(message);
        self
    }
}

/// A voice message's waveform: one byte per 100 ms, at most 256.
fn waveform(duration: Duration) -> String {
    let samples = ((duration.as_millis() / 100) as usize).clamp(1, 256);
    let bytes: Vec<u8> = (0..samples).map(|i| (i * 37 % 256) as u8).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A file name as a URL path segment: Discord's CDN URLs carry the name
/// with anything but `[A-Za-z0-9._-]` replaced by `_`.
fn url_name(filename: &str) -> String {
    filename
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A DM being injected: its message id, its channel, its author.
struct Dm<'a> {
    id: u64,
    channel: u64,
    author_id: u64,
    author_name: &'a str,
}

impl Shared {
    /// Dispatches a DM from `author` and returns `(message id, channel id)`.
    pub(crate) fn send_dm(
        &self,
        author_id: u64,
        author_name: &str,
        content: &str,
    ) -> (Snowflake, Snowflake) {
        let mut state = self.lock();
        let state = &mut *state;
        let channel = state.dir.dm_channel(&mut state.ids, author_id, author_name);
        let id = state.ids.next();
        let dm = Dm {
            id,
            channel,
            author_id,
            author_name,
        };
        self.post_dm(state, &dm, content, Vec::new(), 0);
        (Snowflake::new(id), Snowflake::new(channel))
    }

    /// The end of every injected DM: its message object built and posted
    /// (kept in the channel's history, dispatched as MESSAGE_CREATE).
    fn post_dm(
        &self,
        state: &mut State,
        dm: &Dm<'_>,
        content: &str,
        attachments: Vec<Value>,
        flags: u64,
    ) {
        let place = MessagePlace {
            channel_id: dm.channel,
            guild_id: None,
        };
        let author = objects::user(dm.author_id, dm.author_name);
        let d = objects::message(dm.id, &place, author, content, attachments, flags);
        state.post_from_user(&self.config, dm.channel, dm.id, &d);
    }

    /// Dispatches a DM with `files` attached, each served under
    /// `/attachments/` with its `content_type`, its attachment object
    /// carrying `size`, `content_type` and a signed-looking `url` as
    /// Discord's do. Returns `(message id, channel id)`.
    pub(crate) fn send_dm_with_files(
        &self,
        author_id: u64,
        author_name: &str,
        content: &str,
        files: Vec<SimFile>,
    ) -> (Snowflake, Snowflake) {
        let mut state = self.lock();
        let state = &mut *state;
        let channel = state.dir.dm_channel(&mut state.ids, author_id, author_name);
        let id = state.ids.next();
        let mut attachments = Vec::new();
        for file in files {
            let attachment_id = state.ids.next();
            let size = file.bytes.len();
            state.dir.files.insert(
                attachment_id,
                StoredFile {
                    content_type: file.content_type.clone(),
                    bytes: Arc::new(file.bytes),
                },
            );
            let url = format!(
                "{}/attachments/{channel}/{attachment_id}/{}?ex=ffffffff&is=0&hm=sim",
                self.http_base(),
                url_name(&file.filename)
            );
            attachments.push(json!({
                "id": attachment_id.to_string(),
                "filename": file.filename,
                "content_type": file.content_type,
                "size": size,
                "url": url,
                "proxy_url": url,
                "flags": 0,
            }));
        }
        let dm = Dm {
            id,
            channel,
            author_id,
            author_name,
        };
        self.post_dm(state, &dm, content, attachments, 0);
        (Snowflake::new(id), Snowflake::new(channel))
    }

    pub(crate) fn send_voice_dm(
        &self,
        author_id: u64,
        author_name: &str,
        ogg: Vec<u8>,
        duration: Duration,
    ) -> VoiceNote {
        let mut state = self.lock();
        let state = &mut *state;
        let channel = state.dir.dm_channel(&mut state.ids, author_id, author_name);
        let id = state.ids.next();
        let attachment_id = state.ids.next();
        let size = ogg.len();
        state.dir.files.insert(
            attachment_id,
            StoredFile {
                content_type: "audio/ogg".to_owned(),
                bytes: Arc::new(ogg),
            },
        );
        // Discord's CDN URLs are signed and expire (`ex`, `is`, `hm`); the
        // simulator's carry the same parameters and ignores them.
        let url = format!(
            "{}/attachments/{channel}/{attachment_id}/voice-message.ogg?ex=ffffffff&is=0&hm=sim",
            self.http_base()
        );
        let attachment = json!({
            "id": attachment_id.to_string(),
            "filename": "voice-message.ogg",
            "content_type": "audio/ogg",
            "size": size,
            "url": url,
            "proxy_url": url,
            "duration_secs": duration.as_secs_f64(),
            "waveform": waveform(duration),
            "flags": 0,
        });
        let dm = Dm {
            id,
            channel,
            author_id,
            author_name,
        };
        self.post_dm(
            state,
            &dm,
            "",
            vec![attachment],
            MESSAGE_FLAG_IS_VOICE_MESSAGE,
        );
        VoiceNote {
            message_id: Snowflake::new(id),
            channel_id: Snowflake::new(channel),
            url,
        }
    }

    pub(crate) fn send_guild_message(
        &self,
        channel_id: Snowflake,
        author_id: u64,
        author_name: &str,
        content: &str,
    ) -> Result<Snowflake, SimError> {
        self.post_in_channel(&ChannelPost::new(
            channel_id,
            author_id,
            author_name,
            content,
        ))
    }

    /// A user's message in a guild channel, mentioning the bot and
    /// replying as `post` says (see [`ChannelPost`]).
    pub(crate) fn post_in_channel(&self, post: &ChannelPost) -> Result<Snowflake, SimError> {
        let mut state = self.lock();
        let channel_id = post.channel_id.get();
        let guild_id = state
            .dir
            .channels
            .get(&channel_id)
            .and_then(|c| c.guild_id)
            .ok_or(SimError::UnknownChannel(post.channel_id))?;
        let referenced = match post.reply_to {
            Some(answered) => Some(
                state
                    .dir
                    .history
                    .get(channel_id, answered.get())
                    .map(|m| m.object.clone())
                    .ok_or(SimError::UnknownMessage {
                        channel: post.channel_id,
                        message: answered,
                    })?,
            ),
            None => None,
        };
        let id = state.ids.next();
        let place = MessagePlace {
            channel_id,
            guild_id: Some(guild_id),
        };
        let bot = self.config.bot_id;
        // A mention is written into the text as Discord's client does.
        let content = if post.mention_bot {
            format!("<@{bot}> {}", post.content)
        } else {
            post.content.clone()
        };
        let mut d = objects::message(
            id,
            &place,
            objects::user(post.author_id, &post.author_name),
            &content,
            Vec::new(),
            0,
        );
        let mut mentions = Vec::new();
        if post.mention_bot {
            mentions.push(objects::bot_author(&self.config));
        }
        if let Some(mut referenced) = referenced {
            // A reply pings the author of what it answers unless the user
            // turned that off: Discord lists them in `mentions` then.
            let answered_author = referenced["author"].clone();
            let listed = mentions.iter().any(|m| m["id"] == answered_author["id"]);
            if post.ping_replied && !listed {
                mentions.push(answered_author);
            }
            if let Some(object) = referenced.as_object_mut() {
                object.remove("referenced_message");
            }
            d["type"] = json!(19);
            d["message_reference"] = json!({
                "type": 0,
                "message_id": referenced["id"].clone(),
                "channel_id": channel_id.to_string(),
                "guild_id": guild_id.to_string(),
            });
            d["referenced_message"] = referenced;
        }
        d["mentions"] = Value::Array(mentions);
        if state.dir.thread_parent.contains_key(&channel_id) {
            d["channel_type"] = json!(11);
        }
        state.post_from_user(&self.config, channel_id, id, &d);
        Ok(Snowflake::new(id))
    }

    pub(crate) fn add_guild(&self, guild: SimGuild) -> Vec<u64> {
        let d = objects::guild_create(&guild, &self.config);
        let mut state = self.lock();
        state.dir.add_guild(guild);
        state.dispatch(&self.config, "GUILD_CREATE", &d)
    }

    pub(crate) fn create_channel(
        &self,
        guild_id: Snowflake,
        name: &str,
    ) -> Result<Snowflake, SimError> {
        let mut state = self.lock();
        let guild = state
            .dir
            .guilds
            .iter_mut()
            .find(|g| g.id == guild_id)
            .ok_or(SimError::UnknownGuild(guild_id))?;
        let position = guild.channels.len();
        let id = Snowflake::new(state.ids.next());
        if let Some(guild) = state.dir.guilds.iter_mut().find(|g| g.id == guild_id) {
            guild.channels.push(crate::model::config::SimChannel {
                id,
                name: name.to_owned(),
            });
        }
        state.dir.channels.insert(
            id.get(),
            ChannelInfo {
                guild_id: Some(guild_id.get()),
                name: Some(name.to_owned()),
                recipient: None,
            },
        );
        let d = objects::text_channel(id.get(), guild_id.get(), name, position, true);
        state.dispatch(&self.config, "CHANNEL_CREATE", &d);
        Ok(id)
    }

    /// Renames (`Some`) or deletes (`None`) a guild channel.
    pub(crate) fn change_channel(
        &self,
        channel_id: Snowflake,
        rename: Option<&str>,
    ) -> Result<Vec<u64>, String> {
        let mut state = self.lock();
        let info = state
            .dir
            .channels
            .get(&channel_id.get())
            .cloned()
            .filter(|c| c.guild_id.is_some())
            .ok_or_else(|| SimError::UnknownChannel(channel_id).to_string())?;
        let guild_id = info.guild_id.unwrap_or_default();
        let guild = state.dir.guilds.iter_mut().find(|g| g.id.get() == guild_id);
        let position = guild
            .as_ref()
            .and_then(|g| g.channels.iter().position(|c| c.id == channel_id))
            .unwrap_or(0);
        let name = rename.map_or(info.name.clone().unwrap_or_default(), str::to_owned);
        let event = match rename {
            Some(new_name) => {
                if let Some(channel) =
                    guild.and_then(|g| g.channels.iter_mut().find(|c| c.id == channel_id))
                {
                    channel.name = new_name.to_owned();
                }
                if let Some(entry) = state.dir.channels.get_mut(&channel_id.get()) {
                    entry.name = Some(new_name.to_owned());
                }
                "CHANNEL_UPDATE"
            }
            None => {
                if let Some(g) = guild {
                    g.channels.retain(|c| c.id != channel_id);
                }
                state.dir.channels.remove(&channel_id.get());
                "CHANNEL_DELETE"
            }
        };
        let d: Value = objects::text_channel(channel_id.get(), guild_id, &name, position, true);
        Ok(state.dispatch(&self.config, event, &d))
    }

    /// Grants or takes away the bot's Send Messages in a guild channel.
    pub(crate) fn set_send_permission(
        &self,
        channel_id: Snowflake,
        allowed: bool,
    ) -> Result<(), SimError> {
        self.set_denied(channel_id, allowed, |dir| &mut dir.send_denied)
    }

    /// Grants or takes away the bot's View Channel in a guild channel.
    pub(crate) fn set_view_permission(
        &self,
        channel_id: Snowflake,
        allowed: bool,
    ) -> Result<(), SimError> {
        self.set_denied(channel_id, allowed, |dir| &mut dir.view_denied)
    }

    /// Grants or takes away the bot's Read Message History in a guild
    /// channel.
    pub(crate) fn set_history_permission(
        &self,
        channel_id: Snowflake,
        allowed: bool,
    ) -> Result<(), SimError> {
        self.set_denied(channel_id, allowed, |dir| &mut dir.history_denied)
    }

    /// Takes guild channel `channel_id` out of the set of channels where
    /// the bot lacks a permission (`denied` picks which), or puts it in.
    fn set_denied(
        &self,
        channel_id: Snowflake,
        allowed: bool,
        denied: fn(&mut Directory) -> &mut HashSet<u64>,
    ) -> Result<(), SimError> {
        let mut state = self.lock();
        let known = state
            .dir
            .channels
            .get(&channel_id.get())
            .is_some_and(|c| c.guild_id.is_some());
        if !known {
            return Err(SimError::UnknownChannel(channel_id));
        }
        let denied = denied(&mut state.dir);
        if allowed {
            denied.remove(&channel_id.get());
        } else {
            denied.insert(channel_id.get());
        }
        Ok(())
    }

    pub(crate) fn dm_channel_of(&self, user_id: u64) -> Snowflake {
        let mut state = self.lock();
        let state = &mut *state;
        Snowflake::new(state.dir.dm_channel(&mut state.ids, user_id, "user"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waveform_is_bounded() {
        let decode = |d| {
            base64::engine::general_purpose::STANDARD
                .decode(waveform(d))
                .unwrap()
                .len()
        };
        assert_eq!(decode(Duration::from_millis(2500)), 25);
        assert_eq!(decode(Duration::from_secs(600)), 256);
        assert_eq!(decode(Duration::ZERO), 1);
    }
}
