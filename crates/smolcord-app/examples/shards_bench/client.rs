//! `shards_bench --client FIRST-LAST/COUNT --identify-window-ms N`: a set of
//! shards on one thread, configured as the reference bot (`crates/smolcord/examples/bot.rs`)
//! configures it — intents, `GET /gateway/bot` for `max_concurrency`, one
//! local identify queue — except that the identify window can be shortened
//! to match a simulator's, and that it neither answers messages nor waits
//! for signals: the bare shard set. Every event is taken and dropped. It
//! runs until the benchmark ends it.
//!
//! Environment: `DISCORD_TOKEN`, `SMOLCORD_GATEWAY_URL`, `SMOLCORD_API_BASE`.

use smolcord::protocol::Intents;
use smolcord::rest::RestClient;
use smolcord::shard::{ShardConfig, ShardRange, ShardSet};
use smolcord::token::Token;
use std::time::Duration;

/// Runs shards `range` until they stop (the parent ends this process).
pub fn run(range: &str, identify_window: Duration) -> Result<(), String> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("set {name}"));
    let token = Token::new(&env("DISCORD_TOKEN")?).ok_or("DISCORD_TOKEN is blank")?;
    let rest = RestClient::new(&env("SMOLCORD_API_BASE")?, token.clone());
    let (ids, count) = ShardRange::parse(range)
        .and_then(|range| range.resolve(1))
        .map_err(|e| e.to_string())?;

    let mut config = ShardConfig::new(
        token,
        Intents::DIRECT_MESSAGES.union(Intents::GUILD_MESSAGES),
    );
    config.gateway_url = Some(env("SMOLCORD_GATEWAY_URL")?);
    config.identify_window = identify_window;
    config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));

    let (set, handle) =
        ShardSet::new(config, ids, count, |_| Default::default()).map_err(|e| e.to_string())?;
    let ex = smol::LocalExecutor::new();
    let work = ex.run(async {
        let shards = ex.spawn(set.run());
        while handle.next_event().await.is_ok() {}
        shards.await.map_err(|e| e.to_string())
    });
    // As the bot and `smolcord run` do: smolcord's runtime.
    smolcord::rt::block_on(work)
}
