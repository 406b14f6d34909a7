//! Flood benchmark (issue 11): smolcord side by side with twilight-gateway
//! 0.18 under one flood server, each client a child process measured from
//! outside with the same probe.
//!
//! ```text
//! scripts/compat/twilight-flood/run.sh            # builds everything, runs it all
//! cargo build --release --bin smolcord --example flood_bench
//! target/release/examples/flood_bench --twilight target/compat-twilight-flood/bin
//! ```
//!
//! Cases, every one after the client's first heartbeat (500 ms interval):
//!
//! - `burst`: 200 000 MESSAGE_CREATEs at line rate; `overrun`: 1 000 000,
//!   so the server stays far ahead of any client for a long time. Each in
//!   plain text, zlib-stream and zstd-stream, `--rounds` times (medians
//!   printed).
//! - hostile (plain, `--hostile-rounds`): `ping-flood` (1 500 000 pings of
//!   125 bytes; the server keeps reading), `pings-then-stop-reading` (100 000
//!   pings while the server reads, then it stops reading for good with the
//!   pongs still owed piling up: the order issue 11 describes),
//!   `stop-reading-then-pings` (the server stops reading for good, then sends
//!   100 000 pings, so no pong is ever taken off the client's hands); in
//!   both, does the client leave? `big-fragmented-message` (one 60 MiB
//!   message in 8 MiB frames).
//!
//! Clients: `smolcord shard` (this example as `--shard-client`: the
//! library's shard, every MESSAGE_CREATE decoded), `smolcord run` (the
//! bridge binary, temp state dir, REST pointed at a stub) and `twilight`
//! (`--twilight DIR` with the three builds of scripts/compat/twilight-flood;
//! without it, smolcord's rows only). Figures: peak RSS (VmHWM), the
//! heartbeat as the server saw it (max gap from the flood's start until the
//! client had consumed everything, and the first beat after the start),
//! throughput (events over the time from the first event written until the
//! client had consumed the last: its summary line, or for the bridge its
//! REST answer to a final DM), and whether every event came once, in order.
//!
//! Options: `--flood dm|guild` (the flood's messages: DMs from another bot,
//! the default, or a person's messages in a server channel the bridge does
//! not answer in, as GUILD_MESSAGES brings them), `--rounds N` (3),
//! `--hostile-rounds N` (1), `--burst N`,
//! `--overrun N`,
//! `--cases burst,overrun,ping-flood,ping-then-stop,stop-then-ping,big-message`,
//! `--clients shard,run,twilight`, `--smolcord PATH` (default: next to
//! `examples/`), `--twilight DIR`, `--client-log LEVEL` (smolcord's
//! `RUST_LOG`, default `warn`), `--client-logs DIR` (keep each run's client
//! stderr there, e.g. to see why a client left).
// A benchmark driver, not the event loop: it runs std threads and sockets,
// reads /proc and sleeps between samples on purpose.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod compression;
mod payload;
#[path = "../footprint/procfs.rs"]
#[allow(dead_code)]
mod procfs;
mod report;
mod rest_stub;
mod run;
mod server;
mod shard_client;
mod tally;
mod tcp_state;
mod ws;

use compression::Wire;
use run::{Case, Client};
use std::path::{Path, PathBuf};

pub struct Args {
    rounds: u32,
    hostile_rounds: u32,
    burst: u64,
    overrun: u64,
    cases: Vec<String>,
    clients: Vec<String>,
    smolcord: Option<PathBuf>,
    twilight: Option<PathBuf>,
    client_log: String,
    client_logs: Option<PathBuf>,
    shard_client: Option<String>,
    events: u64,
    compress: Wire,
}

fn list(value: String) -> Vec<String> {
    value.split(',').map(|s| s.trim().to_owned()).collect()
}

fn parse() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        rounds: 3,
        hostile_rounds: 1,
        burst: 200_000,
        overrun: 1_000_000,
        cases: list("burst,overrun,ping-flood,ping-then-stop,stop-then-ping,big-message".into()),
        clients: list("shard,run,twilight".into()),
        smolcord: None,
        twilight: None,
        client_log: "warn".into(),
        client_logs: None,
        shard_client: None,
        events: 0,
        compress: Wire::Plain,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("rounds") => args.rounds = parser.value()?.parse()?,
            Long("hostile-rounds") => args.hostile_rounds = parser.value()?.parse()?,
            Long("burst") => args.burst = parser.value()?.parse()?,
            Long("overrun") => args.overrun = parser.value()?.parse()?,
            Long("cases") => args.cases = list(parser.value()?.string()?),
            Long("clients") => args.clients = list(parser.value()?.string()?),
            Long("smolcord") => args.smolcord = Some(parser.value()?.into()),
            Long("twilight") => args.twilight = Some(parser.value()?.into()),
            Long("client-log") => args.client_log = parser.value()?.string()?,
            Long("client-logs") => args.client_logs = Some(parser.value()?.into()),
            // The child side.
            Long("shard-client") => args.shard_client = Some(parser.value()?.string()?),
            Long("events") => args.events = parser.value()?.parse()?,
            Long("flood") => match parser.value()?.string()?.as_str() {
                "guild" => payload::GUILD_FLOOD.store(true, std::sync::atomic::Ordering::Relaxed),
                "dm" => {}
                other => return Err(format!("--flood {other}: dm or guild").into()),
            },
            Long("compress") => {
                let value = parser.value()?.string()?;
                args.compress = Wire::parse(&value).ok_or_else(|| {
                    lexopt::Error::from(format!("--compress {value}: plain, zlib or zstd"))
                })?
            }
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(args)
}

fn main() {
    let args = match parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("flood_bench: {err}");
            std::process::exit(2);
        }
    };
    if let Some(url) = args.shard_client {
        env_logger::init();
        if let Err(err) = shard_client::run(url, args.events, args.compress.compression()) {
            eprintln!("flood_bench shard client: {err}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(err) = payload::self_check() {
        eprintln!("flood_bench: the flood server's own stream is broken: {err}");
        std::process::exit(1);
    }

    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("flood_bench"));
    // target/release/examples/flood_bench -> target/release/smolcord
    let smolcord = args.smolcord.clone().unwrap_or_else(|| {
        me.parent()
            .and_then(Path::parent)
            .map_or_else(|| PathBuf::from("smolcord"), |dir| dir.join("smolcord"))
    });
    let mut clients = Vec::new();
    let wanted = |name: &str| args.clients.iter().any(|c| c == name);
    if wanted("shard") {
        clients.push(Client::Shard(me.clone()));
    }
    if wanted("run") {
        if smolcord.is_file() {
            clients.push(Client::Bridge(smolcord.clone()));
        } else {
            eprintln!(
                "flood_bench: no smolcord binary at {} (build it, or pass --smolcord): `smolcord run` not measured",
                smolcord.display()
            );
        }
    }
    if wanted("twilight") {
        match &args.twilight {
            Some(dir) if Wire::ALL.iter().all(|wire| dir.join(format!("twilight-flood-{}", wire.name())).is_file()) => {
                clients.push(Client::Twilight(dir.clone()))
            }
            Some(dir) => eprintln!(
                "flood_bench: {} lacks twilight-flood-plain / -zlib / -zstd (scripts/compat/twilight-flood/run.sh builds them): smolcord's rows only",
                dir.display()
            ),
            None => eprintln!(
                "flood_bench: the twilight peer is not built (--twilight DIR; scripts/compat/twilight-flood/run.sh): smolcord's rows only"
            ),
        }
    }

    let case_wanted = |name: &str| args.cases.iter().any(|c| c == name);
    let mut flood_cases = Vec::new();
    if case_wanted("burst") {
        flood_cases.push(Case::Burst(args.burst));
    }
    if case_wanted("overrun") {
        flood_cases.push(Case::Overrun(args.overrun));
    }
    let mut hostile_cases = Vec::new();
    if case_wanted("ping-flood") {
        hostile_cases.push(Case::PingFlood(1_500_000));
    }
    if case_wanted("ping-then-stop") {
        hostile_cases.push(Case::PingsThenStop(100_000));
    }
    if case_wanted("stop-then-ping") {
        hostile_cases.push(Case::StopThenPings(100_000));
    }
    if case_wanted("big-message") {
        hostile_cases.push(Case::Huge {
            bytes: 60 * 1024 * 1024,
            fragment: 8 * 1024 * 1024,
        });
    }

    let mut results = report::Results::default();
    results.logs = run::ClientLogs {
        level: args.client_log.clone(),
        keep_in: args.client_logs.clone(),
    };
    for case in &flood_cases {
        for compress in Wire::ALL {
            match report::sink_ceiling(*case, compress) {
                Ok(ceiling) => results.ceilings.push((*case, compress, ceiling)),
                Err(err) => eprintln!("server ceiling {} failed: {err}", case.name()),
            }
        }
    }
    for round in 1..=args.rounds {
        for case in &flood_cases {
            for compress in Wire::ALL {
                for client in &clients {
                    results.run(round, client, *case, compress);
                }
            }
        }
    }
    for round in 1..=args.hostile_rounds {
        for case in &hostile_cases {
            for client in &clients {
                results.run(round, client, *case, Wire::Plain);
            }
        }
    }
    results.print(&clients, &flood_cases, &hostile_cases, &args);
}
