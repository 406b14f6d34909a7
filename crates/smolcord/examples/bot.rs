//! A small bot written only against smolcord's library: the place to start
//! if you want smolcord as your gateway client.
//!
//! It runs a set of shards on one thread, answers `!ping` with `pong` over
//! REST wherever it sees it (DMs arrive on shard 0; guild messages on their
//! guild's shard), sets its presence with a typed gateway command, and on
//! SIGINT/SIGTERM exits 0 after closing every shard. With
//! `SMOLCORD_BOT_STATE=FILE` it closes them resumably (4000) and saves each
//! shard's session there, and the next start resumes those sessions
//! instead of identifying afresh, so nothing sent meanwhile is missed
//! (within Discord's few minutes). Without it there is nothing to resume
//! from, so it closes with 1000: Discord ends the sessions and shows the
//! bot offline at once, instead of minutes later.
//!
//! Intents: DIRECT_MESSAGES and GUILD_MESSAGES for the events. Without
//! MESSAGE_CONTENT (privileged) a guild message's `content` is empty unless
//! it mentions the bot, so in guilds only `@bot !ping`… would be seen;
//! DMs carry their content either way. `SMOLCORD_BOT_MESSAGE_CONTENT=1`
//! asks for MESSAGE_CONTENT too, for a plain `!ping` in guilds: enable
//! "Message Content Intent" on the Developer Portal's Bot page first
//! (Discord closes with 4014 for a privileged intent that is not enabled).
//!
//! ```text
//! DISCORD_TOKEN=... cargo run --release --example bot
//! # against the simulator: `smolcord sim` prints its URLs and the token
//! # it accepts (a Discord-shaped one; any other is answered 401), then
//! DISCORD_TOKEN=<that token> SMOLCORD_GATEWAY_URL=ws://127.0.0.1:PORT \
//!   SMOLCORD_API_BASE=http://127.0.0.1:PORT/api/v10 SMOLCORD_SHARDS=0-1/2 \
//!   cargo run --example bot
//! ```
//!
//! `SMOLCORD_SHARDS` is `auto` (default: the count Discord recommends, all
//! in this process) or `FIRST-LAST/COUNT`; `SMOLCORD_IDENTIFY_QUEUE_URL`
//! shares fresh identifies with other processes through a
//! twilight-rs/gateway-queue compatible service. `SMOLCORD_IDENTIFY_WINDOW_MS`
//! (Discord's 5000 unless set) is for simulators with a shorter identify
//! window.

use async_signal::{Signal, Signals};
use futures_lite::{future, StreamExt};
use smolcord::offload::{self, Fallback};
use smolcord::protocol::{
    Activity, CloseCode, Command, Intents, Message, PresenceUpdate, RawCommand, Snowflake,
};
use smolcord::rest::{MessageDraft, RestClient};
use smolcord::shard::{
    RemoteIdentifyQueue, SessionState, ShardConfig, ShardEvent, ShardRange, ShardSet,
    ShardSetHandle,
};
use smolcord::token::Token;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// What the bot keeps between runs: each shard's session to resume.
type SavedSessions = BTreeMap<u32, SessionState>;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    // smolcord's runtime: this one thread runs the tasks and sleeps in
    // epoll for their sockets and timers, so an idle bot wakes twice per
    // heartbeat. `smol::block_on` works as well, at several times the idle
    // wake-ups (async-io's reactor thread wakes the executor's).
    match smolcord::rt::block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bot: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let token = env("DISCORD_TOKEN")
        .and_then(|t| Token::new(&t))
        .ok_or("set DISCORD_TOKEN")?;
    let api_base = env("SMOLCORD_API_BASE").unwrap_or("https://discord.com/api/v10".into());
    let range = ShardRange::parse(&env("SMOLCORD_SHARDS").unwrap_or("auto".into()))
        .map_err(|e| format!("SMOLCORD_SHARDS: {e}"))?;
    let rest = RestClient::new(&api_base, token.clone());

    // GET /gateway/bot: the gateway URL, the recommended shard count and
    // the identify budget (max_concurrency, remaining).
    let bot = rest.gateway_bot().await.map_err(|e| e.to_string())?;
    let (ids, count) = range.resolve(bot.shards).map_err(|e| e.to_string())?;

    let mut intents = Intents::DIRECT_MESSAGES | Intents::GUILD_MESSAGES;
    if env("SMOLCORD_BOT_MESSAGE_CONTENT").is_some() {
        intents |= Intents::MESSAGE_CONTENT;
    }
    let mut config = ShardConfig::new(token, intents);
    config.gateway_url = Some(env("SMOLCORD_GATEWAY_URL").unwrap_or(bot.url));
    config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));
    if let Some(ms) = env("SMOLCORD_IDENTIFY_WINDOW_MS") {
        let ms = ms
            .parse()
            .map_err(|_| "SMOLCORD_IDENTIFY_WINDOW_MS: not a number")?;
        config.identify_window = Duration::from_millis(ms);
    }
    if let Some(url) = env("SMOLCORD_IDENTIFY_QUEUE_URL") {
        let queue = RemoteIdentifyQueue::new(url).with_window(config.identify_window);
        config.identify_queue = Some(Arc::new(queue));
    }

    // Sessions saved by the last run: a shard resumes its own (a session
    // of another shard count is refused by Discord, so only the same count).
    let state_file = env("SMOLCORD_BOT_STATE").map(PathBuf::from);
    let saved: SavedSessions = match &state_file {
        Some(file) => offload::read_json(file, Fallback::None)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default(),
        None => SavedSessions::new(),
    };
    log::info!("running shards {ids:?} of {count}");
    let (set, handle) = ShardSet::new(config, ids, count, |id| {
        saved.get(&id).cloned().unwrap_or_default()
    })
    .map_err(|e| e.to_string())?;
    let ex = smol::LocalExecutor::new();
    ex.run(async {
        let shards = ex.spawn(set.run());
        future::or(answer(&handle, &rest), stop_signal()).await?;
        let Some(file) = &state_file else {
            log::info!("stopping: ending every session (close 1000; nothing saved to resume)");
            handle.close(CloseCode::NORMAL);
            return shards.await.map_err(|e| e.to_string());
        };
        // 4000 keeps the sessions for the next start.
        log::info!("stopping: closing every shard resumably");
        handle.shutdown();
        let stopped = shards.await.map_err(|e| e.to_string());
        // The seq of the last event this loop took, per shard: everything
        // after it is replayed on resume.
        let sessions: SavedSessions = handle
            .statuses()
            .into_iter()
            .map(|status| (status.shard[0], status.resume_state()))
            .collect();
        offload::write_json_atomic(file, &sessions)
            .await
            .map_err(|e| e.to_string())?;
        log::info!("sessions saved to {}", file.display());
        stopped
    })
    .await
}

/// Answers `!ping` until the shards stop. One reply at a time keeps the bot
/// bounded (a busy bot would spawn replies with a limit).
async fn answer(handle: &ShardSetHandle, rest: &RestClient) -> Result<(), String> {
    loop {
        let (shard, event) = handle.next_event().await.map_err(|e| e.to_string())?;
        let ShardEvent::Dispatch(dispatch) = event else {
            continue;
        };
        match dispatch.name.as_str() {
            "READY" | "RESUMED" => {
                log::info!("shard {shard}: {}", dispatch.name);
                // A typed gateway command: the presence, sent through the
                // shard's 120-per-60 s limiter.
                let presence = PresenceUpdate {
                    activities: vec![Activity {
                        name: "!ping".into(),
                        kind: 2, // listening
                        ..Default::default()
                    }],
                    ..PresenceUpdate::online()
                };
                if let Some(shard) = handle.shard(shard) {
                    let _ = shard.send(Command::PresenceUpdate(presence)).await;
                }
            }
            "MESSAGE_CREATE" => {
                let Ok(message) = dispatch.data::<Message>() else {
                    continue;
                };
                if message.author.bot != Some(true) && message.content.trim() == "!ping" {
                    let channel = message.channel_id;
                    let pong = MessageDraft::text("pong").reply_to(message.id);
                    if let Err(err) = rest.create_message(channel, &pong).await {
                        log::warn!("cannot answer in {channel}: {err}");
                    }
                    if let Some(guild) = message.guild_id {
                        ask_channel_info(handle, shard, guild).await;
                    }
                }
            }
            "CHANNEL_INFO" => log::info!("shard {shard}: channel info {}", dispatch.raw_data()),
            _ => {}
        }
    }
}

/// The raw escape hatch, for an opcode the typed model does not cover:
/// op 43 Request Channel Info (answered with a CHANNEL_INFO dispatch).
async fn ask_channel_info(handle: &ShardSetHandle, shard: u32, guild: Snowflake) {
    let payload =
        serde_json::json!({ "guild_id": guild, "fields": ["status", "voice_start_time"] });
    let Ok(raw) = RawCommand::new(43, payload) else {
        return;
    };
    if let Some(shard) = handle.shard(shard) {
        if let Err(err) = shard.send(Command::Raw(raw)).await {
            log::warn!("cannot ask for channel info: {err}");
        }
    }
}

/// Resolves at the first SIGINT or SIGTERM.
async fn stop_signal() -> Result<(), String> {
    let mut signals =
        Signals::new([Signal::Int, Signal::Term]).map_err(|e| format!("signals: {e}"))?;
    signals.next().await;
    Ok(())
}
