//! Many shards in one process, as printed figures (issue 15): 16 shards of
//! a bot with `max_concurrency` 4 against the in-process simulator, which
//! refuses a too early Identify with op 9 as Discord does.
//!
//! - **Startup**: how long from the first accepted Identify until all 16
//!   are READY, against the minimum (4 buckets: shards 0–3 at once, then one
//!   per bucket per window W: 3 × W), and how many identifies were refused
//!   (must be 0). With a shortened W (1 s) for smolcord alone, and with
//!   Discord's 5 s for the side by side (twilight's queue has a fixed 5 s).
//! - **Idle cost**: the client as a child process idle-connected with 1
//!   shard and with 16 (41.25 s heartbeat): RSS, (RSS16 − RSS1) / 15 per
//!   extra shard (goal ≤ 150 KiB), threads, and wake-ups per minute
//!   (voluntary context switches of all threads, read from /proc every
//!   100 ms, as `examples/footprint` counts them) over an idle window of two
//!   heartbeat intervals (every shard beats twice in it).
//!
//! Side by side with twilight-gateway 0.18 on single-threaded tokio
//! (`scripts/compat/twilight-shards`), each figure the median over rounds.
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
//! (1000), `--skip fast,side`. Children run with an empty environment; the
//! simulator's own thread and memory are not counted.
// A benchmark driver, not the event loop: it reads /proc, starts children
// and sleeps between samples on purpose.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod child;
mod client;
#[path = "../footprint/procfs.rs"]
#[allow(dead_code)] // footprint uses more of it
mod procfs;

use child::{Client, Plan, Run, MAX_CONCURRENCY};
use std::path::PathBuf;
use std::time::Duration;

/// Discord's identify window per bucket, and twilight's fixed queue delay.
const DISCORD_WINDOW: Duration = Duration::from_secs(5);

struct Args {
    rounds: usize,
    shards: u32,
    heartbeat: Duration,
    idle: Option<Duration>,
    fast_window: Duration,
    bot: Option<PathBuf>,
    twilight: Option<PathBuf>,
    skip: Vec<String>,
    /// Child mode: `--client RANGE` with `--identify-window-ms`.
    client: Option<String>,
    identify_window: Duration,
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
    if args.shards < 2 || args.rounds == 0 {
        return Err("--shards must be at least 2 and --rounds at least 1".into());
    }
    Ok(args)
}

/// The runs of one client in one configuration, a round each.
#[derive(Default)]
struct Rounds(Vec<Run>);

impl Rounds {
    fn median(&self, figure: impl Fn(&Run) -> Option<f64>) -> Option<f64> {
        median(self.0.iter().filter_map(figure).collect())
    }

    fn sum(&self, figure: impl Fn(&Run) -> u64) -> Option<u64> {
        (!self.0.is_empty()).then(|| self.0.iter().map(figure).sum())
    }
}

/// One client's side-by-side runs: 1 shard and N shards, per round.
struct Column {
    client: Client,
    one: Rounds,
    many: Rounds,
}

impl Column {
    /// (RSS_N − RSS_1) / (N − 1) per round, KiB.
    fn per_extra_shard(&self, shards: u32) -> Vec<f64> {
        let rss = |run: &Run| run.idle.as_ref().map(|idle| idle.rss_kib as f64);
        self.one
            .0
            .iter()
            .zip(&self.many.0)
            .filter_map(|(one, many)| Some((rss(many)? - rss(one)?) / f64::from(shards - 1)))
            .collect()
    }
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("—".into(), |s| format!("{s:.2} s"))
}

fn kib(value: Option<f64>) -> String {
    value.map_or("—".into(), |k| format!("{:.0} KiB", k))
}

fn mib(value: Option<f64>) -> String {
    value.map_or("—".into(), |k| format!("{:.2} MiB", k / 1024.0))
}

fn per_min(value: Option<f64>) -> String {
    value.map_or("—".into(), |w| format!("{w:.1}"))
}

fn count(value: Option<u64>) -> String {
    value.map_or("—".into(), |n| n.to_string())
}

fn ratio(smolcord: Option<f64>, twilight: Option<f64>) -> String {
    match (smolcord, twilight) {
        (Some(s), Some(t)) if t != 0.0 => format!("{:.2}", s / t),
        _ => "—".into(),
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[n / 2]),
        n => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

fn report_run(label: &str, plan: &Plan, run: &Result<Run, String>) {
    match run {
        Ok(run) => {
            let s = &run.startup;
            let mut line = format!(
                "  {label:<13} {:>2} shards, W {:>4} ms: all READY {:.2} s after the first identify ({:.2} s after start); {} identifies, {} refused, {} too early, min gap {}, {} REST requests",
                plan.shards,
                plan.window.as_millis(),
                s.first_to_last.as_secs_f64(),
                s.spawn_to_last.as_secs_f64(),
                s.identifies,
                s.refused,
                s.too_early,
                s.min_gap_ms.map_or("—".into(), |ms| format!("{ms:.0} ms")),
                s.rest_requests,
            );
            if let Some(idle) = &run.idle {
                line += &format!(
                    "; idle RSS {} KiB, {:.1} wake-ups/min ({} in {:.0} s: {:?}, {} beats), threads: {}",
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
    let skip = |part: &str| args.skip.iter().any(|s| s == part);
    let n = args.shards;
    let idle = args.idle.unwrap_or(args.heartbeat * 2);
    let minimum = |window: Duration| window * (n.div_ceil(MAX_CONCURRENCY) - 1);

    let mut columns: Vec<Column> = [
        Some(Client::Smolcord(me.clone())),
        args.bot.clone().map(Client::Bot),
        args.twilight.clone().map(Client::Twilight),
    ]
    .into_iter()
    .flatten()
    .map(|client| Column {
        client,
        one: Rounds::default(),
        many: Rounds::default(),
    })
    .collect();
    let mut fast = Rounds::default();
    let mut failures = 0;

    println!(
        "{n} shards in one process, max_concurrency {MAX_CONCURRENCY}, identify concurrency enforced (op 9 when too early); heartbeat {} ms; idle window {:.0} s; {} round(s)",
        args.heartbeat.as_millis(),
        idle.as_secs_f64(),
        args.rounds
    );
    for round in 1..=args.rounds {
        println!("round {round}");
        if !skip("fast") {
            let plan = Plan {
                shards: n,
                window: args.fast_window,
                heartbeat: args.heartbeat,
                idle: None,
            };
            let run = child::measure(&Client::Smolcord(me.clone()), plan);
            report_run("smolcord", &plan, &run);
            match run {
                Ok(run) => fast.0.push(run),
                Err(_) => failures += 1,
            }
        }
        if !skip("side") {
            for column in &mut columns {
                for shards in [1, n] {
                    let plan = Plan {
                        shards,
                        window: DISCORD_WINDOW,
                        heartbeat: args.heartbeat,
                        idle: Some(idle),
                    };
                    let run = child::measure(&column.client, plan);
                    report_run(column.client.name(), &plan, &run);
                    let rounds = if shards == 1 {
                        &mut column.one
                    } else {
                        &mut column.many
                    };
                    match run {
                        Ok(run) => rounds.0.push(run),
                        Err(_) => failures += 1,
                    }
                }
            }
        }
    }

    // The table: smolcord's columns, twilight's, and smolcord ÷ twilight.
    let twilight = columns
        .iter()
        .position(|c| matches!(c.client, Client::Twilight(_)));
    let mut header = "| figure (median of rounds) |".to_owned();
    let mut rule = "|---|".to_owned();
    for column in &columns {
        header += &format!(" {} |", column.client.name());
        rule += "---|";
    }
    if twilight.is_some() {
        header += " smolcord ÷ twilight |";
        rule += "---|";
    }
    println!("\n{header}\n{rule}");
    let row = |label: String, cells: Vec<String>, values: Option<(Option<f64>, Option<f64>)>| {
        let mut line = format!("| {label} |");
        for cell in cells {
            line += &format!(" {cell} |");
        }
        if twilight.is_some() {
            let cell = values.map_or(String::new(), |(s, t)| ratio(s, t));
            line += &format!(" {cell} |");
        }
        println!("{line}");
    };
    // The figure of each column, then smolcord's and twilight's values for the ratio.
    let figure = |value: &dyn Fn(&Column) -> Option<f64>,
                  show: &dyn Fn(Option<f64>) -> String|
     -> (Vec<String>, Option<(Option<f64>, Option<f64>)>) {
        let values: Vec<Option<f64>> = columns.iter().map(value).collect();
        let pair = twilight.map(|t| (values[0], values[t]));
        (values.into_iter().map(show).collect(), pair)
    };
    let blank = |first: String| {
        let mut cells = vec![first];
        cells.resize(columns.len(), "—".into());
        cells
    };

    if !skip("fast") {
        let first_to_last = fast.median(|r| Some(r.startup.first_to_last.as_secs_f64()));
        row(
            format!(
                "all {n} READY after the first identify, W = {} s (minimum {:.2} s)",
                args.fast_window.as_secs_f64(),
                minimum(args.fast_window).as_secs_f64()
            ),
            blank(seconds(first_to_last)),
            None,
        );
        row(
            format!(
                "identifies refused (op 9) / too early, W = {} s, all rounds",
                args.fast_window.as_secs_f64()
            ),
            blank(format!(
                "{} / {}",
                count(fast.sum(|r| r.startup.refused)),
                count(fast.sum(|r| r.startup.too_early))
            )),
            None,
        );
    }
    if skip("side") {
        println!("({failures} run(s) failed)");
        return;
    }
    let (cells, pair) = figure(
        &|c| {
            c.many
                .median(|r| Some(r.startup.first_to_last.as_secs_f64()))
        },
        &seconds,
    );
    row(
        format!(
            "all {n} READY after the first identify, W = 5 s (minimum {:.2} s)",
            minimum(DISCORD_WINDOW).as_secs_f64()
        ),
        cells,
        pair,
    );
    let (cells, pair) = figure(
        &|c| {
            c.many
                .median(|r| Some(r.startup.spawn_to_last.as_secs_f64()))
        },
        &seconds,
    );
    row(
        format!("process start → all {n} READY, W = 5 s"),
        cells,
        pair,
    );
    let cells = columns
        .iter()
        .map(|c| {
            format!(
                "{} / {}",
                count(c.many.sum(|r| r.startup.refused)),
                count(c.many.sum(|r| r.startup.too_early))
            )
        })
        .collect();
    row(
        "identifies refused (op 9) / too early, W = 5 s, all rounds".into(),
        cells,
        None,
    );
    let (cells, _) = figure(
        &|c| {
            c.many
                .0
                .iter()
                .filter_map(|r| r.startup.min_gap_ms)
                .min_by(f64::total_cmp)
        },
        &|ms| ms.map_or("—".into(), |ms| format!("{:.2} s", ms / 1000.0)),
    );
    row(
        "shortest gap between two identifies of a bucket, all rounds".into(),
        cells,
        None,
    );
    let rss = |rounds: &Rounds| rounds.median(|r| r.idle.as_ref().map(|i| i.rss_kib as f64));
    let (cells, pair) = figure(&|c| rss(&c.one), &mib);
    row("RSS idle, 1 shard".into(), cells, pair);
    let (cells, pair) = figure(&|c| rss(&c.many), &mib);
    row(format!("RSS idle, {n} shards"), cells, pair);
    let (cells, pair) = figure(&|c| median(c.per_extra_shard(n)), &kib);
    row(
        format!(
            "per extra shard, (RSS{n} − RSS1) / {} (goal ≤ 150 KiB)",
            n - 1
        ),
        cells,
        pair,
    );
    let cells = columns
        .iter()
        .map(|c| {
            c.many
                .0
                .last()
                .and_then(|r| r.idle.as_ref())
                .map_or("—".into(), |i| i.threads.clone())
        })
        .collect();
    row(format!("threads, {n} shards"), cells, None);
    let wakeups = |rounds: &Rounds| rounds.median(|r| r.idle.as_ref().map(|i| i.per_min()));
    let (cells, pair) = figure(&|c| wakeups(&c.one), &per_min);
    row("wake-ups/min, 1 shard".into(), cells, pair);
    let (cells, pair) = figure(&|c| wakeups(&c.many), &per_min);
    row(format!("wake-ups/min, {n} shards"), cells, pair);
    let beats = |rounds: &Rounds| {
        rounds.median(|r| {
            r.idle
                .as_ref()
                .map(|i| i.beats as f64 * 60.0 / i.window.as_secs_f64())
        })
    };
    let (cells, _) = figure(&|c| beats(&c.many), &per_min);
    row(
        format!("heartbeats/min the simulator got, {n} shards"),
        cells,
        None,
    );
    if failures > 0 {
        println!("\n{failures} run(s) FAILED (see above); medians are over the rest");
    }
}
