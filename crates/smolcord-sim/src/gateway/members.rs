//! op 8 Request Guild Members, answered as Discord answers it: with
//! GUILD_MEMBERS_CHUNK dispatches to the asking session, at most 1000
//! members each, `chunk_index` / `chunk_count`, the request's `nonce`
//! echoed (a nonce over 32 bytes is ignored, as the docs say), `not_found`
//! for `user_ids` that are not members, `presences` only when asked for and
//! the session has GUILD_PRESENCES; and with a RATE_LIMITED dispatch
//! (`{opcode: 8, retry_after, meta: {guild_id, nonce}}`) instead of chunks
//! for a repeat of an all-members request (`query: ""`, `limit: 0`) for the
//! same guild within [`SimConfig::all_members_window`] (Discord: 30 s per
//! guild per bot since 2025-08-14; PROTOCOL.md §1.2).
//!
//! A guild's members are the bot, its owner (`bot_id + 1`, "owner") and
//! [`SimConfig::guild_members`] more (`member-00001`, ... with ids from
//! 1200000000000000001), so a test can make a guild as large as it needs.
//! Authors of injected guild messages are not members.
//!
//! [`SimConfig::all_members_window`]: crate::SimConfig::all_members_window
//! [`SimConfig::guild_members`]: crate::SimConfig::guild_members

use crate::model::config::{SimConfig, MAX_GUILD_MEMBERS};
use crate::model::objects;
use crate::model::payload_checks::snowflake;
use crate::state::shared::Shared;
use serde_json::{json, Map, Value};
use smolcord::protocol::{shard_for_guild, CloseCode, Frame, Intents, Snowflake};
use std::time::Instant;

use crate::model::payload_checks::Refusal;

/// Members per GUILD_MEMBERS_CHUNK.
pub(crate) const CHUNK_SIZE: usize = 1000;
/// `user_ids` one request may name.
const MAX_USER_IDS: usize = 100;
/// Members a prefix (`query`) request returns at most.
const MAX_QUERY_RESULTS: usize = 100;
/// A longer nonce is ignored (not echoed).
const MAX_NONCE_BYTES: usize = 32;
/// The first synthetic member's id.
const FIRST_MEMBER_ID: u64 = 1_200_000_000_000_000_001;

/// A request as understood.
#[derive(Debug, PartialEq)]
struct MemberRequest {
    guild_id: u64,
    query: Option<String>,
    limit: u64,
    presences: bool,
    user_ids: Option<Vec<u64>>,
    nonce: Option<String>,
}

impl MemberRequest {
    fn all_members(&self) -> bool {
        self.query.as_deref() == Some("") && self.limit == 0
    }
}

fn bad(message: impl Into<String>) -> Refusal {
    (
        CloseCode::UNKNOWN_OPCODE,
        format!("invalid Request Guild Members: {}", message.into()),
    )
}

fn parse(d: &Value) -> Result<MemberRequest, Refusal> {
    let d: &Map<String, Value> = d.as_object().ok_or_else(|| bad("`d` must be an object"))?;
    let guild_id = match d.get("guild_id") {
        Some(Value::Array(_)) => return Err(bad("one `guild_id` per request")),
        Some(value) => snowflake(value).ok_or_else(|| bad("`guild_id` must be a snowflake"))?,
        None => return Err(bad("`guild_id` is required")),
    };
    let query = match d.get("query") {
        None | Some(Value::Null) => None,
        Some(Value::String(q)) => Some(q.clone()),
        Some(_) => return Err(bad("`query` must be a string")),
    };
    let user_ids = match d.get("user_ids") {
        None | Some(Value::Null) => None,
        Some(Value::Array(ids)) => Some(
            ids.iter()
                .map(snowflake)
                .collect::<Option<Vec<u64>>>()
                .ok_or_else(|| bad("`user_ids` must be snowflakes"))?,
        ),
        Some(one) => Some(vec![
            snowflake(one).ok_or_else(|| bad("`user_ids` must be snowflakes"))?
        ]),
    };
    match (&query, &user_ids) {
        (None, None) => return Err(bad("one of `query` or `user_ids` is required")),
        (Some(_), Some(_)) => return Err(bad("`query` and `user_ids` exclude each other")),
        (_, Some(ids)) if ids.len() > MAX_USER_IDS => {
            return Err(bad(format!("at most {MAX_USER_IDS} `user_ids`")))
        }
        _ => {}
    }
    let limit = match d.get("limit") {
        None | Some(Value::Null) if query.is_some() => {
            return Err(bad("`limit` is required with `query`"))
        }
        None | Some(Value::Null) => 0,
        Some(value) => value
            .as_u64()
            .ok_or_else(|| bad("`limit` must be a non-negative integer"))?,
    };
    let presences = match d.get("presences") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(p)) => *p,
        Some(_) => return Err(bad("`presences` must be true or false")),
    };
    let nonce = match d.get("nonce") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) if n.len() <= MAX_NONCE_BYTES => Some(n.clone()),
        Some(Value::String(_)) => None,
        Some(_) => return Err(bad("`nonce` must be a string")),
    };
    Ok(MemberRequest {
        guild_id,
        query,
        limit,
        presences,
        user_ids,
        nonce,
    })
}

/// One member of a guild.
struct Member {
    id: u64,
    name: String,
    bot: bool,
}

/// Every member of a guild, in id order but the bot first.
fn roster(config: &SimConfig) -> impl Iterator<Item = Member> + '_ {
    let bot = Member {
        id: config.bot_id.get(),
        name: config.bot_name.clone(),
        bot: true,
    };
    let owner = Member {
        id: config.bot_id.get() + 1,
        name: "owner".to_owned(),
        bot: false,
    };
    let synthetic = (0..u64::from(config.guild_members.min(MAX_GUILD_MEMBERS))).map(|n| Member {
        id: FIRST_MEMBER_ID + n,
        name: format!("member-{:05}", n + 1),
        bot: false,
    });
    [bot, owner].into_iter().chain(synthetic)
}

fn member_object(member: &Member, config: &SimConfig) -> Value {
    let mut object = objects::member();
    object["user"] = if member.bot {
        objects::bot_author(config)
    } else {
        objects::user(member.id, &member.name)
    };
    object
}

fn presence_object(member: &Member, guild_id: u64) -> Value {
    json!({
        "user": {"id": member.id.to_string()},
        "guild_id": guild_id.to_string(),
        "status": "online",
        "activities": [],
        "client_status": {"desktop": "online"},
    })
}

/// The chunks answering `request` (at least one, even when nothing
/// matched).
fn chunks(request: &MemberRequest, config: &SimConfig, with_presences: bool) -> Vec<Value> {
    let mut not_found = Vec::new();
    let matched: Vec<Member> = match (&request.user_ids, &request.query) {
        (Some(ids), _) => {
            let mut found = Vec::new();
            for id in ids {
                match roster(config).find(|m| m.id == *id) {
                    Some(member) if !found.iter().any(|m: &Member| m.id == member.id) => {
                        found.push(member)
                    }
                    Some(_) => {}
                    None => not_found.push(json!(id.to_string())),
                }
            }
            found
        }
        (None, query) => {
            let prefix = query.as_deref().unwrap_or("").to_lowercase();
            let cap = match (prefix.is_empty(), request.limit) {
                (true, 0) => usize::MAX,
                (true, n) => usize::try_from(n).unwrap_or(usize::MAX),
                (false, 0) => MAX_QUERY_RESULTS,
                (false, n) => usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(MAX_QUERY_RESULTS),
            };
            roster(config)
                .filter(|m| m.name.to_lowercase().starts_with(&prefix))
                .take(cap)
                .collect()
        }
    };
    let count = matched.len().div_ceil(CHUNK_SIZE).max(1);
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        let part = matched
            .get(index * CHUNK_SIZE..matched.len().min((index + 1) * CHUNK_SIZE))
            .unwrap_or(&[]);
        let mut chunk = json!({
            "guild_id": request.guild_id.to_string(),
            "members": part.iter().map(|m| member_object(m, config)).collect::<Vec<_>>(),
            "chunk_index": index,
            "chunk_count": count,
        });
        if index == 0 && request.user_ids.is_some() && !not_found.is_empty() {
            chunk["not_found"] = Value::Array(not_found.clone());
        }
        if with_presences {
            chunk["presences"] = part
                .iter()
                .map(|m| presence_object(m, request.guild_id))
                .collect();
        }
        if let Some(nonce) = &request.nonce {
            chunk["nonce"] = json!(nonce);
        }
        out.push(chunk);
    }
    out
}

/// Handles op 8 from the connection serving `session`.
pub(crate) fn handle(shared: &Shared, session: Option<&str>, frame: &Frame) -> Result<(), Refusal> {
    let d: Value = frame.data().map_err(|err| bad(err.to_string()))?;
    let request = parse(&d)?;
    let Some(session_id) = session.map(str::to_owned) else {
        return Ok(()); // not identified: refused with 4003 before here
    };
    let config = &shared.config;
    let mut state = shared.lock();
    let Some(session) = state.sessions.get_mut(&session_id) else {
        return Ok(());
    };
    let (intents, [shard_id, shard_count]) = (session.intents, session.shard);
    let known = state
        .dir
        .guilds
        .iter()
        .any(|g| g.id.get() == request.guild_id);
    if !known || shard_for_guild(Snowflake::new(request.guild_id), shard_count) != shard_id {
        log::warn!(
            "sim: Request Guild Members for guild {} that session {session_id} does not serve: ignored",
            request.guild_id
        );
        return Ok(());
    }
    if request.query.as_deref() == Some("") && !intents.contains(Intents::GUILD_MEMBERS) {
        return Err(bad(
            "the whole member list (`query: \"\"`) needs the GUILD_MEMBERS intent",
        ));
    }
    let now = Instant::now();
    if request.all_members() {
        let window = config.all_members_window;
        if let Err(wait) = state.limits.ask_all_members(request.guild_id, now, window) {
            let mut meta = json!({"guild_id": request.guild_id.to_string()});
            if let Some(nonce) = &request.nonce {
                meta["nonce"] = json!(nonce);
            }
            let d = json!({"opcode": 8, "retry_after": wait.as_secs_f64(), "meta": meta});
            log::info!(
                "sim: all members of guild {} asked again within {window:?}: RATE_LIMITED",
                request.guild_id
            );
            state.push_to_session(&session_id, "RATE_LIMITED", &d);
            return Ok(());
        }
    }
    let with_presences = request.presences && intents.contains(Intents::GUILD_PRESENCES);
    for chunk in chunks(&request, config, with_presences) {
        state.push_to_session(&session_id, "GUILD_MEMBERS_CHUNK", &chunk);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(d: Value) -> Result<MemberRequest, String> {
        parse(&d).map_err(|(code, reason)| {
            assert_eq!(code, CloseCode::UNKNOWN_OPCODE);
            reason
        })
    }

    #[test]
    fn requests_are_read_as_the_docs_describe_them() {
        let all = request(json!({"guild_id": "5", "query": "", "limit": 0})).unwrap();
        assert!(all.all_members());
        let one = request(json!({"guild_id": 5, "user_ids": "7", "nonce": "n"})).unwrap();
        assert_eq!(one.user_ids, Some(vec![7]));
        assert_eq!(one.nonce.as_deref(), Some("n"));
        let long_nonce = "x".repeat(33);
        let ignored = request(json!({"guild_id": "5", "user_ids": ["7"], "nonce": long_nonce}));
        assert_eq!(ignored.unwrap().nonce, None);
        for (d, why) in [
            (json!("garbage"), "must be an object"),
            (json!([1, 2]), "must be an object"),
            (json!({"query": ""}), "`guild_id` is required"),
            (json!({"guild_id": "5"}), "one of `query` or `user_ids`"),
            (
                json!({"guild_id": "5", "query": "a"}),
                "`limit` is required",
            ),
            (
                json!({"guild_id": "5", "query": "", "limit": 0, "user_ids": []}),
                "exclude",
            ),
            (
                json!({"guild_id": ["5"], "query": "", "limit": 0}),
                "one `guild_id`",
            ),
            (
                json!({"guild_id": "5", "user_ids": (0..101).map(|n| n.to_string()).collect::<Vec<_>>()}),
                "at most 100",
            ),
            (
                json!({"guild_id": "5", "query": "", "limit": -1}),
                "`limit`",
            ),
        ] {
            let reason = request(d.clone()).unwrap_err();
            assert!(reason.contains(why), "{d}: {reason}");
        }
    }

    #[test]
    fn chunks_hold_at_most_a_thousand() {
        let config = SimConfig {
            guild_members: 2300,
            ..SimConfig::default()
        };
        let all = request(json!({"guild_id": "5", "query": "", "limit": 0, "nonce": "n"})).unwrap();
        let whole = chunks(&all, &config, false);
        let sizes: Vec<usize> = whole
            .iter()
            .map(|c| c["members"].as_array().unwrap().len())
            .collect();
        assert_eq!(sizes, [1000, 1000, 302]);
        assert!(whole
            .iter()
            .all(|c| c["chunk_count"] == 3 && c["nonce"] == "n"));
        assert!(whole.iter().all(|c| c.get("presences").is_none()));
        let query = request(json!({"guild_id": "5", "query": "MEMBER-0", "limit": 500})).unwrap();
        assert_eq!(
            chunks(&query, &config, true)[0]["members"]
                .as_array()
                .unwrap()
                .len(),
            100
        );
        let none = request(json!({"guild_id": "5", "query": "zzz", "limit": 1})).unwrap();
        let none = chunks(&none, &config, false);
        assert_eq!(none.len(), 1);
        assert_eq!(none[0]["members"], json!([]));
    }
}
