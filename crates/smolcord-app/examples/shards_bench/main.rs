//! Many shards in one process, as printed figures (issue 15): 16 shards of
//! a bot with `max_concurrency` 4 against the in-process simulator, which
//! refuses a too early Identify with op 9 as Discord does.
//!
//! - **Startup** (`fast`): how long from the first accepted Identify until
//!   all 16 are READY, against the minimum (4 buckets: shards 0–3 at once,
//!   then one per bucket per window W: 3 × W), and how many identifies
//!   were refused (must be 0), with a shortened W (1 s).
//! - **Side by side** (`side`), at Discord's W = 5 s (twilight's queue has
//!   a fixed 5 s): the same startup figures, and the client as a child
//!   process idle-connected with 1 shard and with 16 (41.25 s heartbeat):
//!   RSS, (RSS16 − RSS1) / 15 per extra shard (goal ≤ 150 KiB), threads,
//!   and wake-ups per minute (voluntary context switches of all threads,
//!   read from /proc every 100 ms, as `crates/smolcord-app/examples/footprint` counts them)
//!   over an idle window of two heartbeat intervals (every shard beats
//!   twice in it). Columns: smolcord (a shard set configured as the
//!   reference bot, on smolcord's runtime as `smolcord run`), the
//!   reference bot itself (`--bot`), twilight-gateway 0.18 on
//!   single-threaded tokio (`--twilight`, `scripts/compat/twilight-shards`).
//! - **Two processes** (`processes`, with `--bot`): the reference bot on
//!   shards 0–7 and 8–15 of 16, both asking one gateway-queue compatible
//!   queue — the simulator's stand-in (W shortened), or `--queue-url URL`
//!   (W = 5 s; `--listen ADDR` fixes the simulator's address for a queue
//!   that asks `GET /gateway/bot` itself): never two identifies of one
//!   bucket in a window.
//!
//! Each figure is the median over rounds.
//!
//! ```text
//! scripts/compat/twilight-shards/run.sh            # builds all, 3 rounds
//! # or, smolcord's columns alone:
//! cargo build --release --example shards_bench --example bot
//! target/release/examples/shards_bench [--bot target/release/examples/bot] [--twilight PATH]
//! ```
//!
//! Options: `--rounds N` (3), `--shards N` (16), `--heartbeat-ms N`
//! (41250), `--idle-secs N` (two heartbeat intervals), `--fast-window-ms N`
//! (1000), `--skip fast,side,processes`. Children run with an empty
//! environment; the simulator's own thread and memory are not counted.
// A benchmark driver, not the event loop: it reads /proc, starts children
// and sleeps between samples on purpose.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod child;
mod client;
#[path = "../footprint/procfs.rs"]
#[allow(dead_code)] // footprint uses more of it
mod procfs;
mod table;

use child::{Client, Plan, Run, SharedQueue, Startup};
use std::path::PathBuf;
use std::time::Duration;
use table::{Column, Results};

/// Discord's identify window per bucket, and twilight's fixed queue delay.
pub const DISCORD_WINDOW: Duration = Duration::from_secs(5);

pub struct Args {
    pub rounds: usize,
    pub shards: u32,
    pub heartbeat: Duration,
    pub idle: Option<Duration>,
    pub fast_window: Duration,
    pub bot: Option<PathBuf>,
    pub twilight: Option<PathBuf>,
    pub queue: SharedQueue,
    pub skip: Vec<String>,
    /// Child mode: `--client RANGE` with `--identify-window-ms`.
    client: Option<String>,
    identify_window: Duration,
}

impl Args {
    pub fn skip(&self, part: &str) -> bool {
        self.skip.iter().any(|s| s == part)
    }

    /// The identify window of the two-process part: the queue service keeps
    /// its own time, so Discord's unless it is the simulator's stand-in.
    pub fn processes_window(&self) -> Duration {
        match self.queue.url {
            Some(_) => DISCORD_WINDOW,
            None => self.fast_window,
        }
    }
}

fn parse() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        rounds: 3,
        shards: 16,
        heartbeat: Duration::from_millis(41_250),
        idle: None,
        fast_window: Duration::from_secs(1),
        bot: None,
        twilight: None,
        queue: SharedQueue {
            url: None,
            listen: None,
        },
        skip: Vec::new(),
        client: None,
        identify_window: DISCORD_WINDOW,
    };
    let millis = |value: std::ffi::OsString| -> Result<Duration, lexopt::Error> {
        Ok(Duration::from_millis(value.parse()?))
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("rounds") => args.rounds = parser.value()?.parse()?,
            Long("shards") => args.shards = parser.value()?.parse()?,
            Long("heartbeat-ms") => args.heartbeat = millis(parser.value()?)?,
            Long("idle-secs") => args.idle = Some(Duration::from_secs(parser.value()?.parse()?)),
            Long("fast-window-ms") => args.fast_window = millis(parser.value()?)?,
            Long("bot") => args.bot = Some(parser.value()?.into()),
            Long("twilight") => args.twilight = Some(parser.value()?.into()),
            Long("queue-url") => args.queue.url = Some(parser.value()?.string()?),
            Long("listen") => args.queue.listen = Some(parser.value()?.parse()?),
            Long("skip") => {
                args.skip = parser
                    .value()?
                    .string()?
                    .split(',')
                    .map(str::to_owned)
                    .collect()
            }
            Long("client") => args.client = Some(parser.value()?.string()?),
            Long("identify-window-ms") => args.identify_window = millis(parser.value()?)?,
            _ => return Err(arg.unexpected()),
        }
    }
    if args.shards < 2 || args.shards % 2 != 0 || args.rounds == 0 {
        return Err("--shards must be even and at least 2, --rounds at least 1".into());
    }
    Ok(args)
}

fn report_run(label: &str, plan: &Plan, run: &Result<Run, String>) {
    match run {
        Ok(run) => {
            let mut line = format!(
                "  {label:<13} {:>2} shards, W {:>4} ms: {}",
                plan.shards,
                plan.window.as_millis(),
                startup_line(&run.startup)
            );
            if let Some(idle) = &run.idle {
                line += &format!(
                    "; idle RSS {} KiB, {:.1} wake-ups/min ({} in {:.0} s: {}; {} beats), threads: {}",
                    idle.rss_kib,
                    idle.per_min(),
                    idle.wakeups,
                    idle.window.as_secs_f64(),
                    idle.by_thread,
                    idle.beats,
                    idle.threads
                );
            }
            println!("{line}");
        }
        Err(err) => println!("  {label:<13} {:>2} shards: FAILED: {err}", plan.shards),
    }
}

fn startup_line(s: &Startup) -> String {
    format!(
        "all READY {:.2} s after the first identify ({:.2} s after start); {} identifies (by bucket {:?}), {} refused, {} too early, min gap {}, {} REST requests",
        s.first_to_last.as_secs_f64(),
        s.spawn_to_last.as_secs_f64(),
        s.identifies,
        s.by_bucket,
        s.refused,
        s.too_early,
        s.min_gap_ms.map_or("—".into(), |ms| format!("{ms:.0} ms")),
        s.rest_requests,
    )
}

fn main() {
    let args = match parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("shards_bench: {err}");
            std::process::exit(2);
        }
    };
    if let Some(range) = &args.client {
        env_logger::init();
        if let Err(err) = client::run(range, args.identify_window) {
            eprintln!("shards_bench client: {err}");
            std::process::exit(1);
        }
        return;
    }
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("shards_bench"));
    let n = args.shards;
    let idle = args.idle.unwrap_or(args.heartbeat * 2);
    let mut results = Results {
        fast: Vec::new(),
        columns: [
            Some(Client::Smolcord(me.clone())),
            args.bot.clone().map(Client::Bot),
            args.twilight.clone().map(Client::Twilight),
        ]
        .into_iter()
        .flatten()
        .map(Column::new)
        .collect(),
        processes: Vec::new(),
        failures: 0,
    };

    println!(
        "{n} shards, max_concurrency {}, identify concurrency enforced (op 9 when too early); heartbeat {} ms; idle window {:.0} s; {} round(s)",
        child::MAX_CONCURRENCY,
        args.heartbeat.as_millis(),
        idle.as_secs_f64(),
        args.rounds
    );
    for round in 1..=args.rounds {
        println!("round {round}");
        if !args.skip("fast") {
            let plan = Plan {
                shards: n,
                window: args.fast_window,
                heartbeat: args.heartbeat,
                idle: None,
            };
            let run = child::measure(&Client::Smolcord(me.clone()), plan);
            report_run("smolcord", &plan, &run);
            results.keep(run.map(|run| run.startup), |r| &mut r.fast);
        }
        if !args.skip("side") {
            for index in 0..results.columns.len() {
                for shards in [1, n] {
                    let plan = Plan {
                        shards,
                        window: DISCORD_WINDOW,
                        heartbeat: args.heartbeat,
                        idle: Some(idle),
                    };
                    let column = &results.columns[index];
                    let run = child::measure(&column.client, plan);
                    report_run(column.client.name(), &plan, &run);
                    results.keep(run, |r| {
                        let column = &mut r.columns[index];
                        if shards == 1 {
                            &mut column.one
                        } else {
                            &mut column.many
                        }
                    });
                }
            }
        }
        if let (false, Some(bot)) = (args.skip("processes"), &args.bot) {
            let plan = Plan {
                shards: n,
                window: args.processes_window(),
                heartbeat: args.heartbeat,
                idle: None,
            };
            let run = child::measure_processes(bot, plan, &args.queue);
            match &run {
                Ok(startup) => println!(
                    "  two bots     {n} shards, W {:>4} ms: {}",
                    plan.window.as_millis(),
                    startup_line(startup)
                ),
                Err(err) => println!("  two bots     FAILED: {err}"),
            }
            results.keep(run, |r| &mut r.processes);
        }
    }
    table::print(&args, &results);
}
