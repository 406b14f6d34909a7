//! twilight-gateway + twilight-http run against `smolcord sim` (see run.sh).
//!
//! Connects one shard through `ConfigBuilder::proxy_url`, waits for READY,
//! injects a DM through the control API, answers it with twilight-http
//! (`ClientBuilder::proxy(host, true)`: plain http), then receives a
//! voice-note DM (flags, audio attachment, duration, waveform) and a guild
//! message (in a channel from GUILD_CREATE), asks the simulator for an op 7
//! Reconnect and waits for RESUMED, then keeps polling the shard (twilight
//! only heartbeats while polled) until the simulator has counted `--beats`
//! heartbeats on the session's live connection, and closes. Any gateway error (e.g. a
//! payload twilight-model cannot deserialize) fails the run. Every wait is
//! bounded. Writes `{"channel_id", "reply", "failure", "version"}` to
//! `--result`.

// Shared by the Rust clients: the simulator's control API over plain HTTP.
#[path = "../../common/control.rs"]
mod control;

use control::Control;
use serde_json::json;
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;
use tokio::time::{timeout_at, Instant};
use twilight_gateway::{
    CloseFrame, ConfigBuilder, Event, EventTypeFlags, Intents, Shard, ShardId, StreamExt,
};
use twilight_http::Client;
use twilight_model::channel::message::MessageFlags;
use twilight_model::gateway::payload::incoming::GuildCreate;

const VERSION: &str = "twilight-gateway 0.18.0";

struct Args {
    gateway: String,
    api: String,
    control: String,
    token: String,
    beats: u64,
    heartbeat: Duration,
    timeout: Duration,
    result: String,
}

fn args() -> Result<Args, String> {
    let mut map = HashMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(key) = it.next() {
        let value = it.next().ok_or_else(|| format!("{key} needs a value"))?;
        map.insert(key.trim_start_matches("--").to_owned(), value);
    }
    let mut take = |k: &str| map.remove(k).ok_or_else(|| format!("--{k} is required"));
    Ok(Args {
        gateway: take("gateway")?,
        api: take("api")?,
        control: take("control")?,
        token: take("token")?,
        beats: take("beats")?
            .parse()
            .map_err(|e| format!("--beats: {e}"))?,
        heartbeat: Duration::from_millis(
            take("heartbeat-ms")?
                .parse()
                .map_err(|e| format!("--heartbeat-ms: {e}"))?,
        ),
        timeout: Duration::from_secs(
            take("timeout")?
                .parse()
                .map_err(|e| format!("--timeout: {e}"))?,
        ),
        result: take("result")?,
    })
}

#[derive(Default)]
struct Outcome {
    channel_id: Option<String>,
    reply: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let args = match args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("FAIL: {err}");
            return ExitCode::FAILURE;
        }
    };
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        eprintln!("FAIL: a rustls crypto provider was already installed");
        return ExitCode::FAILURE;
    }
    let mut outcome = Outcome::default();
    let failure = run(&args, &mut outcome).await.err();
    let result = json!({
        "channel_id": outcome.channel_id,
        "reply": outcome.reply,
        "failure": failure,
        "version": VERSION,
    });
    if let Err(err) = std::fs::write(&args.result, result.to_string()) {
        eprintln!("FAIL: cannot write {}: {err}", args.result);
        return ExitCode::FAILURE;
    }
    match failure {
        None => ExitCode::SUCCESS,
        Some(err) => {
            eprintln!("FAIL: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args, outcome: &mut Outcome) -> Result<(), String> {
    let control = Control::new(&args.control)?;
    let host = args
        .api
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/api/v10"))
        .ok_or_else(|| format!("--api {:?} is not http://HOST/api/v10", args.api))?;
    let http = Client::builder()
        .token(args.token.clone())
        .proxy(host.to_owned(), true)
        .timeout(Duration::from_secs(10))
        .build();
    // Non-privileged only; DM text still arrives (Discord's DM exception).
    let intents = Intents::GUILDS | Intents::GUILD_MESSAGES | Intents::DIRECT_MESSAGES;
    let config = ConfigBuilder::new(args.token.clone(), intents)
        .proxy_url(args.gateway.clone())
        .build();
    let mut shard = Shard::with_config(ShardId::ONE, config);

    let nonce = format!("compat-twilight-{}", std::process::id());
    outcome.reply = format!("echo: {nonce}");
    let deadline = Instant::now() + args.timeout;
    let mut me = None;
    let mut guild_channel = None;
    let mut done = false;
    while !done {
        let item = timeout_at(deadline, shard.next_event(EventTypeFlags::all()))
            .await
            .map_err(|_| {
                let what = if me.is_none() { "READY" } else { "the DM" };
                format!("no {what} within {:?}", args.timeout)
            })?
            .ok_or("the shard stream ended (fatal close?)")?;
        let event = item.map_err(|err| format!("gateway error: {err}"))?;
        match event {
            Event::Ready(ready) => {
                eprintln!("READY as {} ({})", ready.user.name, ready.user.id);
                if me.is_none() {
                    let body = json!({"author_id": "4242", "author_name": "compat-alice", "content": nonce});
                    let answer = control.call("POST", "/dm", Some(&body)).await?;
                    outcome.channel_id = answer["channel_id"].as_str().map(str::to_owned);
                    eprintln!("DM injected in channel {:?}", outcome.channel_id);
                }
                me = Some(ready.user.id);
            }
            Event::GuildCreate(guild) => {
                if let GuildCreate::Available(guild) = &*guild {
                    eprintln!(
                        "GUILD_CREATE {} with {} channels",
                        guild.name,
                        guild.channels.len()
                    );
                    guild_channel = guild_channel.or(guild.channels.first().map(|c| c.id));
                }
            }
            Event::MessageCreate(message)
                if message
                    .flags
                    .is_some_and(|f| f.contains(MessageFlags::IS_VOICE_MESSAGE)) =>
            {
                let audio = message.attachments.first().filter(|a| {
                    message.attachments.len() == 1
                        && a.content_type
                            .as_deref()
                            .is_some_and(|t| t.starts_with("audio/"))
                        && a.duration_secs.is_some_and(|d| d > 0.0)
                        && a.waveform.is_some()
                });
                let audio = audio
                    .ok_or_else(|| format!("voice note looks wrong: {:?}", message.attachments))?;
                eprintln!(
                    "got the voice note: {:?}, {:?} s",
                    audio.content_type, audio.duration_secs
                );
                let channel = guild_channel.ok_or("no guild channel from GUILD_CREATE")?;
                let body = json!({"channel_id": channel.to_string(), "author_id": "4343",
                                  "author_name": "compat-bob", "content": "hello guild"});
                control.call("POST", "/guild-message", Some(&body)).await?;
            }
            Event::MessageCreate(message)
                if message.guild_id.is_some() && message.author.name == "compat-bob" =>
            {
                eprintln!("got the guild message in {}", message.channel_id);
                control
                    .call("POST", "/fault", Some(&json!({"kind": "reconnect"})))
                    .await?;
                eprintln!("asked the simulator for op 7");
            }
            Event::Resumed => {
                eprintln!("RESUMED");
                done = true;
            }
            Event::MessageCreate(message) if Some(message.author.id) != me => {
                if message.content != nonce {
                    eprintln!("ignoring message {:?}", message.content);
                    continue;
                }
                eprintln!(
                    "got the DM from {} in {}",
                    message.author.name, message.channel_id
                );
                let sent = http
                    .create_message(message.channel_id)
                    .content(&outcome.reply)
                    .await
                    .map_err(|err| format!("create_message failed: {err}"))?
                    .model()
                    .await
                    .map_err(|err| format!("create_message answer not a Message: {err}"))?;
                if sent.content != outcome.reply {
                    return Err(format!("REST answered content {:?}", sent.content));
                }
                eprintln!("replied: message {}", sent.id);
                // "OggS": only the shape of the message matters here.
                let body = json!({"author_id": "4242", "author_name": "compat-alice",
                                  "voice_ogg_base64": "T2dnUw==", "duration_secs": 1.5});
                control.call("POST", "/dm", Some(&body)).await?;
            }
            // Also twilight's own close before it resumes; a close by the
            // simulator shows in the checker's verdict.
            Event::GatewayClose(frame) => eprintln!("gateway closed: {frame:?}"),
            other => eprintln!("event {:?}", other.kind()),
        }
    }

    // Keep polling the shard (that is what drives its heartbeats) until the
    // simulator has seen enough of them.
    let beats_deadline =
        Instant::now() + args.heartbeat * (2 * args.beats as u32) + Duration::from_secs(10);
    let mut check = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            item = shard.next_event(EventTypeFlags::all()) => {
                match item.ok_or("the shard stream ended")? {
                    Ok(Event::GatewayClose(frame)) => eprintln!("gateway closed: {frame:?}"),
                    Ok(event) => eprintln!("event {:?}", event.kind()),
                    Err(err) => return Err(format!("gateway error: {err}")),
                }
            }
            _ = check.tick() => {
                let seen = control.session_beats().await?;
                if seen >= args.beats {
                    eprintln!("the simulator counted {seen} heartbeats");
                    break;
                }
                if Instant::now() > beats_deadline {
                    return Err(format!("only {seen} heartbeats seen by the simulator"));
                }
            }
        }
    }

    shard.close(CloseFrame::NORMAL);
    let closing = Instant::now() + Duration::from_secs(5);
    // Until our close is echoed (GatewayClose); the shard is dropped after.
    while let Ok(Some(item)) = timeout_at(closing, shard.next_event(EventTypeFlags::all())).await {
        if let Ok(Event::GatewayClose(_)) = item {
            break;
        }
    }
    Ok(())
}
