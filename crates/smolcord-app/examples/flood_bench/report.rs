//! Collects the runs and prints issue 11's table (medians over rounds, with
//! smolcord ÷ twilight ratios: the median of each round's ratio, since the
//! two ran seconds apart under the same load), the server's own figures
//! that show it is not the bottleneck, and the issue's goals checked
//! against the medians.

use crate::compression::Wire;
use crate::run::{self, Case, Client, ClientLogs, Outcome, INTERVAL};
use crate::server::{Mode, Server};
use crate::ws;
use crate::Args;
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The server alone, flooding a reader that parses nothing.
pub struct Ceiling {
    pub events_per_sec: f64,
    pub bytes_per_event: f64,
}

/// Floods a raw reader (handshake, Identify, one beat, then read and
/// discard) and times how fast the server writes all the events: the rate
/// no client can beat, to compare every client's rate with.
pub fn sink_ceiling(case: Case, compress: Wire) -> Result<Ceiling, String> {
    let (Case::Burst(events) | Case::Overrun(events)) = case else {
        return Err("not a flood".into());
    };
    let mut server = Server::start(
        Mode::Flood {
            events,
            end_marker: false,
        },
        INTERVAL,
    )
    .map_err(|e| e.to_string())?;
    let addr = server.addr();
    let mut stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let target = compress.target();
    ws::connect(&mut stream, &addr.to_string(), target).map_err(|e| e.to_string())?;
    let mut hello = Vec::new();
    ws::push_client_text(
        &mut hello,
        r#"{"op":2,"d":{"token":"x","intents":0,"properties":{}}}"#,
    );
    ws::push_client_text(&mut hello, r#"{"op":1,"d":null}"#);
    std::io::Write::write_all(&mut stream, &hello).map_err(|e| e.to_string())?;
    let mut sink = stream.try_clone().map_err(|e| e.to_string())?;
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        while matches!(sink.read(&mut buf), Ok(n) if n > 0) {}
    });
    let until = Instant::now() + Duration::from_secs(120);
    let log = loop {
        let log = server.logs().into_iter().next().unwrap_or_default();
        if log.flood_written.is_some() || Instant::now() > until {
            break log;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    server.stop();
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = reader.join();
    let (Some(start), Some(end)) = (log.flood_started, log.flood_written) else {
        return Err("the server did not finish within 120 s".into());
    };
    Ok(Ceiling {
        events_per_sec: events as f64 / (end - start).as_secs_f64().max(1e-9),
        bytes_per_event: log.bytes_written as f64 / events as f64,
    })
}

#[derive(Default)]
pub struct Results {
    pub ceilings: Vec<(Case, Wire, Ceiling)>,
    pub logs: ClientLogs,
    /// (round, client, case, wire, outcome)
    runs: Vec<(u32, &'static str, Case, Wire, Outcome)>,
}

fn kind(compress: Wire) -> &'static str {
    compress.name()
}

fn mib(kib: f64) -> String {
    format!("{:.1}", kib / 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

/// `1234567` as `1 234 567`.
fn grouped(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

type Figure = fn(&Outcome) -> Option<f64>;

fn rss(o: &Outcome) -> Option<f64> {
    o.peak_rss_kib.map(|k| k as f64)
}
fn gap(o: &Outcome) -> Option<f64> {
    o.max_gap.map(|d| d.as_secs_f64() * 1000.0)
}
fn first_beat(o: &Outcome) -> Option<f64> {
    o.first_beat.map(|d| d.as_secs_f64() * 1000.0)
}
fn rate(o: &Outcome) -> Option<f64> {
    o.events_per_sec
}
fn wire_bytes(o: &Outcome) -> Option<f64> {
    o.bytes_per_event
}
fn cpu(o: &Outcome) -> Option<f64> {
    o.cpu_per_event.map(|d| d.as_secs_f64() * 1e6)
}
fn written(o: &Outcome) -> Option<f64> {
    o.written_after.map(|d| d.as_secs_f64())
}
fn in_write(o: &Outcome) -> Option<f64> {
    o.in_write_share.map(|s| s * 100.0)
}
fn dropped(o: &Outcome) -> Option<f64> {
    o.dropped_after.map(|d| d.as_secs_f64())
}
fn back(o: &Outcome) -> Option<f64> {
    o.back_after.map(|d| d.as_secs_f64())
}
fn owed(o: &Outcome) -> Option<f64> {
    o.pongs_owed.map(|n| n as f64)
}

impl Results {
    pub fn run(&mut self, round: u32, client: &Client, case: Case, compress: Wire) {
        let tag = format!(
            "r{round}-{}-{}-{}",
            case.name(),
            kind(compress),
            client.name().replace(' ', "-")
        );
        let outcome = run::measure(client, case, compress, &self.logs, &tag);
        eprintln!(
            "round {round} {:<28} {:<5} {:<14} RSS {:>7} MiB  gap {:>6} ms  first beat {:>6} ms  beats {:>3}  {:>9} events/s  {:>5} µs CPU/event  once/in order {:<3}  server wrote all after {:>6} s ({:>3} % in write)  — {}",
            case.name(),
            kind(compress),
            client.name(),
            rss(&outcome).map_or("-".into(), mib),
            outcome.max_gap.map_or("-".into(), ms),
            outcome.first_beat.map_or("-".into(), ms),
            outcome.beats,
            outcome.events_per_sec.map_or("-".into(), grouped),
            cpu(&outcome).map_or("-".into(), |v| format!("{v:.2}")),
            outcome.once_in_order.map_or("-", |ok| if ok { "yes" } else { "NO" }),
            outcome.written_after.map_or("-".into(), |d| format!("{:.2}", d.as_secs_f64())),
            in_write(&outcome).map_or("-".into(), |p| format!("{p:.0}")),
            outcome.verdict,
        );
        if let (Some(dropped), Some(back)) = (outcome.dropped_after, outcome.back_after) {
            eprintln!(
                "        dropped the connection {:.2} s and reconnected {:.2} s after the server stopped reading{}",
                dropped.as_secs_f64(),
                back.as_secs_f64(),
                outcome
                    .pongs_owed
                    .map_or(String::new(), |n| format!(" ({n} pongs still owed then)")),
            );
        }
        self.runs
            .push((round, client.name(), case, compress, outcome));
        // Let the machine settle (sockets, page cache) between runs.
        std::thread::sleep(Duration::from_millis(500));
    }

    fn outcomes<'a>(
        &'a self,
        client: &'a str,
        case: Case,
        compress: Wire,
    ) -> impl Iterator<Item = &'a Outcome> + 'a {
        self.rounds(client, case, compress).map(|(_, o)| o)
    }

    fn rounds<'a>(
        &'a self,
        client: &'a str,
        case: Case,
        compress: Wire,
    ) -> impl Iterator<Item = (u32, &'a Outcome)> + 'a {
        self.runs
            .iter()
            .filter(move |(_, c, k, z, _)| *c == client && *k == case && *z == compress)
            .map(|(round, _, _, _, o)| (*round, o))
    }

    /// `client`'s figure ÷ twilight's, round by round (the two ran a few
    /// seconds apart, under the same load), and the median of those.
    fn ratio(&self, client: &str, case: Case, compress: Wire, figure: Figure) -> Option<f64> {
        let twilight: Vec<(u32, f64)> = self
            .rounds("twilight", case, compress)
            .filter_map(|(round, o)| Some((round, figure(o)?)))
            .collect();
        median(
            self.rounds(client, case, compress)
                .filter_map(|(round, o)| {
                    let a = figure(o)?;
                    let (_, b) = twilight.iter().find(|(r, _)| *r == round)?;
                    (*b > 0.0).then(|| a / b)
                })
                .collect(),
        )
    }

    fn median(&self, client: &str, case: Case, compress: Wire, figure: Figure) -> Option<f64> {
        median(
            self.outcomes(client, case, compress)
                .filter_map(figure)
                .collect(),
        )
    }

    /// `yes` if every round delivered once in order, `NO` if one did not.
    fn delivered(&self, client: &str, case: Case, compress: Wire) -> &'static str {
        let all: Vec<Option<bool>> = self
            .outcomes(client, case, compress)
            .map(|o| o.once_in_order)
            .collect();
        if all.is_empty() {
            "—"
        } else if all.iter().all(|o| *o == Some(true)) {
            "yes"
        } else {
            "NO"
        }
    }

    fn verdicts(&self, client: &str, case: Case) -> String {
        let mut seen: Vec<String> = Vec::new();
        for outcome in self.outcomes(client, case, Wire::Plain) {
            if !seen.contains(&outcome.verdict) {
                seen.push(outcome.verdict.clone());
            }
        }
        seen.join(" / ")
    }

    pub fn print(&self, clients: &[Client], floods: &[Case], hostile: &[Case], args: &Args) {
        let names: Vec<&str> = clients.iter().map(Client::name).collect();
        let twilight = names.contains(&"twilight");
        let smolcords: Vec<&str> = names.iter().copied().filter(|n| *n != "twilight").collect();
        println!();
        println!(
            "## flood_bench: medians of {} round(s) (hostile cases: {}; ratios: the median of each round's), heartbeat interval {} ms",
            args.rounds,
            args.hostile_rounds,
            INTERVAL.as_millis()
        );
        if !twilight {
            println!("(the twilight peer was not measured: smolcord's rows only)");
        }
        println!();
        let mut header = String::from("| case |");
        let mut rule = String::from("|---|");
        for name in &names {
            header += &format!(" {name} |");
            rule += "---|";
        }
        if twilight {
            for name in &smolcords {
                header += &format!(" {} ÷ twilight |", name.trim_start_matches("smolcord "));
                rule += "---|";
            }
        }
        println!("{header}\n{rule}");

        // A row of "plain / zlib / zstd" cells (flood cases) with ratios.
        let pair_row = |label: String,
                        case: Case,
                        figure: Figure,
                        show: &dyn Fn(f64) -> String,
                        unit: &str| {
            let mut row = format!("| {label} |");
            for name in &names {
                let cell: Vec<String> = Wire::ALL
                    .iter()
                    .map(|z| self.median(name, case, *z, figure).map_or("—".into(), show))
                    .collect();
                row += &format!(" {}{unit} |", cell.join(" / "));
            }
            if twilight {
                for name in &smolcords {
                    let cell: Vec<String> = Wire::ALL
                        .iter()
                        .map(|z| {
                            self.ratio(name, case, *z, figure)
                                .map_or("—".into(), |r| format!("{r:.2}×"))
                        })
                        .collect();
                    row += &format!(" {} |", cell.join(" / "));
                }
            }
            println!("{row}");
        };
        for case in floods {
            let (Case::Burst(n) | Case::Overrun(n)) = *case else {
                continue;
            };
            let what = match case {
                Case::Burst(_) => "at line rate",
                _ => "faster than the client reads",
            };
            let title = format!("{} {} events {what}", case.name(), grouped(n as f64));
            pair_row(
                format!("{title}: peak RSS, plain / zlib-stream / zstd-stream"),
                *case,
                rss,
                &mib,
                " MiB",
            );
            pair_row(
                format!(
                    "{}: heartbeat max gap during the flood, plain / zlib / zstd",
                    case.name()
                ),
                *case,
                gap,
                &|v| format!("{v:.0}"),
                " ms",
            );
            pair_row(
                format!(
                    "{}: first beat after the flood began, plain / zlib / zstd",
                    case.name()
                ),
                *case,
                first_beat,
                &|v| format!("{v:.0}"),
                " ms",
            );
            pair_row(
                format!("{}: throughput, events/s, plain / zlib / zstd", case.name()),
                *case,
                rate,
                &grouped,
                "",
            );
            pair_row(
                format!("{}: CPU time per event, plain / zlib / zstd", case.name()),
                *case,
                cpu,
                &|v| format!("{v:.2}"),
                " µs",
            );
            pair_row(
                format!(
                    "{}: bytes per event on the wire, plain / zlib / zstd",
                    case.name()
                ),
                *case,
                wire_bytes,
                &|v| format!("{v:.0}"),
                "",
            );
            let mut row = format!(
                "| {}: every event once, in order, plain / zlib / zstd |",
                case.name()
            );
            for name in &names {
                let cell: Vec<&str> = Wire::ALL
                    .iter()
                    .map(|wire| self.delivered(name, *case, *wire))
                    .collect();
                row += &format!(" {} |", cell.join(" / "));
            }
            if twilight {
                row += &" |".repeat(smolcords.len());
            }
            println!("{row}");
        }
        for case in hostile {
            let title = match case {
                Case::PingFlood(n) => format!(
                    "{} pings of 125 bytes, server keeps reading",
                    grouped(*n as f64)
                ),
                Case::PingsThenStop(n) => {
                    let owed = median(
                        names
                            .iter()
                            .flat_map(|name| self.outcomes(name, *case, Wire::Plain))
                            .filter_map(owed)
                            .collect(),
                    );
                    format!(
                        "{} pings, then the server stops reading ({} pongs still owed)",
                        grouped(*n as f64),
                        owed.map_or("—".into(), grouped)
                    )
                }
                Case::StopThenPings(n) => format!(
                    "the server stops reading, then sends {} pings",
                    grouped(*n as f64)
                ),
                Case::Huge { bytes, fragment } => format!(
                    "one {} MiB message in {} MiB fragments",
                    bytes / (1024 * 1024),
                    fragment / (1024 * 1024)
                ),
                _ => continue,
            };
            let mut row = format!("| {title}: outcome |");
            for name in &names {
                row += &format!(" {} |", self.verdicts(name, *case));
            }
            if twilight {
                row += &" |".repeat(smolcords.len());
            }
            println!("{row}");
            // A server that does not read sees no beat: there, how soon
            // the client left instead.
            let stops = matches!(case, Case::StopThenPings(_) | Case::PingsThenStop(_));
            let mut row = String::from(if stops {
                "| same: peak RSS; dropped the connection / reconnected, after the server stopped reading |"
            } else {
                "| same: peak RSS; heartbeat max gap |"
            });
            let secs = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.2}"));
            for name in &names {
                let r = self
                    .median(name, *case, Wire::Plain, rss)
                    .map_or("—".into(), mib);
                if stops {
                    let d = secs(self.median(name, *case, Wire::Plain, dropped));
                    let b = secs(self.median(name, *case, Wire::Plain, back));
                    row += &format!(" {r} MiB; {d} s / {b} s |");
                } else {
                    let g = self
                        .median(name, *case, Wire::Plain, gap)
                        .map_or("—".into(), |v| format!("{v:.0}"));
                    row += &format!(" {r} MiB; {g} ms |");
                }
            }
            if twilight {
                row += &" |".repeat(smolcords.len());
            }
            println!("{row}");
        }

        println!();
        println!("server (not the bottleneck): a raw reader that parses nothing takes");
        for (case, compress, ceiling) in &self.ceilings {
            println!(
                "  {:<8} {:<5} {:>11} events/s ({:.0} bytes/event on the wire)",
                case.name(),
                kind(*compress),
                grouped(ceiling.events_per_sec),
                ceiling.bytes_per_event
            );
        }
        println!("  and with each client, the server had written the last event after (s; share of that time inside write(), blocked on a full socket):");
        for case in floods {
            for compress in Wire::ALL {
                let cells: Vec<String> = names
                    .iter()
                    .map(|name| {
                        format!(
                            "{name} {} s ({} %)",
                            self.median(name, *case, compress, written)
                                .map_or("—".into(), |v| format!("{v:.2}")),
                            self.median(name, *case, compress, in_write)
                                .map_or("—".into(), |v| format!("{v:.0}"))
                        )
                    })
                    .collect();
                println!(
                    "  {:<8} {:<5} {}",
                    case.name(),
                    kind(compress),
                    cells.join(", ")
                );
            }
        }
        self.print_goals(floods, hostile, twilight);
    }

    fn print_goals(&self, floods: &[Case], hostile: &[Case], twilight: bool) {
        println!();
        println!("issue 11 goals against the medians:");
        let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
        let gap_bound = INTERVAL.as_secs_f64() * 1000.0 * 1.1;
        for case in floods {
            for (client, rss_goal) in [("smolcord shard", 5.0), ("smolcord run", 8.0)] {
                for compress in Wire::ALL {
                    let r = self.median(client, *case, compress, rss);
                    let g = self.median(client, *case, compress, gap);
                    if r.is_none() && g.is_none() {
                        continue;
                    }
                    println!(
                        "  {:<8} {:<5} {client:<15} peak RSS ≤ {rss_goal} MiB: {} ({} MiB); heartbeat max gap ≤ {gap_bound:.0} ms: {} ({} ms); once, in order: {}",
                        case.name(),
                        kind(compress),
                        verdict(r.is_some_and(|r| r / 1024.0 <= rss_goal)),
                        r.map_or("—".into(), mib),
                        verdict(g.is_some_and(|g| g <= gap_bound)),
                        g.map_or("—".into(), |v| format!("{v:.0}")),
                        self.delivered(client, *case, compress),
                    );
                }
            }
            if twilight {
                for (compress, goal) in [(Wire::Plain, 1.4), (Wire::Zlib, 1.2), (Wire::Zstd, 1.2)] {
                    let ratio = self.ratio("smolcord shard", *case, compress, rate);
                    // The same from CPU time per event (twilight's ÷ ours),
                    // which the machine's other load disturbs far less.
                    let cpu_ratio = self
                        .ratio("smolcord shard", *case, compress, cpu)
                        .filter(|r| *r > 0.0)
                        .map(|r| 1.0 / r);
                    println!(
                        "  {:<8} {:<5} smolcord shard throughput ≥ {goal}× twilight: {} ({}; by CPU time per event: {})",
                        case.name(),
                        kind(compress),
                        verdict(ratio.is_some_and(|r| r >= goal)),
                        ratio.map_or("—".into(), |r| format!("{r:.2}×")),
                        cpu_ratio.map_or("—".into(), |r| format!("{r:.2}×")),
                    );
                }
            }
        }
        let hostile_gap = INTERVAL.as_secs_f64() * 1000.0 * 1.5;
        for case in hostile {
            for client in ["smolcord shard", "smolcord run"] {
                let r = self.median(client, *case, Wire::Plain, rss);
                if r.is_none() {
                    continue;
                }
                let outcomes = self.verdicts(client, *case);
                // The outcome the issue asks for, besides the beat.
                let (wanted, met) = match case {
                    Case::StopThenPings(_) | Case::PingsThenStop(_) => (
                        "leaves the dead connection",
                        outcomes == "left the dead connection",
                    ),
                    Case::Huge { .. } => (
                        "refuses the message",
                        outcomes.starts_with("refused") || outcomes.starts_with("dropped"),
                    ),
                    _ => ("stays connected", outcomes.starts_with("answered")),
                };
                // A server that does not read sees no beat: how soon the
                // client dropped the connection instead.
                let beat = match (case, self.median(client, *case, Wire::Plain, gap)) {
                    (Case::StopThenPings(_) | Case::PingsThenStop(_), _) => format!(
                        "dropped the connection {} s after the server stopped reading; ",
                        self.median(client, *case, Wire::Plain, dropped)
                            .map_or("—".into(), |v| format!("{v:.2}"))
                    ),
                    (_, g) => format!(
                        "heartbeat max gap ≤ {hostile_gap:.0} ms: {} ({} ms); ",
                        verdict(g.is_some_and(|g| g <= hostile_gap)),
                        g.map_or("—".into(), |v| format!("{v:.0}"))
                    ),
                };
                println!(
                    "  {:<28} {client:<15} {beat}{wanted}: {} ({outcomes}); peak RSS {} MiB",
                    case.name(),
                    verdict(met),
                    r.map_or("—".into(), mib),
                );
            }
        }
    }
}
