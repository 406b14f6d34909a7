//! The rounds' figures as one markdown table: medians per column, and
//! smolcord ÷ twilight where twilight ran.

use crate::child::{Client, Idle, Run, Startup, MAX_CONCURRENCY};
use crate::{Args, DISCORD_WINDOW};
use std::time::Duration;

/// One client's side-by-side runs: 1 shard and N shards, a run per round.
pub struct Column {
    pub client: Client,
    pub one: Vec<Run>,
    pub many: Vec<Run>,
}

impl Column {
    pub fn new(client: Client) -> Column {
        Column {
            client,
            one: Vec::new(),
            many: Vec::new(),
        }
    }

    /// (RSS_N − RSS_1) / (N − 1) per round, KiB.
    fn per_extra_shard(&self, shards: u32) -> Vec<f64> {
        let rss = |run: &Run| run.idle.as_ref().map(|idle| idle.rss_kib as f64);
        self.one
            .iter()
            .zip(&self.many)
            .filter_map(|(one, many)| Some((rss(many)? - rss(one)?) / f64::from(shards - 1)))
            .collect()
    }
}

/// Every round's runs.
pub struct Results {
    /// smolcord, N shards, the shortened window.
    pub fast: Vec<Startup>,
    /// The side by side, W = 5 s.
    pub columns: Vec<Column>,
    /// Two bot processes on one queue.
    pub processes: Vec<Startup>,
    /// Runs that failed (reported as they happened).
    pub failures: usize,
}

impl Results {
    /// Keeps a run in the list `into` picks, or counts its failure.
    pub fn keep<T>(
        &mut self,
        run: Result<T, String>,
        into: impl FnOnce(&mut Results) -> &mut Vec<T>,
    ) {
        match run {
            Ok(run) => into(self).push(run),
            Err(_) => self.failures += 1,
        }
    }
}

fn median(values: &[f64]) -> Option<f64> {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[n / 2]),
        n => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// `median [min–max]` of the rounds' values (the median alone for one).
fn spread(values: &[f64], show: fn(f64) -> String) -> String {
    let Some(median) = median(values) else {
        return "—".into();
    };
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() == 1 {
        show(median)
    } else {
        format!("{} [{}–{}]", show(median), show(min), show(max))
    }
}

fn seconds(s: f64) -> String {
    format!("{s:.2} s")
}

fn kib(k: f64) -> String {
    format!("{k:.0} KiB")
}

fn mib(k: f64) -> String {
    format!("{:.2} MiB", k / 1024.0)
}

fn per_min(w: f64) -> String {
    format!("{w:.1}")
}

/// "refused / too early" over all runs, "—" without runs.
fn refusals(runs: &[&Startup]) -> String {
    if runs.is_empty() {
        return "—".into();
    }
    let refused: u64 = runs.iter().map(|s| s.refused).sum();
    let too_early: u64 = runs.iter().map(|s| s.too_early).sum();
    format!("{refused} / {too_early}")
}

/// The shortest gap between two identifies of a bucket over all runs.
fn shortest_gap(runs: &[&Startup]) -> String {
    runs.iter()
        .filter_map(|s| s.min_gap_ms)
        .min_by(f64::total_cmp)
        .map_or("—".into(), |ms| seconds(ms / 1000.0))
}

fn first_to_last(runs: &[&Startup]) -> Vec<f64> {
    runs.iter().map(|s| s.first_to_last.as_secs_f64()).collect()
}

/// A figure of each idle run.
fn idle(runs: &[Run], figure: impl Fn(&Idle) -> f64) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| r.idle.as_ref())
        .map(figure)
        .collect()
}

/// The table's rows, written as they come.
struct Table {
    columns: usize,
    /// Index of twilight's column, for the ratio.
    twilight: Option<usize>,
}

impl Table {
    fn row(&self, label: &str, cells: Vec<String>) {
        self.row_with_ratio(label, cells, None);
    }

    /// A row whose ratio is smolcord's median ÷ twilight's.
    fn row_with_ratio(&self, label: &str, cells: Vec<String>, values: Option<&[Vec<f64>]>) {
        let mut line = format!("| {label} |");
        for cell in cells {
            line += &format!(" {cell} |");
        }
        if let Some(t) = self.twilight {
            let ratio = match values.map(|v| (median(&v[0]), median(&v[t]))) {
                Some((Some(s), Some(t))) if t != 0.0 => format!("{:.2}", s / t),
                _ => String::new(),
            };
            line += &format!(" {ratio} |");
        }
        println!("{line}");
    }

    /// A figure of every column (its rounds' values), with the ratio.
    fn figure(&self, label: &str, values: Vec<Vec<f64>>, show: fn(f64) -> String) {
        let cells = values.iter().map(|v| spread(v, show)).collect();
        self.row_with_ratio(label, cells, Some(&values));
    }

    /// `value` in column `index`, "—" elsewhere.
    fn only(&self, index: usize, value: String) -> Vec<String> {
        let mut cells = vec!["—".to_owned(); self.columns];
        cells[index] = value;
        cells
    }
}

fn minimum(shards: u32, window: Duration) -> f64 {
    (window * (shards.div_ceil(MAX_CONCURRENCY) - 1)).as_secs_f64()
}

pub fn print(args: &Args, results: &Results) {
    let n = args.shards;
    let columns = &results.columns;
    let table = Table {
        columns: columns.len(),
        twilight: columns
            .iter()
            .position(|c| matches!(c.client, Client::Twilight(_))),
    };
    let mut header = format!("| figure (median [min–max] of {} rounds) |", args.rounds);
    let mut rule = "|---|".to_owned();
    for column in columns {
        header += &format!(" {} |", column.client.name());
        rule += "---|";
    }
    if table.twilight.is_some() {
        header += " smolcord ÷ twilight |";
        rule += "---|";
    }
    println!("\n{header}\n{rule}");

    if !args.skip("fast") {
        let fast: Vec<&Startup> = results.fast.iter().collect();
        let w = args.fast_window;
        table.row(
            &format!(
                "all {n} READY after the first identify, W = {} s (minimum {:.2} s)",
                w.as_secs_f64(),
                minimum(n, w)
            ),
            table.only(0, spread(&first_to_last(&fast), seconds)),
        );
        table.row(
            &format!(
                "identifies refused (op 9) / too early, W = {} s, all rounds",
                w.as_secs_f64()
            ),
            table.only(0, refusals(&fast)),
        );
    }

    if !args.skip("side") {
        fn many(c: &Column) -> Vec<&Startup> {
            c.many.iter().map(|r| &r.startup).collect()
        }
        table.figure(
            &format!(
                "all {n} READY after the first identify, W = 5 s (minimum {:.2} s)",
                minimum(n, DISCORD_WINDOW)
            ),
            columns.iter().map(|c| first_to_last(&many(c))).collect(),
            seconds,
        );
        table.figure(
            &format!("process start → all {n} READY, W = 5 s"),
            columns
                .iter()
                .map(|c| {
                    many(c)
                        .iter()
                        .map(|s| s.spawn_to_last.as_secs_f64())
                        .collect()
                })
                .collect(),
            seconds,
        );
        table.row(
            "identifies refused (op 9) / too early, W = 5 s, all rounds",
            columns.iter().map(|c| refusals(&many(c))).collect(),
        );
        table.row(
            "shortest gap between two identifies of a bucket, all rounds",
            columns.iter().map(|c| shortest_gap(&many(c))).collect(),
        );
        let rss = |runs: &[Run]| idle(runs, |i| i.rss_kib as f64);
        table.figure(
            "RSS idle, 1 shard",
            columns.iter().map(|c| rss(&c.one)).collect(),
            mib,
        );
        table.figure(
            &format!("RSS idle, {n} shards"),
            columns.iter().map(|c| rss(&c.many)).collect(),
            mib,
        );
        table.figure(
            &format!(
                "per extra shard, (RSS{n} − RSS1) / {} (goal ≤ 150 KiB)",
                n - 1
            ),
            columns.iter().map(|c| c.per_extra_shard(n)).collect(),
            kib,
        );
        table.row(
            &format!("threads, {n} shards"),
            columns
                .iter()
                .map(|c| {
                    c.many
                        .last()
                        .and_then(|r| r.idle.as_ref())
                        .map_or("—".into(), |i| i.threads.clone())
                })
                .collect(),
        );
        let wakeups = |runs: &[Run]| idle(runs, Idle::per_min);
        table.figure(
            "wake-ups/min, 1 shard",
            columns.iter().map(|c| wakeups(&c.one)).collect(),
            per_min,
        );
        table.figure(
            &format!("wake-ups/min, {n} shards"),
            columns.iter().map(|c| wakeups(&c.many)).collect(),
            per_min,
        );
        let beats = |runs: &[Run]| idle(runs, |i| i.beats as f64 * 60.0 / i.window.as_secs_f64());
        table.row(
            &format!("heartbeats/min the simulator got, {n} shards"),
            columns
                .iter()
                .map(|c| spread(&beats(&c.many), per_min))
                .collect(),
        );
    }

    let bot = columns
        .iter()
        .position(|c| matches!(c.client, Client::Bot(_)));
    if let (false, Some(bot)) = (args.skip("processes"), bot) {
        let runs: Vec<&Startup> = results.processes.iter().collect();
        let w = args.processes_window();
        let queue = match &args.queue.url {
            Some(url) => format!("queue {url}"),
            None => "the simulator's queue stand-in".to_owned(),
        };
        let what = format!(
            "two processes of {} shards, {queue}, W = {} s",
            n / 2,
            w.as_secs_f64()
        );
        table.row(
            &format!(
                "{what}: all READY after the first identify (minimum {:.2} s)",
                minimum(n, w)
            ),
            table.only(bot, spread(&first_to_last(&runs), seconds)),
        );
        table.row(
            &format!("{what}: refused (op 9) / too early, all rounds"),
            table.only(bot, refusals(&runs)),
        );
        table.row(
            &format!("{what}: shortest gap between two identifies of a bucket"),
            table.only(bot, shortest_gap(&runs)),
        );
    }
    if results.failures > 0 {
        println!(
            "\n{} run(s) FAILED (see above); medians are over the rest",
            results.failures
        );
    }
}
