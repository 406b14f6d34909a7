//! `footprint --shard-client URL`: the library's gateway client alone (one
//! shard, every dispatch decoded and dropped), as a child process to
//! measure. It stands in for `smolcord run` where the bridge is not built,
//! and shows what the bridge adds on top where it is.

use smolcord::protocol::{Intents, Message};
use smolcord::shard::{Shard, ShardConfig, ShardEvent};
use smolcord::sim::DEFAULT_SIM_TOKEN;
use smolcord::token::Token;

/// Runs until the shard stops (the parent ends this process).
pub fn run(gateway_url: String) -> Result<(), String> {
    let token = Token::new(DEFAULT_SIM_TOKEN).ok_or("the simulator token is blank")?;
    let mut config = ShardConfig::new(token, Intents::DIRECT_MESSAGES);
    config.gateway_url = Some(gateway_url);
    let (shard, handle) = Shard::new(config);
    let ex = smol::LocalExecutor::new();
    smol::block_on(ex.run(async {
        let driver = ex.spawn(shard.run());
        let mut messages = 0u64;
        while let Ok(event) = handle.next_event().await {
            if let ShardEvent::Dispatch(dispatch) = event {
                if dispatch.name == "MESSAGE_CREATE" && dispatch.data::<Message>().is_ok() {
                    messages += 1;
                }
            }
        }
        log::info!("shard client: {messages} messages");
        driver.await.map_err(|e| e.to_string())
    }))
}
