//! serenity run against `smolcord sim` (see run.sh).
//!
//! serenity has no gateway URL setting: `HttpBuilder::proxy` points its
//! REST at the simulator, and the client takes the gateway URL from
//! `GET /api/v10/gateway`. The handler waits for READY, injects a DM
//! through the control API, answers it with `ChannelId::say`; main then
//! lets the client run until the simulator has counted `--beats`
//! heartbeats, and shuts the shards down. Every wait is bounded. Writes
//! `{"channel_id", "reply", "failure", "version"}` to `--result`.

mod control;

use control::Control;
use serde_json::json;
use serenity::all::{
    ClientBuilder, Context, EventHandler, GatewayIntents, HttpBuilder, Message, Ready, UserId,
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
        beats: take("beats")?.parse().map_err(|e| format!("--beats: {e}"))?,
        heartbeat: Duration::from_millis(
            take("heartbeat-ms")?.parse().map_err(|e| format!("--heartbeat-ms: {e}"))?,
        ),
        timeout: Duration::from_secs(take("timeout")?.parse().map_err(|e| format!("--timeout: {e}"))?),
        result: take("result")?,
    })
}

/// What the handler tells main.
enum Step {
    Ready,
    Replied(Result<(), String>),
}

struct Handler {
    control: Control,
    nonce: String,
    reply: String,
    me: Mutex<Option<UserId>>,
    channel_id: Arc<Mutex<Option<String>>>,
    steps: mpsc::UnboundedSender<Step>,
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        eprintln!("READY as {} ({})", ready.user.name, ready.user.id);
        let first = self.me.lock().map(|mut me| me.replace(ready.user.id).is_none()).unwrap_or(false);
        let _ = self.steps.send(Step::Ready);
        if !first {
            return;
        }
        let body = json!({"author_id": "4242", "author_name": "compat-alice", "content": self.nonce});
        match self.control.call("POST", "/dm", Some(&body)).await {
            Ok(answer) => {
                let channel = answer["channel_id"].as_str().map(str::to_owned);
                eprintln!("DM injected in channel {channel:?}");
                if let Ok(mut slot) = self.channel_id.lock() {
                    *slot = channel;
                }
            }
            Err(err) => {
                let _ = self.steps.send(Step::Replied(Err(err)));
            }
        }
    }

    async fn message(&self, ctx: Context, message: Message) {
        let me = self.me.lock().ok().and_then(|me| *me);
        if Some(message.author.id) == me {
            return; // our own reply, echoed back as MESSAGE_CREATE
        }
        if message.content != self.nonce {
            eprintln!("ignoring message {:?}", message.content);
            return;
        }
        eprintln!("got the DM from {} in {}", message.author.name, message.channel_id);
        let outcome = match message.channel_id.say(&ctx.http, &self.reply).await {
            Ok(sent) if sent.content == self.reply => {
                eprintln!("replied: message {}", sent.id);
                Ok(())
            }
            Ok(sent) => Err(format!("REST answered content {:?}", sent.content)),
            Err(err) => Err(format!("say failed: {err}")),
        };
        let _ = self.steps.send(Step::Replied(outcome));
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
    let failure = run(&args, nonce, reply.clone(), channel_id.clone()).await.err();
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
                    let what = if ready { "the DM (or the reply)" } else { "READY" };
                    format!("no {what} within {:?}", args.timeout)
                })?
                .ok_or("the client stopped")?;
            match step {
                Step::Ready => ready = true,
                Step::Replied(result) => break result,
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
