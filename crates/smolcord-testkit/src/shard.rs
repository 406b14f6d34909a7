//! The shard's rig: the real shard against the simulator on one local
//! executor (as smolcord runs it), and bounded waits on its events.

use smol::LocalExecutor;
use smolcord::shard::{Backoff, Dispatch, Shard, ShardConfig, ShardError, ShardEvent, ShardHandle};
use smolcord_sim::{SimConfig, Simulator};

use super::logs;
use super::wait::SOON;
use std::future::Future;
use std::time::{Duration, Instant};

/// A simulator beating every `interval_ms`, with room for many commands.
pub fn sim(interval_ms: u64) -> Simulator {
    Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(interval_ms),
        command_limit: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

/// A shard config pointed at `sim`, with short backoff for tests.
pub fn shard_config(sim: &Simulator) -> ShardConfig {
    let mut config = ShardConfig::new(
        sim.config().token.clone(),
        smolcord::protocol::Intents::DIRECT_MESSAGES,
    );
    config.gateway_url = Some(sim.gateway_url());
    config.backoff = Backoff::new(
        Duration::from_millis(20),
        Duration::from_millis(200),
        Duration::from_secs(60),
    );
    config.invalid_session_wait = (Duration::from_millis(10), Duration::from_millis(50));
    config.close_timeout = Duration::from_millis(300);
    config
}

/// Runs `body` on a single-threaded executor (as smolcord runs), with the
/// shard driver spawned on the same executor.
pub fn run_local<F, Fut, T>(config: ShardConfig, body: F) -> T
where
    F: FnOnce(ShardHandle, std::rc::Rc<LocalExecutor<'static>>) -> Fut,
    Fut: Future<Output = T>,
{
    logs::capture();
    let ex = std::rc::Rc::new(LocalExecutor::new());
    let (shard, handle) = Shard::new(config);
    let driver = ex.spawn(smolcord::loopwatch::watch("gateway", shard.run()));
    let result = smol::block_on(ex.run(body(handle.clone(), ex.clone())));
    handle.shutdown();
    let _ = smol::block_on(ex.run(async {
        futures_lite::future::or(async { Some(driver.await) }, async {
            async_io::Timer::after(SOON).await;
            None
        })
        .await
    }));
    result
}

/// The next shard event matching `pred`, or panics after `timeout`.
pub async fn wait_shard(
    handle: &ShardHandle,
    timeout: Duration,
    mut pred: impl FnMut(&Result<ShardEvent, ShardError>) -> bool,
) -> Result<ShardEvent, ShardError> {
    let deadline = Instant::now() + timeout;
    loop {
        let next = futures_lite::future::or(async { Some(handle.next_event().await) }, async {
            async_io::Timer::at(deadline).await;
            None
        })
        .await;
        match next {
            Some(event) if pred(&event) => return event,
            Some(Err(ShardError::Stopped)) => panic!("shard stopped while waiting"),
            Some(_) => {}
            None => panic!("timed out after {timeout:?} waiting for a shard event"),
        }
    }
}

/// The next dispatch named `name`.
pub async fn wait_dispatch(handle: &ShardHandle, name: &str) -> Dispatch {
    match wait_shard(
        handle,
        SOON,
        |e| matches!(e, Ok(ShardEvent::Dispatch(d)) if d.name == name),
    )
    .await
    {
        Ok(ShardEvent::Dispatch(dispatch)) => dispatch,
        other => panic!("expected {name}, got {other:?}"),
    }
}
