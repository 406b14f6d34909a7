//! The idle table: smolcord's shard alone, `smolcord run` (the bridge) and
//! the twilight peer, each connected to its own simulator at the same time
//! and sampled over the same window, for several rounds; medians with
//! their range, per-thread wake-ups, and ratios against the last column.
//!
//! Running them side by side in one window means the machine's noise hits
//! all of them alike; a regression shows as a thread name with a number.

use crate::child::{self, Client, Plan, Running};
use crate::procfs::{self, Switches};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One column.
pub struct Contender {
    /// The column header.
    pub label: String,
    /// What runs.
    pub client: Client,
}

/// One contender's figures in one round.
#[derive(Default)]
struct Round {
    per_min: f64,
    preempted_per_min: f64,
    by_thread: BTreeMap<String, f64>,
    threads_seen: f64,
    transient: f64,
    rss_kib: f64,
    anon_kib: f64,
    idle_threads: String,
    beats: f64,
}

/// After READY and the first beat: long enough for the blocking pool's
/// idle threads to exit (they linger 0.5 s) and a start-up write to end.
const SETTLE: Duration = Duration::from_secs(3);

fn one_round(contenders: &[Contender], plan: &Plan) -> Result<Vec<Round>, String> {
    // Start them all at once: each waits for its own jittered first beat.
    let started: Vec<Result<Running, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = contenders
            .iter()
            .map(|c| scope.spawn(|| child::start(&c.client, plan)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("start panicked".into())))
            .collect()
    });
    let mut running = Vec::new();
    for (contender, result) in contenders.iter().zip(started) {
        running.push(result.map_err(|e| format!("{}: {e}", contender.label))?);
    }
    std::thread::sleep(SETTLE);
    let mut rounds: Vec<Round> = Vec::new();
    for r in &running {
        let status = procfs::status(r.pid).map_err(|e| e.to_string())?;
        let threads = procfs::threads(r.pid).map_err(|e| e.to_string())?;
        rounds.push(Round {
            rss_kib: status.rss_kib as f64,
            anon_kib: status.anon_kib as f64,
            idle_threads: procfs::thread_names(&threads),
            ..Round::default()
        });
    }
    let beats_before: Vec<u64> = running.iter().map(Running::beats).collect();
    let mut switches: Vec<Switches> = running.iter().map(|_| Switches::default()).collect();
    let started = Instant::now();
    loop {
        for (s, r) in switches.iter_mut().zip(&running) {
            s.sample(r.pid).map_err(|e| e.to_string())?;
        }
        if started.elapsed() >= plan.window {
            break;
        }
        std::thread::sleep(plan.sample_every);
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    for (i, r) in running.iter().enumerate() {
        let s = &switches[i];
        let round = &mut rounds[i];
        round.per_min = s.voluntary() as f64 / minutes;
        round.preempted_per_min = s.nonvoluntary() as f64 / minutes;
        round.by_thread = s
            .voluntary_by_name()
            .into_iter()
            .map(|(name, n)| (name, n as f64 / minutes))
            .collect();
        round.threads_seen = s.threads_seen() as f64;
        round.transient = s.transient() as f64;
        round.beats = (r.beats() - beats_before[i]) as f64;
    }
    for r in running {
        let _ = r.stop();
    }
    Ok(rounds)
}

fn median(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let mid = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (mid, values[0], values[n - 1])
}

fn cell(values: Vec<f64>, digits: usize) -> (String, f64) {
    let (mid, low, high) = median(values);
    let text = if (high - low).abs() < f64::EPSILON {
        format!("{mid:.digits$}")
    } else {
        format!("{mid:.digits$} [{low:.digits$}–{high:.digits$}]")
    };
    (text, mid)
}

/// Runs `rounds` rounds and prints the table.
pub fn run(contenders: &[Contender], plan: &Plan, rounds: u32) {
    println!(
        "idle, connected: {} ms heartbeat, {} ms round trip, {:.1} s window, every thread sampled every {} ms; median [min–max] of {rounds} rounds, side by side",
        plan.heartbeat.as_millis(),
        plan.rtt.as_millis(),
        plan.window.as_secs_f64(),
        plan.sample_every.as_millis()
    );
    let mut all: Vec<Vec<Round>> = contenders.iter().map(|_| Vec::new()).collect();
    for n in 1..=rounds.max(1) {
        match one_round(contenders, plan) {
            Ok(round) => {
                let line: Vec<String> = contenders
                    .iter()
                    .zip(&round)
                    .map(|(c, r)| format!("{} {:.1}/min", c.label, r.per_min))
                    .collect();
                println!("  round {n}: {}", line.join(", "));
                for (column, r) in all.iter_mut().zip(round) {
                    column.push(r);
                }
            }
            Err(err) => println!("  round {n}: failed: {err}"),
        }
    }
    if all[0].is_empty() {
        return;
    }
    let width = 26;
    let mut header = format!("  {:<24}", "");
    for c in contenders {
        header += &format!("{:<width$}", c.label);
    }
    let ratio_label = match contenders.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            let names: Vec<&str> = rest.iter().map(|c| c.label.as_str()).collect();
            format!("({}) ÷ {}", names.join(" / "), last.label)
        }
        _ => String::new(),
    };
    println!("{header}{ratio_label}");
    let row = |name: &str, pick: &dyn Fn(&Round) -> f64, digits: usize| {
        let cells: Vec<(String, f64)> = all
            .iter()
            .map(|column| cell(column.iter().map(pick).collect(), digits))
            .collect();
        let mut line = format!("  {name:<24}");
        for (text, _) in &cells {
            line += &format!("{text:<width$}");
        }
        if let Some((_, base)) = cells.last().filter(|(_, base)| *base > 0.0) {
            let ratios: Vec<String> = cells[..cells.len() - 1]
                .iter()
                .map(|(_, v)| format!("{:.2}×", v / base))
                .collect();
            line += &ratios.join(" / ");
        }
        println!("{line}");
    };
    row("wake-ups/min, all", &|r| r.per_min, 1);
    let mut families: Vec<String> = all
        .iter()
        .flatten()
        .flat_map(|r| r.by_thread.keys().cloned())
        .collect();
    families.sort();
    families.dedup();
    for family in &families {
        row(
            &format!("  {family}"),
            &|r| r.by_thread.get(family).copied().unwrap_or(0.0),
            1,
        );
    }
    row("preemptions/min", &|r| r.preempted_per_min, 1);
    row("threads seen", &|r| r.threads_seen, 0);
    row("  started+ended inside", &|r| r.transient, 0);
    row("RSS, MiB", &|r| r.rss_kib / 1024.0, 2);
    row("  anon: heap, stacks", &|r| r.anon_kib / 1024.0, 2);
    row(
        "  file (binary, libraries)",
        &|r| (r.rss_kib - r.anon_kib) / 1024.0,
        2,
    );
    row("heartbeats in window", &|r| r.beats, 0);
    let mut line = format!("  {:<24}", "threads when idle");
    for column in &all {
        let names = column.last().map_or("", |r| r.idle_threads.as_str());
        line += &format!("{names:<width$}");
    }
    println!("{line}");
}
