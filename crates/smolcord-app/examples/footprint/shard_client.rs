//! `footprint --shard-client URL`: the library's gateway client alone (one
//! shard, every dispatch decoded and dropped), as a child process to
//! measure. It stands in for `smolcord run` where the bridge is not built,
//! and shows what the bridge adds on top where it is.
//!
//! `--block-on rt|futures-lite|async-io` chooses what drives the executor:
//! smolcord's own runtime (`smolcord::rt::block_on`, what the binary runs:
//! this thread also waits on epoll for its sockets and timers), or
//! `futures_lite::future::block_on` (the "async-io" thread alone waits on
//! epoll and wakes this one), or `smol::block_on` (= `async_io::block_on`:
//! after every event the "async-io" thread polls with a backoff, 50 µs ..
//! 10 ms, about ten wake-ups). The idle table shows the difference.

use smolcord::protocol::{Intents, Message};
use smolcord::shard::{Shard, ShardConfig, ShardEvent};
use smolcord::token::Token;
use smolcord_sim::DEFAULT_SIM_TOKEN;

/// How the main thread drives the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockOn {
    /// `smolcord::rt::block_on` (what `smolcord` uses).
    Rt,
    /// `smol::block_on` (= `async_io::block_on`).
    AsyncIo,
    /// `futures_lite::future::block_on`.
    FuturesLite,
}

impl BlockOn {
    /// What `smolcord` itself runs on.
    pub const PRODUCT: BlockOn = BlockOn::Rt;

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            BlockOn::Rt => "rt",
            BlockOn::AsyncIo => "async-io",
            BlockOn::FuturesLite => "futures-lite",
        }
    }

    /// Drives `fut` to completion on this thread.
    pub fn run<T>(self, fut: impl std::future::Future<Output = T>) -> T {
        match self {
            BlockOn::Rt => smolcord::rt::block_on(fut),
            BlockOn::AsyncIo => smol::block_on(fut),
            BlockOn::FuturesLite => futures_lite::future::block_on(fut),
        }
    }

    /// From the command-line name.
    pub fn parse(name: &str) -> Option<BlockOn> {
        [BlockOn::Rt, BlockOn::AsyncIo, BlockOn::FuturesLite]
            .into_iter()
            .find(|b| b.name() == name)
    }
}

/// Runs until the shard stops (the parent ends this process).
pub fn run(gateway_url: String, block_on: BlockOn) -> Result<(), String> {
    let token = Token::new(DEFAULT_SIM_TOKEN).ok_or("the simulator token is blank")?;
    let mut config = ShardConfig::new(token, Intents::DIRECT_MESSAGES);
    config.gateway_url = Some(gateway_url);
    let (shard, handle) = Shard::new(config);
    let ex = smol::LocalExecutor::new();
    let work = ex.run(async {
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
    });
    block_on.run(work)
}
