//! Every benchmark example runs as written, at its smallest size: a
//! benchmark that no longer starts (a renamed flag, a simulator change)
//! would otherwise be found only by the next person measuring. The figures
//! themselves come from release builds (docs/performance.md); here only that
//! each runs to its report. `crates/smolcord/examples/bot.rs` has a test of its own
//! (crates/smolcord-app/tests/app/example_bot.rs); `footprint`, `offload_bench` and `shards_bench`
//! measure idle minutes and fixed phases (20 s to 2 min) and are left to
//! their own commands.
#![allow(clippy::disallowed_methods)] // runs child processes

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;
use support::binary::{example, Smolcord};

const BOUND: Duration = Duration::from_secs(120);

/// Runs example `name` with `args`; its stdout, after a successful exit.
fn run(name: &str, args: &[&str]) -> String {
    let mut command = Command::new(example(name));
    command.args(args).stdin(Stdio::null());
    let mut child = Smolcord::start(command);
    let status = child.wait(BOUND);
    let stdout = child.stdout();
    assert!(
        status.success(),
        "{name} {args:?}: {status}\n{stdout}\n{}",
        child.stderr()
    );
    stdout
}

#[test]
fn heartbeat_bench_reports_both_phases() {
    let out = run("heartbeat_bench", &["1"]);
    assert!(out.contains("idle ") && out.contains("busy ("), "{out}");
    assert!(out.contains("client account:"), "{out}");
}

#[test]
fn shard_heap_reports_the_cost_per_shard() {
    let out = run("shard_heap", &["2", "1"]);
    assert!(out.contains("per extra shard"), "{out}");
}

#[test]
fn soak_loses_and_duplicates_nothing_in_a_short_run() {
    let out = run("soak", &["5"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("replies delivered / lost / duplicated:"))
        .unwrap_or_else(|| panic!("no replies line:\n{out}"));
    assert!(line.contains(" / 0 / 0 "), "{line}");
}

#[test]
fn flood_bench_runs_a_tiny_round() {
    let out = run(
        "flood_bench",
        &[
            "--rounds",
            "1",
            "--hostile-rounds",
            "0",
            "--burst",
            "2000",
            "--overrun",
            "2000",
        ],
    );
    assert!(out.contains("once, in order: yes"), "{out}");
    assert!(!out.contains("once, in order: no"), "{out}");
}
