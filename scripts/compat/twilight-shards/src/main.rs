//! twilight-shards: the twilight peer of smolcord's shard benchmark
//! (`examples/shards_bench`, issue 15).
//!
//! Shards `FIRST..=LAST` of `TOTAL` in one process on single-threaded tokio,
//! laid out as twilight's own examples do: one task per shard polling
//! `next_event`, every shard sharing one `InMemoryQueue` with the bot's
//! `max_concurrency` (twilight's queue lets one identify per bucket through
//! every 5 s, a fixed delay). It runs until the benchmark ends it; the
//! benchmark reads READY times, identifies and memory from the simulator
//! and /proc.
//!
//! ```text
//! DISCORD_TOKEN=MTEwMDAwMDAwMDAwMDAwMDAwMQ.HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA twilight-shards --gateway ws://127.0.0.1:PORT --shards 0-15/16 --concurrency 4
//! ```

use std::process::ExitCode;
use std::time::Duration;
use twilight_gateway::queue::InMemoryQueue;
use twilight_gateway::{ConfigBuilder, EventTypeFlags, Intents, Shard, ShardId, StreamExt};

struct Args {
    gateway: String,
    first: u32,
    last: u32,
    total: u32,
    concurrency: u16,
}

fn args() -> Result<Args, String> {
    let (mut gateway, mut shards, mut concurrency) = (None, None, None);
    let mut it = std::env::args().skip(1);
    while let Some(key) = it.next() {
        let value = it.next().ok_or_else(|| format!("{key} needs a value"))?;
        match key.as_str() {
            "--gateway" => gateway = Some(value),
            "--shards" => shards = Some(value),
            "--concurrency" => {
                concurrency = Some(value.parse().map_err(|e| format!("--concurrency: {e}"))?)
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let shards = shards.ok_or("--shards FIRST-LAST/TOTAL is required")?;
    let bad = || format!("--shards {shards}: want FIRST-LAST/TOTAL");
    let (ids, total) = shards.split_once('/').ok_or_else(bad)?;
    let (first, last) = ids.split_once('-').ok_or_else(bad)?;
    let number = |s: &str| s.parse::<u32>().map_err(|_| bad());
    let (first, last, total) = (number(first)?, number(last)?, number(total)?);
    if first > last || last >= total {
        return Err(bad());
    }
    Ok(Args {
        gateway: gateway.ok_or("--gateway URL is required")?,
        first,
        last,
        total,
        concurrency: concurrency.ok_or("--concurrency N is required")?,
    })
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("twilight-shards: {err}");
            return ExitCode::from(2);
        }
    };
    let Ok(token) = std::env::var("DISCORD_TOKEN") else {
        eprintln!("twilight-shards: set DISCORD_TOKEN");
        return ExitCode::from(2);
    };
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        eprintln!("twilight-shards: a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("twilight-shards: cannot start tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(args, token));
    eprintln!("twilight-shards: every shard's stream ended");
    ExitCode::FAILURE
}

/// Runs every shard until its stream ends (the benchmark kills the process
/// long before).
async fn run(args: Args, token: String) {
    // The budget figures are GET /gateway/bot's; only max_concurrency matters here.
    let queue = InMemoryQueue::new(
        args.concurrency,
        1000,
        Duration::from_secs(24 * 3600),
        1000,
    );
    let config = ConfigBuilder::new(token, Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES)
        .proxy_url(args.gateway)
        .queue(queue)
        .build();
    let tasks: Vec<_> = (args.first..=args.last)
        .map(|id| {
            let shard = Shard::with_config(ShardId::new(id, args.total), config.clone());
            tokio::spawn(runner(shard))
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

/// What a twilight bot's shard task does: poll for the events it wants
/// (polling is what keeps a twilight shard heartbeating).
async fn runner(mut shard: Shard<InMemoryQueue>) {
    let wanted = EventTypeFlags::READY | EventTypeFlags::MESSAGE_CREATE;
    while let Some(item) = shard.next_event(wanted).await {
        if let Err(err) = item {
            eprintln!("twilight-shards: shard {}: {err}", shard.id());
        }
    }
}
