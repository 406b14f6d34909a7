//! serenity run against `smolcord sim` (see run.sh).
//!
//! serenity has no gateway URL setting: `HttpBuilder::proxy` points its
//! REST at the simulator, and the client takes the gateway URL from
//! `GET /api/v10/gateway`. The handler waits for READY, injects a DM
//! through the control API, answers it with `ChannelId::say`, then
//! receives a voice-note DM (flags, audio attachment, duration, waveform)
//! and a guild message (in a channel from GUILD_CREATE), asks the simulator
//! for an op 7 Reconnect and waits for RESUMED; main then lets the client
//! run until the simulator has counted `--beats` heartbeats on the
//! session's live connection, and shuts the shards down. Every wait is bounded. Writes
//! `{"channel_id", "reply", "failure", "version"}` to `--result`.

// Shared by the Rust clients: the simulator's control API over plain HTTP.
#[path = "../../common/control.rs"]
mod control;

use control::Control;
use serde_json::json;
use serenity::all::{
    ChannelId, ClientBuilder, Context, EventHandler, GatewayIntents, Guild, HttpBuilder, Message,
    MessageFlags, Ready, ResumedEvent, UserId,
};
use serenity::async_trait;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};

const VERSION: &str = "serenity 0.12.5";

struct Args {
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

/// What the handler tells main.
enum Step {
    Ready,
    /// Every step done, or the first failure.
    Done(Result<(), String>),
}

struct Handler {
    control: Control,
    nonce: String,
    reply: String,
    me: Mutex<Option<UserId>>,
    channel_id: Arc<Mutex<Option<String>>>,
    guild_channel: Mutex<Option<ChannelId>>,
    steps: mpsc::UnboundedSender<Step>,
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        eprintln!("READY as {} ({})", ready.user.name, ready.user.id);
        let first = self
            .me
            .lock()
            .map(|mut me| me.replace(ready.user.id).is_none())
            .unwrap_or(false);
        let _ = self.steps.send(Step::Ready);
        if !first {
            return;
        }
        let body =
            json!({"author_id": "4242", "author_name": "compat-alice", "content": self.nonce});
        match self.control.call("POST", "/dm", Some(&body)).await {
            Ok(answer) => {
                let channel = answer["channel_id"].as_str().map(str::to_owned);
                eprintln!("DM injected in channel {channel:?}");
                if let Ok(mut slot) = self.channel_id.lock() {
                    *slot = channel;
                }
            }
            Err(err) => {
                let _ = self.steps.send(Step::Done(Err(err)));
            }
        }
    }

    async fn guild_create(&self, _ctx: Context, guild: Guild, _is_new: Option<bool>) {
        eprintln!(
            "GUILD_CREATE {} with {} channels",
            guild.name,
            guild.channels.len()
        );
        let first = guild
            .channels
            .values()
            .min_by_key(|c| c.position)
            .map(|c| c.id);
        if let Ok(mut slot) = self.guild_channel.lock() {
            *slot = slot.or(first);
        }
    }

    async fn resume(&self, _ctx: Context, _event: ResumedEvent) {
        eprintln!("RESUMED");
        let _ = self.steps.send(Step::Done(Ok(())));
    }

    async fn message(&self, ctx: Context, message: Message) {
        let me = self.me.lock().ok().and_then(|me| *me);
        if Some(message.author.id) == me {
            return; // our own reply, echoed back as MESSAGE_CREATE
        }
        let outcome = if message.content == self.nonce {
            self.answer_dm(&ctx, &message).await
        } else if message
            .flags
            .is_some_and(|f| f.contains(MessageFlags::IS_VOICE_MESSAGE))
        {
            self.voice_note(&message).await
        } else if message.guild_id.is_some() && message.author.name == "compat-bob" {
            eprintln!("got the guild message in {}", message.channel_id);
            let fault = json!({"kind": "reconnect"});
            match self.control.call("POST", "/fault", Some(&fault)).await {
                Ok(_) => {
                    eprintln!("asked the simulator for op 7");
                    Ok(())
                }
                Err(err) => Err(Some(err)),
            }
        } else {
            eprintln!("ignoring message {:?}", message.content);
            Ok(())
        };
        if let Err(Some(failure)) = outcome {
            let _ = self.steps.send(Step::Done(Err(failure)));
        }
    }
}

impl Handler {
    async fn answer_dm(&self, ctx: &Context, message: &Message) -> Result<(), Option<String>> {
        eprintln!(
            "got the DM from {} in {}",
            message.author.name, message.channel_id
        );
        let sent = message
            .channel_id
            .say(&ctx.http, &self.reply)
            .await
            .map_err(|err| format!("say failed: {err}"))?;
        if sent.content != self.reply {
            return Err(Some(format!("REST answered content {:?}", sent.content)));
        }
        eprintln!("replied: message {}", sent.id);
        // "OggS": only the shape of the message matters here.
        let body = json!({"author_id": "4242", "author_name": "compat-alice",
                          "voice_ogg_base64": "T2dnUw==", "duration_secs": 1.5});
        self.control.call("POST", "/dm", Some(&body)).await?;
        Ok(())
    }

    async fn voice_note(&self, message: &Message) -> Result<(), Option<String>> {
        let audio = message.attachments.first().filter(|a| {
            message.attachments.len() == 1
                && a.content_type
                    .as_deref()
                    .is_some_and(|t| t.starts_with("audio/"))
                && a.duration_secs.is_some_and(|d| d > 0.0)
                && a.waveform.as_ref().is_some_and(|w| !w.is_empty())
        });
        let audio =
            audio.ok_or_else(|| format!("voice note looks wrong: {:?}", message.attachments))?;
        eprintln!(
            "got the voice note: {:?}, {:?} s",
            audio.content_type, audio.duration_secs
        );
        let channel = self
            .guild_channel
            .lock()
            .ok()
            .and_then(|c| *c)
            .ok_or_else(|| "no guild channel from GUILD_CREATE".to_owned())?;
        let body = json!({"channel_id": channel.to_string(), "author_id": "4343",
                          "author_name": "compat-bob", "content": "hello guild"});
        self.control
            .call("POST", "/guild-message", Some(&body))
            .await?;
        Ok(())
    }
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
    let nonce = format!("compat-serenity-{}", std::process::id());
    let reply = format!("echo: {nonce}");
    let channel_id = Arc::new(Mutex::new(None));
    let failure = run(&args, nonce, reply.clone(), channel_id.clone())
        .await
        .err();
    let channel_id = channel_id.lock().ok().and_then(|c| c.clone());
    let result = json!({
        "channel_id": channel_id,
        "reply": reply,
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

async fn run(
    args: &Args,
    nonce: String,
    reply: String,
    channel_id: Arc<Mutex<Option<String>>>,
) -> Result<(), String> {
    let proxy = args
        .api
        .strip_suffix("/api/v10")
        .ok_or_else(|| format!("--api {:?} does not end in /api/v10", args.api))?;
    // serenity 0.12.5's ratelimiter builds requests without the proxy
    // (they would go to discord.com); its own docs pair `proxy` with
    // `ratelimiter_disabled(true)`.
    let http = HttpBuilder::new(&args.token)
        .proxy(proxy)
        .ratelimiter_disabled(true)
        .build();
    let (steps_tx, mut steps) = mpsc::unbounded_channel();
    let handler = Handler {
        control: Control::new(&args.control)?,
        nonce,
        reply,
        me: Mutex::new(None),
        channel_id,
        guild_channel: Mutex::new(None),
        steps: steps_tx,
    };
    // Non-privileged only; DM text still arrives (Discord's DM exception).
    let intents =
        GatewayIntents::GUILDS | GatewayIntents::GUILD_MESSAGES | GatewayIntents::DIRECT_MESSAGES;
    let mut client = ClientBuilder::new_with_http(http, intents)
        .event_handler(handler)
        .await
        .map_err(|err| format!("client build failed: {err}"))?;
    let shards = client.shard_manager.clone();
    let runner = tokio::spawn(async move { client.start().await });

    let outcome = async {
        let deadline = Instant::now() + args.timeout;
        let mut ready = false;
        loop {
            let step = timeout_at(deadline, steps.recv())
                .await
                .map_err(|_| {
                    let what = if ready {
                        "the DM (or a later step)"
                    } else {
                        "READY"
                    };
                    format!("no {what} within {:?}", args.timeout)
                })?
                .ok_or("the client stopped")?;
            match step {
                Step::Ready => ready = true,
                Step::Done(result) => break result,
            }
        }?;
        let control = Control::new(&args.control)?;
        let beats_deadline =
            Instant::now() + args.heartbeat * (2 * args.beats as u32) + Duration::from_secs(10);
        loop {
            if runner.is_finished() {
                return Err("the client stopped early".to_owned());
            }
            let seen = control.session_beats().await?;
            if seen >= args.beats {
                eprintln!("the simulator counted {seen} heartbeats");
                return Ok(());
            }
            if Instant::now() > beats_deadline {
                return Err(format!("only {seen} heartbeats seen by the simulator"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    .await;

    shards.shutdown_all().await;
    match tokio::time::timeout(Duration::from_secs(10), runner).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => eprintln!("client ended with {err}"),
        Ok(Err(err)) => eprintln!("client task failed: {err}"),
        Err(_) => eprintln!("client did not stop within 10 s"),
    }
    outcome
}
