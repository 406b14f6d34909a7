//! A small bot written only against smolcord's library: the place to start
//! if you want smolcord as your gateway client.
//!
//! It runs a set of shards on one thread, answers `!ping` with `pong` over
//! REST wherever it sees it (DMs arrive on shard 0; guild messages on their
//! guild's shard), and on SIGINT/SIGTERM closes every shard resumably and
//! exits 0.
//!
//! ```text
//! DISCORD_TOKEN=... cargo run --release --example bot
//! # against the simulator: `smolcord sim` prints its URLs, then
//! DISCORD_TOKEN=sim-token SMOLCORD_GATEWAY_URL=ws://127.0.0.1:PORT \
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
use smolcord::protocol::{Intents, Message};
use smolcord::rest::RestClient;
use smolcord::shard::{
    RemoteIdentifyQueue, ShardConfig, ShardEvent, ShardRange, ShardSet, ShardSetHandle,
};
use smolcord::token::Token;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

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
    let range = ShardRange::parse(&env("SMOLCORD_SHARDS").unwrap_or("auto".into()))?;
    let rest = RestClient::new(&api_base, token.clone());

    // GET /gateway/bot: the gateway URL, the recommended shard count and
    // the identify budget (max_concurrency, remaining).
    let bot = rest.gateway_bot().await.map_err(|e| e.to_string())?;
    let (ids, count) = range.resolve(bot.shards)?;

    let intents = Intents::DIRECT_MESSAGES.union(Intents::GUILD_MESSAGES);
    let mut config = ShardConfig::new(token, intents);
    config.gateway_url = Some(env("SMOLCORD_GATEWAY_URL").unwrap_or(bot.url));
    config.gateway_info = Some(rest.gateway_info_source());
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

    log::info!("running shards {ids:?} of {count}");
    let (set, handle) = ShardSet::new(config, ids, count, |_| Default::default())?;
    let ex = smol::LocalExecutor::new();
    ex.run(async {
        let shards = ex.spawn(set.run());
        future::or(answer(&handle, &rest), stop_signal()).await?;
        log::info!("stopping: closing every shard");
        handle.shutdown();
        shards.await.map_err(|e| e.to_string())
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
            "READY" => log::info!("shard {shard} ready"),
            "MESSAGE_CREATE" => {
                let Ok(message) = dispatch.data::<Message>() else {
                    continue;
                };
                if message.author.bot != Some(true) && message.content.trim() == "!ping" {
                    let channel = message.channel_id.to_string();
                    if let Err(err) = rest.create_message(&channel, "pong").await {
                        log::warn!("cannot answer in {channel}: {err}");
                    }
                }
            }
            _ => {}
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
