//! Helpers shared by the benchmark examples: a simulator, a shard on the
//! caller's executor, and exact lateness figures from the beats it reports.
#![allow(dead_code)] // each example uses a part

use smol::LocalExecutor;
use smolcord::heartbeat::BeatRecord;
use smolcord::protocol::Intents;
use smolcord::shard::{Compression, Shard, ShardConfig, ShardEvent, ShardHandle};
use smolcord_sim::{SimConfig, Simulator};
use std::time::{Duration, Instant};

/// A simulator beating every `interval`, with no command limit to trip.
pub fn start_sim(interval: Duration) -> Simulator {
    Simulator::start(SimConfig {
        heartbeat_interval: interval,
        command_limit: u32::MAX,
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

/// A shard connected to `sim`, driven by `ex`.
pub fn spawn_shard(ex: &LocalExecutor<'_>, sim: &Simulator, compress: bool) -> ShardHandle {
    let mut config = ShardConfig::new(sim.config().token.clone(), Intents::DIRECT_MESSAGES);
    config.gateway_url = Some(sim.gateway_url());
    config.compress = if compress {
        Compression::Zlib
    } else {
        Compression::None
    };
    let (shard, handle) = Shard::new(config);
    ex.spawn(smolcord::loopwatch::watch("gateway", shard.run()))
        .detach();
    handle
}

/// Waits for READY.
pub async fn ready(handle: &ShardHandle) {
    loop {
        match handle.next_event().await {
            Ok(ShardEvent::Dispatch(d)) if d.name == "READY" => return,
            Ok(_) => {}
            Err(err) => panic!("shard failed: {err}"),
        }
    }
}

/// Beats acknowledged during the next `span` (other events are dropped;
/// dispatches are counted).
pub async fn beats_during(handle: &ShardHandle, span: Duration) -> (Vec<BeatRecord>, u64) {
    let end = Instant::now() + span;
    let mut beats = Vec::new();
    let mut dispatches = 0;
    loop {
        let next = futures_lite::future::or(async { Some(handle.next_event().await) }, async {
            async_io::Timer::at(end).await;
            None
        })
        .await;
        match next {
            Some(Ok(ShardEvent::Heartbeat(beat))) => beats.push(beat),
            Some(Ok(ShardEvent::Dispatch(_))) => dispatches += 1,
            Some(Ok(_)) => {}
            Some(Err(err)) => panic!("shard failed: {err}"),
            None => return (beats, dispatches),
        }
    }
}

/// (p50, p99, max) of `values` in ms, exact (sorted), or zeros when empty.
pub fn summary(mut values: Vec<f64>) -> (f64, f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), at(1.0))
}

/// Lateness of each beat in ms.
pub fn lateness_ms(beats: &[BeatRecord]) -> Vec<f64> {
    beats
        .iter()
        .map(|beat| beat.lateness.as_secs_f64() * 1000.0)
        .collect()
}

/// Prints one line of lateness figures.
pub fn print_lateness(label: &str, beats: &[BeatRecord]) {
    let (p50, p99, max) = summary(lateness_ms(beats));
    println!(
        "{label:<44} beats {:>4}  lateness p50 {p50:>7.3} ms  p99 {p99:>7.3} ms  max {max:>7.3} ms",
        beats.len()
    );
}
