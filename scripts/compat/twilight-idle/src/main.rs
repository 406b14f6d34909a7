//! twilight-gateway 0.18 connected and idle: what examples/footprint
//! measures beside `smolcord run` and the smolcord shard.
//!
//! Reads the same environment the footprint gives smolcord
//! (`DISCORD_TOKEN`, `SMOLCORD_GATEWAY_URL`), identifies with
//! DIRECT_MESSAGES like smolcord's default, and polls the shard forever
//! (twilight only heartbeats while polled), dropping every event. The
//! footprint ends it with SIGTERM.

use std::process::ExitCode;
use twilight_gateway::{ConfigBuilder, EventTypeFlags, Intents, Shard, ShardId, StreamExt};

fn main() -> ExitCode {
    let (Ok(token), Ok(gateway)) = (
        std::env::var("DISCORD_TOKEN"),
        std::env::var("SMOLCORD_GATEWAY_URL"),
    ) else {
        eprintln!("twilight-idle: set DISCORD_TOKEN and SMOLCORD_GATEWAY_URL");
        return ExitCode::from(2);
    };
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        eprintln!("twilight-idle: a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("twilight-idle: cannot build the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let config = ConfigBuilder::new(token, Intents::DIRECT_MESSAGES)
            .proxy_url(gateway)
            .build();
        let mut shard = Shard::with_config(ShardId::ONE, config);
        while let Some(item) = shard.next_event(EventTypeFlags::all()).await {
            if let Err(err) = item {
                eprintln!("twilight-idle: gateway error: {err}");
            }
        }
        eprintln!("twilight-idle: the shard stream ended");
        ExitCode::FAILURE
    })
}
