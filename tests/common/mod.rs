//! Shared harness for tests that run the real shard against the simulator.
#![allow(dead_code)] // each test binary uses a different part

pub mod process;
pub mod tls;

use smol::LocalExecutor;
use smolcord::shard::{Backoff, Dispatch, Shard, ShardConfig, ShardError, ShardEvent, ShardHandle};
use smolcord::sim::{next_matching, SimConfig, SimEvent, Simulator};
use std::future::Future;
use std::time::{Duration, Instant};

/// A generous bound for anything that should happen "soon".
pub const SOON: Duration = Duration::from_secs(10);

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
    capture_logs();
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

/// The next simulator event matching `pred` on `rx`, or panics.
pub async fn wait_sim(
    rx: &smol::channel::Receiver<SimEvent>,
    what: &str,
    pred: impl FnMut(&SimEvent) -> bool,
) -> SimEvent {
    next_matching(rx, SOON, pred)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for the simulator to see {what}"))
}

static LOGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct CaptureLogger;

impl log::Log for CaptureLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Debug
    }
    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = format!("{} {}: {}", record.level(), record.target(), record.args());
            if std::env::var_os("TEST_LOG").is_some() {
                eprintln!("{line}");
            }
            LOGS.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    }
    fn flush(&self) {}
}

/// Captures every log line of this test binary (debug and above); set
/// `TEST_LOG=1` to see them on stderr too.
pub fn capture_logs() {
    if log::set_logger(&CaptureLogger).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}

/// Every log line captured so far.
pub fn logs() -> Vec<String> {
    LOGS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
