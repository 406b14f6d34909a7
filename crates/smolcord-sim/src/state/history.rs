//! Channel history as Discord keeps it: every message posted in a channel
//! (users' and the bot's), in id order, so `GET /channels/{id}/messages`
//! can page through it like Discord's route does.
//!
//! Query (Discord's "Get Channel Messages"): at most one of `around`,
//! `before`, `after` (a message id; any snowflake works, as on Discord,
//! where a client may make one from a timestamp), and `limit` 1–100
//! (default 50). The answer is newest first in every case; `after=X` gives
//! the `limit` messages right after X (the oldest ones after it), `before=X`
//! the `limit` right before it, `around=X` `limit` messages centred on X
//! (X included when it exists). Discord documents the three as mutually
//! exclusive; given several, the simulator takes the first of `around`,
//! `before`, `after`. A bad `limit` or id is answered 400 50035 with
//! Discord's field error.
//!
//! Guild messages are read as the app sees them: without MESSAGE_CONTENT
//! enabled for the application, their content is withheld as on the
//! gateway (`content.rs`), unless the bot wrote them or is mentioned.
//!
//! Bounded: [`HISTORY_PER_CHANNEL`] messages per channel and
//! [`HISTORY_TOTAL`] in all (oldest dropped first), so a flood or a
//! week-long soak cannot grow the simulator without end.

use crate::wire::http::{Request, Response};
use serde::Serialize;
use serde_json::{json, Value};
use smolcord::protocol::Snowflake;
use std::collections::{HashMap, VecDeque};

/// Messages kept per channel (the oldest go first).
pub(crate) const HISTORY_PER_CHANNEL: usize = 10_000;
/// Messages kept in all channels together.
pub(crate) const HISTORY_TOTAL: usize = 200_000;
/// Discord's page size bounds and default.
const LIMIT_MAX: usize = 100;
const LIMIT_DEFAULT: usize = 50;

/// A message the bot posted over REST, with later edits applied.
#[derive(Clone, Debug, Serialize)]
pub struct BotMessage {
    /// Message id.
    pub id: Snowflake,
    /// Channel id.
    pub channel_id: Snowflake,
    /// Current content.
    pub content: String,
    /// How many times it was edited.
    pub edits: u32,
    /// The full message object as last returned.
    pub object: Value,
}

/// One message in a channel's history.
#[derive(Clone, Debug)]
pub(crate) struct StoredMessage {
    pub(crate) id: u64,
    /// Posted by the bot (over REST): only those may be edited by it.
    pub(crate) by_bot: bool,
    /// How many times it was edited.
    pub(crate) edits: u32,
    /// The message object as last returned (edits applied).
    pub(crate) object: Value,
}

impl StoredMessage {
    pub(crate) fn new(id: u64, by_bot: bool, object: Value) -> StoredMessage {
        StoredMessage {
            id,
            by_bot,
            edits: 0,
            object,
        }
    }

    /// The message as a history read returns it: without its `nonce`,
    /// which Discord gives back only in the create answer and the
    /// MESSAGE_CREATE event, never in the history (a client that builds a
    /// ledger on nonces read back must fail here as on Discord); and
    /// without `guild_id` and `member`, the gateway's extra fields of
    /// MESSAGE_CREATE (a client must know a read message's guild from its
    /// channel), in the message a reply answers too.
    pub(crate) fn as_read_back(&self) -> Value {
        let mut object = self.object.clone();
        if let Some(fields) = object.as_object_mut() {
            fields.remove("nonce");
            fields.remove("guild_id");
            fields.remove("member");
            if let Some(answered) = fields
                .get_mut("referenced_message")
                .and_then(Value::as_object_mut)
            {
                answered.remove("guild_id");
                answered.remove("member");
            }
        }
        object
    }

    fn as_bot_message(&self, channel: u64) -> BotMessage {
        BotMessage {
            id: Snowflake::new(self.id),
            channel_id: Snowflake::new(channel),
            content: self.object["content"].as_str().unwrap_or("").to_owned(),
            edits: self.edits,
            object: self.object.clone(),
        }
    }
}

/// Which page of a channel's history is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// The newest messages.
    Latest,
    Before(u64),
    After(u64),
    Around(u64),
}

/// Every channel's history, each oldest first (ids only grow: an id is
/// given and its message stored under the same lock).
#[derive(Default)]
pub(crate) struct History {
    channels: HashMap<u64, VecDeque<StoredMessage>>,
    /// Each channel's newest message id ever posted, dropped from the
    /// history or not: a channel's `last_message_id` (one per channel
    /// with a history, so bounded as `channels` is).
    last: HashMap<u64, u64>,
    total: usize,
    /// The bot id, when the application lacks MESSAGE_CONTENT: reads
    /// withhold guild messages' content from it.
    withheld_from: Option<u64>,
}

impl History {
    /// Reads withhold guild messages' content from bot `bot_id` (its
    /// application has no MESSAGE_CONTENT).
    pub(crate) fn withhold_content_from(&mut self, bot_id: u64) {
        self.withheld_from = Some(bot_id);
    }

    /// A stored message's object as the bot reads it over REST.
    pub(crate) fn as_read(&self, message: &StoredMessage) -> Value {
        // Judged on the stored object: the one read has no `guild_id`.
        let in_guild = crate::model::content::in_guild(&message.object);
        let object = message.as_read_back();
        match self.withheld_from {
            Some(bot) => crate::model::content::withhold(&object, bot, in_guild),
            None => object,
        }
    }

    /// Appends a message to `channel`, dropping the oldest past the bounds.
    pub(crate) fn push(&mut self, channel: u64, message: StoredMessage) {
        let last = self.last.entry(channel).or_default();
        *last = (*last).max(message.id);
        let messages = self.channels.entry(channel).or_default();
        messages.push_back(message);
        self.total += 1;
        if messages.len() > HISTORY_PER_CHANNEL {
            messages.pop_front();
            self.total -= 1;
        }
        while self.total > HISTORY_TOTAL {
            // The channel whose oldest message is the oldest of all.
            let Some(oldest) = self
                .channels
                .iter()
                .filter_map(|(c, m)| m.front().map(|f| (f.id, *c)))
                .min()
                .map(|(_, c)| c)
            else {
                break;
            };
            if let Some(messages) = self.channels.get_mut(&oldest) {
                messages.pop_front();
                self.total -= 1;
            }
        }
    }

    /// The newest message ever posted in `channel`: its
    /// `last_message_id`, as Discord keeps it (it may name a message no
    /// longer stored).
    pub(crate) fn last_id(&self, channel: u64) -> Option<u64> {
        self.last.get(&channel).copied()
    }

    /// The message `id` in `channel`.
    pub(crate) fn get(&self, channel: u64, id: u64) -> Option<&StoredMessage> {
        let messages = self.channels.get(&channel)?;
        let at = messages.partition_point(|m| m.id < id);
        messages.get(at).filter(|m| m.id == id)
    }

    pub(crate) fn get_mut(&mut self, channel: u64, id: u64) -> Option<&mut StoredMessage> {
        let messages = self.channels.get_mut(&channel)?;
        let at = messages.partition_point(|m| m.id < id);
        messages.get_mut(at).filter(|m| m.id == id)
    }

    /// The bot's messages in `channel`, oldest first, edits applied.
    pub(crate) fn bot_messages(&self, channel: u64) -> Vec<BotMessage> {
        self.channels
            .get(&channel)
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m.by_bot)
                    .map(|m| m.as_bot_message(channel))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A page of `channel`, newest first (see the module doc).
    pub(crate) fn page(&self, channel: u64, anchor: Anchor, limit: usize) -> Vec<Value> {
        let Some(messages) = self.channels.get(&channel) else {
            return Vec::new();
        };
        let (start, end) = match anchor {
            Anchor::Latest => (messages.len().saturating_sub(limit), messages.len()),
            Anchor::Before(id) => {
                let end = messages.partition_point(|m| m.id < id);
                (end.saturating_sub(limit), end)
            }
            Anchor::After(id) => {
                let start = messages.partition_point(|m| m.id <= id);
                (start, (start + limit).min(messages.len()))
            }
            Anchor::Around(id) => {
                // Half before the anchor, the rest from it on.
                let at = messages.partition_point(|m| m.id < id);
                let before = limit / 2;
                let start = at.saturating_sub(before);
                let end = (start + limit).min(messages.len());
                (end.saturating_sub(limit).min(start), end)
            }
        };
        messages
            .range(start..end)
            .rev()
            .map(|m| self.as_read(m))
            .collect()
    }
}

fn invalid(field: &str, code: &str, message: String) -> Response {
    Response::json(
        400,
        &json!({
            "message": "Invalid Form Body",
            "code": 50035,
            "errors": {field: {"_errors": [{"code": code, "message": message}]}},
        }),
    )
}

/// Reads `around` / `before` / `after` and `limit`; `Err` is Discord's 400.
pub(crate) fn page_query(request: &Request) -> Result<(Anchor, usize), Response> {
    let limit = match request.query_param("limit") {
        None => LIMIT_DEFAULT,
        Some(text) => {
            let n: i64 = text.parse().map_err(|_| {
                invalid(
                    "limit",
                    "NUMBER_TYPE_COERCE",
                    format!("Value \"{text}\" is not int."),
                )
            })?;
            if n < 1 {
                return Err(invalid(
                    "limit",
                    "NUMBER_TYPE_MIN",
                    "int value should be greater than or equal to 1.".into(),
                ));
            }
            if n > LIMIT_MAX as i64 {
                return Err(invalid(
                    "limit",
                    "NUMBER_TYPE_MAX",
                    format!("int value should be less than or equal to {LIMIT_MAX}."),
                ));
            }
            n as usize
        }
    };
    for (name, make) in [
        ("around", Anchor::Around as fn(u64) -> Anchor),
        ("before", Anchor::Before),
        ("after", Anchor::After),
    ] {
        if let Some(text) = request.query_param(name) {
            let id: u64 = text.parse().map_err(|_| {
                invalid(
                    name,
                    "NUMBER_TYPE_COERCE",
                    format!("Value \"{text}\" is not snowflake."),
                )
            })?;
            return Ok((make(id), limit));
        }
    }
    Ok((Anchor::Latest, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(ids: &[u64]) -> History {
        let mut history = History::default();
        for &id in ids {
            history.push(
                7,
                StoredMessage::new(id, id % 2 == 0, json!({"id": id.to_string()})),
            );
        }
        history
    }

    fn ids(page: Vec<Value>) -> Vec<u64> {
        page.iter()
            .map(|m| m["id"].as_str().unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn pages_are_newest_first_around_their_anchor() {
        let h = history(&[10, 20, 30, 40, 50, 60]);
        assert_eq!(ids(h.page(7, Anchor::Latest, 2)), [60, 50]);
        assert_eq!(ids(h.page(7, Anchor::Latest, 50)), [60, 50, 40, 30, 20, 10]);
        assert_eq!(ids(h.page(7, Anchor::Before(40), 2)), [30, 20]);
        assert_eq!(ids(h.page(7, Anchor::Before(35), 10)), [30, 20, 10]);
        // After: the ones right after the anchor, not the newest.
        assert_eq!(ids(h.page(7, Anchor::After(20), 2)), [40, 30]);
        assert_eq!(ids(h.page(7, Anchor::After(25), 10)), [60, 50, 40, 30]);
        assert_eq!(ids(h.page(7, Anchor::After(60), 10)), Vec::<u64>::new());
        assert_eq!(ids(h.page(7, Anchor::Around(30), 3)), [40, 30, 20]);
        assert_eq!(ids(h.page(7, Anchor::Around(10), 3)), [30, 20, 10]);
        assert_eq!(ids(h.page(7, Anchor::Around(60), 3)), [60, 50, 40]);
        assert_eq!(ids(h.page(8, Anchor::Latest, 3)), Vec::<u64>::new());
        assert_eq!(h.get(7, 30).unwrap().id, 30);
        assert!(h.get(7, 31).is_none());
        assert_eq!(h.bot_messages(7).len(), 6);
    }

    #[test]
    fn history_pages_carry_no_nonce() {
        let mut h = History::default();
        h.push(
            1,
            StoredMessage::new(5, true, json!({"id": "5", "nonce": "r1.0", "content": "x"})),
        );
        let page = h.page(1, Anchor::Latest, 10);
        assert_eq!(page[0]["content"], "x");
        assert!(page[0].get("nonce").is_none(), "{}", page[0]);
    }

    #[test]
    fn history_pages_carry_no_gateway_extra_fields_and_withhold_content_by_guild() {
        let mut h = History::default();
        h.withhold_content_from(9);
        let answered = json!({"id": "4", "guild_id": "3", "member": {}, "content": "a",
            "author": {"id": "6"}, "mentions": []});
        for (id, mentions) in [(5, json!([])), (6, json!([{"id": "9"}]))] {
            h.push(
                1,
                StoredMessage::new(
                    id,
                    false,
                    json!({"id": id.to_string(), "guild_id": "3", "member": {}, "content": "hi",
                        "author": {"id": "5"}, "mentions": mentions,
                        "referenced_message": answered.clone()}),
                ),
            );
        }
        let page = h.page(1, Anchor::Latest, 10);
        for message in &page {
            assert!(message.get("guild_id").is_none(), "{message}");
            assert!(message.get("member").is_none(), "{message}");
            let answered = &message["referenced_message"];
            assert!(answered.get("guild_id").is_none(), "{answered}");
        }
        // Still a guild message: withheld unless it mentions the bot.
        assert_eq!(page[0]["content"], "hi");
        assert_eq!(page[1]["content"], "");
    }

    #[test]
    fn history_is_bounded_per_channel() {
        let mut h = History::default();
        for id in 1..=(HISTORY_PER_CHANNEL as u64 + 5) {
            h.push(
                1,
                StoredMessage::new(id, false, json!({"id": id.to_string()})),
            );
        }
        assert_eq!(h.total, HISTORY_PER_CHANNEL);
        assert!(h.get(1, 5).is_none());
        assert!(h.get(1, 6).is_some());
    }
}
