//! twilight-flood: the twilight peer of smolcord's flood benchmark
//! (`examples/flood_bench`, issue 11).
//!
//! One twilight-gateway 0.18 shard on single-threaded tokio, connected to
//! `--gateway URL`. Every text message goes through `twilight_gateway::parse`
//! with READY and MESSAGE_CREATE wanted and becomes an `Event`, exactly what
//! `StreamExt::next_event` does, except that the dispatch's sequence number
//! is kept to check the order. After `--events N` MESSAGE_CREATEs it prints
//! the summary line the benchmark reads (the same one smolcord's shard
//! client prints) and keeps polling the shard, which is what keeps twilight
//! heartbeating, until the benchmark kills it.
//!
//! ```text
//! twilight-flood --gateway ws://127.0.0.1:PORT --events 200000
//! flood-summary count=200000 first=2 last=200001 out_of_order=0 duplicates=0 elapsed_ms=812.4
//! ```

// The summary line, shared with smolcord's side of the benchmark.
#[path = "../../../../crates/smolcord-app/examples/flood_bench/tally.rs"]
mod tally;

use futures_core::Stream;
use std::future::poll_fn;
use std::io::Write;
use std::pin::Pin;
use std::process::ExitCode;
use tally::Tally;
use twilight_gateway::{
    parse, ConfigBuilder, Event, EventTypeFlags, Intents, Message, Shard, ShardId,
};
use twilight_model::gateway::event::GatewayEvent;

fn args() -> Result<(String, u64), String> {
    let mut gateway = None;
    let mut events = None;
    let mut it = std::env::args().skip(1);
    while let Some(key) = it.next() {
        let value = it.next().ok_or_else(|| format!("{key} needs a value"))?;
        match key.as_str() {
            "--gateway" => gateway = Some(value),
            "--events" => events = Some(value.parse().map_err(|e| format!("--events: {e}"))?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok((
        gateway.ok_or("--gateway URL is required")?,
        events.ok_or("--events N is required")?,
    ))
}

fn main() -> ExitCode {
    let (gateway, events) = match args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("twilight-flood: {err}");
            return ExitCode::from(2);
        }
    };
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        eprintln!("twilight-flood: a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("twilight-flood: cannot start tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    let err = runtime.block_on(run(gateway, events));
    eprintln!("twilight-flood: {err}");
    ExitCode::FAILURE
}

/// Runs until the shard's stream ends (it only returns the reason).
async fn run(gateway: String, events: u64) -> String {
    let intents = Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES;
    let config = ConfigBuilder::new("flood-bench-token".to_owned(), intents)
        .proxy_url(gateway)
        .build();
    let mut shard = Shard::with_config(ShardId::ONE, config);
    let wanted = EventTypeFlags::READY | EventTypeFlags::MESSAGE_CREATE;
    let mut tally = Tally::default();
    loop {
        let message = match poll_fn(|cx| Pin::new(&mut shard).poll_next(cx)).await {
            None => return "the shard's stream ended".to_owned(),
            // Reported and survived, as a twilight bot would.
            Some(Err(err)) => {
                eprintln!("twilight-flood: receive error: {err}");
                continue;
            }
            Some(Ok(Message::Close(frame))) => {
                eprintln!("twilight-flood: gateway closed: {frame:?}");
                continue;
            }
            Some(Ok(Message::Text(json))) => json,
        };
        let (seq, event) = match parse(message, wanted) {
            Ok(Some(GatewayEvent::Dispatch(seq, dispatch))) => (seq, Event::from(dispatch)),
            Ok(_) => continue,
            Err(err) => {
                eprintln!("twilight-flood: cannot parse an event: {err}");
                continue;
            }
        };
        if let Event::MessageCreate(message) = event {
            std::hint::black_box(&message);
            tally.record(seq);
            if tally.count == events {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", tally.line());
                let _ = out.flush();
            }
        }
    }
}
