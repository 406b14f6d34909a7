//! `flood_bench --shard-client URL --events N [--compress plain|zlib|zstd]`: smolcord's
//! shard alone as the child under test. It decodes every MESSAGE_CREATE
//! into `smolcord::protocol::Message`, as a real consumer would, checks the
//! sequence numbers, prints the summary line after N of them, and keeps
//! running (heartbeating) until the benchmark ends it.

use crate::tally::Tally;
use smolcord::protocol::{Intents, Message};
use smolcord::shard::{Compression, Shard, ShardConfig, ShardEvent};
use smolcord::token::Token;
use std::io::Write;

pub fn run(gateway_url: String, events: u64, compress: Compression) -> Result<(), String> {
    let token = Token::new("flood-bench-token").ok_or("blank token")?;
    let mut config = ShardConfig::new(token, Intents::DIRECT_MESSAGES);
    config.gateway_url = Some(gateway_url);
    config.compress = compress;
    let (shard, handle) = Shard::new(config);
    let ex = smol::LocalExecutor::new();
    smol::block_on(ex.run(async {
        let _driver = ex.spawn(shard.run());
        let mut tally = Tally::default();
        loop {
            let event = handle.next_event().await.map_err(|e| e.to_string())?;
            let ShardEvent::Dispatch(dispatch) = event else {
                continue;
            };
            if dispatch.name != "MESSAGE_CREATE" {
                continue;
            }
            match dispatch.data::<Message>() {
                Ok(message) => {
                    std::hint::black_box(&message);
                    tally.record(dispatch.seq);
                }
                Err(err) => eprintln!("MESSAGE_CREATE #{} does not decode: {err}", dispatch.seq),
            }
            if tally.count == events {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", tally.line());
                let _ = out.flush();
            }
        }
    }))
}
