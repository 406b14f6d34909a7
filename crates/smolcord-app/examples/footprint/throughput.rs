//! Dispatch throughput, in process: MESSAGE_CREATE events a shard decodes
//! and hands over per second, zlib-stream off and on.
//!
//! The events are queued in the simulator (its own thread) while this
//! thread's executor is not polled; then the clock starts and the shard
//! drains them. So the figure is the client's rate (read, inflate, parse,
//! sequence check, channel hand-over, `Message` decode), not the rate the
//! simulator can produce them at.

use crate::shard_client::BlockOn;
use smolcord::protocol::{Intents, Message};
use smolcord::shard::{Shard, ShardConfig, ShardEvent, ShardHandle};
use smolcord::token::Token;
use smolcord_sim::{SimConfig, Simulator, DEFAULT_SIM_TOKEN};
use std::time::{Duration, Instant};

/// One measurement.
pub struct Rate {
    /// Events handed over.
    pub events: u64,
    /// Time to drain them.
    pub elapsed: Duration,
}

impl Rate {
    /// Events per second.
    pub fn per_sec(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

const BOUND: Duration = Duration::from_secs(120);

async fn next_message(handle: &ShardHandle) -> Result<bool, String> {
    match handle.next_event().await.map_err(|e| e.to_string())? {
        ShardEvent::Dispatch(dispatch) if dispatch.name == "MESSAGE_CREATE" => dispatch
            .data::<Message>()
            .map(|_| true)
            .map_err(|e| format!("MESSAGE_CREATE #{} does not decode: {e}", dispatch.seq)),
        ShardEvent::Dispatch(dispatch) if dispatch.name == "READY" => Ok(false),
        _ => Ok(false),
    }
}

async fn bounded<T>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    futures_lite::future::or(fut, async {
        async_io::Timer::after(BOUND).await;
        Err(format!("{what}: no result within {BOUND:?}"))
    })
    .await
}

/// Drains `events` MESSAGE_CREATEs through one shard, `compress` choosing
/// zlib-stream, the executor driven by `block_on`.
pub fn measure(events: u64, compress: bool, block_on: BlockOn) -> Result<Rate, String> {
    let sim = Simulator::start(SimConfig::default()).map_err(|e| e.to_string())?;
    let token = Token::new(DEFAULT_SIM_TOKEN).ok_or("the simulator token is blank")?;
    let mut config = ShardConfig::new(token, Intents::DIRECT_MESSAGES);
    config.gateway_url = Some(sim.gateway_url());
    config.compress = if compress {
        smolcord::shard::Compression::Zlib
    } else {
        smolcord::shard::Compression::None
    };
    let (shard, handle) = Shard::new(config);
    let ex = smol::LocalExecutor::new();
    let driver = ex.spawn(shard.run());

    block_on.run(ex.run(bounded("READY", async {
        loop {
            match handle.next_event().await.map_err(|e| e.to_string())? {
                ShardEvent::Dispatch(d) if d.name == "READY" => return Ok(()),
                _ => continue,
            }
        }
    })))?;

    // Queue everything while the executor sleeps.
    let bot = sim.config().bot_id.get();
    for i in 0..events {
        // A realistic DM: a sentence, from a user (not the bot).
        let author = 900_000_000_000_000_000 + (i % 7);
        sim.send_dm(
            author,
            "someone",
            "hey, can you summarise the last build log for me?",
        );
        debug_assert_ne!(author, bot);
    }

    let started = Instant::now();
    let mut got = 0;
    block_on.run(ex.run(bounded("draining", async {
        while got < events {
            if next_message(&handle).await? {
                got += 1;
            }
        }
        Ok(())
    })))?;
    let elapsed = started.elapsed();

    handle.shutdown();
    block_on.run(ex.run(futures_lite::future::or(
        async {
            let _ = driver.await;
        },
        async {
            async_io::Timer::after(Duration::from_secs(5)).await;
        },
    )));
    sim.shutdown();
    Ok(Rate {
        events: got,
        elapsed,
    })
}
