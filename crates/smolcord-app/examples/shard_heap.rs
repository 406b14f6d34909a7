//! Live heap bytes per shard: a shard set of 1 and of N shards (a child
//! process each, configured as the reference bot) against the in-process
//! simulator, counted by a global allocator once every shard is READY and
//! has had two heartbeats acknowledged. RSS (`shards_bench`) adds the
//! allocator's slack and the binary's pages; this is what the code keeps.
//!
//! ```text
//! cargo run --release --example shard_heap -- [N] [ROUNDS]   # 16, 3
//! ```
// The reason for `unsafe` (docs/design.md, "Style we follow"): a counting allocator must implement
// `GlobalAlloc`, an unsafe trait; it only forwards to `System`.
// A benchmark driver: it starts children and waits on them.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use smolcord::protocol::Intents;
use smolcord::rest::RestClient;
use smolcord::shard::{ShardConfig, ShardEvent, ShardRange, ShardSet};
use smolcord::token::Token;
use smolcord_sim::{SessionStartLimit, SimConfig, Simulator, DEFAULT_SIM_TOKEN};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// `System`, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Relaxed);
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The child: shards `range` until each is READY and two ACKs per shard
/// came; prints the live heap bytes then.
fn child(range: &str) -> Result<(), Box<dyn std::error::Error>> {
    let env = |name: &str| std::env::var(name).map_err(|_| format!("set {name}"));
    let token = Token::new(&env("DISCORD_TOKEN")?).ok_or("DISCORD_TOKEN is blank")?;
    let rest = RestClient::new(&env("SMOLCORD_API_BASE")?, token.clone());
    let (ids, count) = ShardRange::parse(range)?.resolve(1)?;
    let shards = ids.clone().count();
    let mut config = ShardConfig::new(
        token,
        Intents::DIRECT_MESSAGES.union(Intents::GUILD_MESSAGES),
    );
    config.gateway_url = Some(env("SMOLCORD_GATEWAY_URL")?);
    config.identify_window = Duration::from_millis(50);
    config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));
    let (set, handle) = ShardSet::new(config, ids, count, |_| Default::default())?;
    let ex = smol::LocalExecutor::new();
    smolcord::rt::block_on(ex.run(async {
        let _shards = ex.spawn(set.run());
        let (mut ready, mut acks) = (0, 0);
        while acks < 2 * shards {
            match handle.next_event().await.map_err(|e| e.to_string())? {
                (_, ShardEvent::Dispatch(d)) if d.name == "READY" => ready += 1,
                (_, ShardEvent::Heartbeat(_)) if ready == shards => acks += 1,
                _ => {}
            }
        }
        println!("{}", LIVE.load(Relaxed));
        Ok(())
    }))
}

/// Live heap bytes of a child running shards `0..n` of `n`.
fn measure(sim: &Simulator, n: u32) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(["--child", &format!("0-{}/{n}", n - 1)])
        .env_clear()
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .output()
        .map_err(|e| format!("start the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.trim().parse().map_err(|_| {
        format!(
            "child for {n} shards ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, range] = args.as_slice() {
        if flag == "--child" {
            return child(range).map_err(|e| e.to_string());
        }
    }
    let number = |i: usize, default: u32| args.get(i).map_or(Ok(default), |v| v.parse());
    let n = number(0, 16).map_err(|e| format!("N: {e}"))?.max(2);
    let rounds = number(1, 3).map_err(|e| format!("ROUNDS: {e}"))?.max(1);
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(300),
        recommended_shards: n,
        // Identify pacing is not measured here: all buckets at once.
        session_start_limit: SessionStartLimit {
            max_concurrency: n,
            ..SessionStartLimit::default()
        },
        ..SimConfig::default()
    })
    .map_err(|e| format!("simulator: {e}"))?;
    let (mut one, mut many, mut per_shard) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (a, b) = (measure(&sim, 1)?, measure(&sim, n)?);
        one.push(a / 1024.0);
        many.push(b / 1024.0);
        per_shard.push((b - a) / 1024.0 / f64::from(n - 1));
    }
    println!("live heap, median of {rounds} rounds:");
    println!("  1 shard      {:>8.1} KiB", median(one));
    println!("  {n} shards    {:>8.1} KiB", median(many));
    println!("  per extra shard {:>5.1} KiB", median(per_shard));
    Ok(())
}
