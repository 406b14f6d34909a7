//! The demo (`smolcord` with no token): the full bridge against the
//! embedded simulator. A simulated user pairs (approved on the host; a
//! second one by the owner's `/approve` slash command), sends text and a voice note,
//! a second user sends a voice note at the same time, the first sends a
//! photo and a note that the agent reads from disk and answers with a PNG,
//! a long-running agent drops a result in the spool — and the report shows what was handled and
//! how punctual the heartbeat stayed, measured from both sides.

use super::demo_tools::{DEMO_PNG, SPEECH_MARKER};
use super::run::run_bridge;
use super::signals::{shutdown_signals, SignalRequest};
use crate::bridge::{approve_code, CountersSnapshot, Tunables};
use crate::chart::Charset;
use crate::config::Config;
use crate::status::render;
use crate::status::{self, now_unix_ms};
use futures_lite::future;
use smolcord::offload;
use smolcord::protocol::Snowflake;
use smolcord::rt::Timer;
use smolcord_sim::{SimConfig, SimEvent, SimFile, Simulator};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The demo's heartbeat interval: short, so a one-minute demo shows many
/// beats (Discord's is 41.25 s).
const DEMO_HEARTBEAT: Duration = Duration::from_millis(1000);
/// Bound on each step of the script.
const STEP: Duration = Duration::from_secs(30);

const ALICE: u64 = 4_242;
const BOB: u64 = 4_343;
/// The bot's owner: approves Bob with the `/approve` slash command.
const OWNER: u64 = 4_141;

/// Runs the demo to completion (or Ctrl-C) and prints the report.
pub async fn run() -> Result<ExitCode, String> {
    let mut signals = shutdown_signals().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let state_dir = std::env::temp_dir().join(format!("smolcord-demo-{}", std::process::id()));
    offload::create_dir_all(&state_dir)
        .await
        .map_err(|e| e.to_string())?;
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: DEMO_HEARTBEAT,
        ..SimConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to run the demo tools: {e}"))?
        .to_string_lossy()
        .into_owned();
    let mut config = Config::with_state_dir(&state_dir);
    config.gateway_url = Some(sim.gateway_url());
    config.api_base = sim.api_base();
    config.transcribe_cmd = Some(vec![exe.clone(), "demo-transcribe".into()]);
    config.agent_cmd = Some(vec![exe, "demo-agent".into()]);
    config.results_poll_ms = 250;
    config.owner_id = Some(OWNER.to_string());
    let tunables = Tunables {
        placeholder_after: Some(Duration::from_millis(1500)),
        ..Tunables::default()
    };
    say!("smolcord demo — no DISCORD_TOKEN, so the bridge talks to the embedded gateway simulator");
    say!(
        "  gateway {}  (heartbeat every {} ms)",
        sim.gateway_url(),
        DEMO_HEARTBEAT.as_millis()
    );
    say!("  state   {}", state_dir.display());
    say!("  agent and transcriber: `smolcord demo-agent` / `demo-transcribe`, 2 s each, as subprocesses\n");

    let started = Instant::now();
    let (stop_tx, stop_rx) = smol::channel::bounded::<()>(1);
    let script = async {
        let result = future::or(play_users(&sim, &state_dir), async {
            while signals.next().await != SignalRequest::Stop {}
            Err("interrupted".to_owned())
        })
        .await;
        let _ = stop_tx.try_send(());
        result
    };
    let bridge = run_bridge(
        config,
        sim.config().token.clone(),
        tunables,
        |_| future::pending(),
        async move {
            let _ = stop_rx.recv().await;
        },
    );
    let (script, outcome) = future::zip(script, bridge).await;
    outcome?;
    let elapsed = started.elapsed();
    let report = report(&sim, &state_dir, elapsed).await;
    sim.shutdown();
    remove_dir(state_dir).await;
    match script {
        Ok(()) => {
            say_raw!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            say_raw!("{report}");
            Err(format!("the demo did not finish: {why}"))
        }
    }
}

/// The simulated users' side, step by step; prints the conversation.
async fn play_users(sim: &Simulator, state_dir: &Path) -> Result<(), String> {
    let mut transcript = Transcript::default();
    sim.wait_for(
        STEP,
        |event| matches!(event, SimEvent::Dispatched { event, .. } if event == "READY"),
    )
    .await
    .ok_or("the bridge did not connect to the simulator")?;
    let alice_dm = pair(
        sim,
        state_dir,
        &mut transcript,
        (ALICE, "alice"),
        "hello? is anyone there?",
        Approver::Shell,
    )
    .await?;
    // Bob pairs too, so two channels work at once; the owner approves him
    // from Discord, with a slash command.
    let bob_dm = pair(
        sim,
        state_dir,
        &mut transcript,
        (BOB, "bob"),
        "hi",
        Approver::SlashCommand,
    )
    .await?;

    say(sim, ALICE, "alice", "what is the load on the Pi?");
    voice(sim, ALICE, "alice", "remind me to water the plants");
    voice(sim, BOB, "bob", "turn on the porch light at seven");
    transcript
        .wait_for(sim, alice_dm, |text| text.contains("load on the Pi"))
        .await?;
    transcript
        .wait_for(sim, alice_dm, |text| text.contains("water the plants"))
        .await?;
    transcript
        .wait_for(sim, bob_dm, |text| text.contains("porch light"))
        .await?;

    // Files both ways: a photo and a note in, downloaded for the agent; a
    // PNG out, uploaded with the reply.
    say!("-> alice: (photo.png and notes.txt attached) \"what do you make of these?\"");
    sim.send_dm_with_files(
        ALICE,
        "alice",
        "what do you make of these?",
        vec![
            SimFile::new("photo.png", "image/png", DEMO_PNG),
            SimFile::new(
                "notes.txt",
                "text/plain",
                "water the plants\nfeed the cat\n",
            ),
        ],
    );
    transcript
        .wait_for(sim, alice_dm, |text| text.contains("[answer.png"))
        .await?;

    // A long-running agent answers later by dropping a result in the spool.
    let result = state_dir.join("spool/results/demo-reminder.json");
    say!("   (a long-running agent writes {})", result.display());
    offload::write_json_atomic(
        &result,
        &serde_json::json!({ "channel_id": alice_dm, "content": "Reminder: water the plants (queued result from the spool)" }),
    )
    .await
    .map_err(|e| e.to_string())?;
    transcript
        .wait_for(sim, alice_dm, |text| text.contains("queued result"))
        .await?;
    // A few more heartbeats so both sides have something to compare.
    Timer::after(DEMO_HEARTBEAT * 3).await;
    Ok(())
}

/// How a pairing code is approved in the demo.
enum Approver {
    /// On the host, as `smolcord pair CODE` does.
    Shell,
    /// By the owner, `/approve` in their DM with the bot.
    SlashCommand,
}

/// A stranger writes, gets a pairing code, and the operator approves it
/// (`approver`). Returns the user's DM channel.
async fn pair(
    sim: &Simulator,
    state_dir: &Path,
    transcript: &mut Transcript,
    (user, name): (u64, &str),
    greeting: &str,
    approver: Approver,
) -> Result<Snowflake, String> {
    let channel = say(sim, user, name, greeting);
    let code = transcript
        .wait_for(sim, channel, |text| text.contains("smolcord pair "))
        .await?
        .split("smolcord pair ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_alphanumeric()).next())
        .map(str::to_owned)
        .ok_or("the pairing message had no code")?;
    match approver {
        Approver::Shell => {
            say!("   $ smolcord pair {code}      # the operator approves {name}");
            approve_code(state_dir, &code, now_unix_ms())
                .await
                .map_err(|e| e.to_string())?;
        }
        Approver::SlashCommand => approve_by_slash_command(sim, &code).await?,
    }
    transcript
        .wait_for(sim, channel, |text| text.contains("approved"))
        .await?;
    Ok(channel)
}

/// The owner types `/approve code:CODE` in the bot's DM; prints the
/// answer only they see.
async fn approve_by_slash_command(sim: &Simulator, code: &str) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    // The bridge registers its commands in the background after READY.
    while sim.registered_commands().0.is_empty() {
        if Instant::now() >= deadline {
            return Err("the bridge registered no slash commands".into());
        }
        Timer::after(Duration::from_millis(50)).await;
    }
    say!("-> owner: /approve code:{code}      # a slash command in the bot's DM, no shell");
    let used = sim
        .use_command(OWNER, "owner", "approve", &[("code", code)])
        .map_err(|e| e.to_string())?;
    loop {
        let answer = sim.interaction_answer(used.interaction_id);
        if let Some(text) = answer.as_ref().and_then(|a| a.content.as_deref()) {
            let seen_by = if answer.as_ref().is_some_and(|a| a.ephemeral) {
                "only the owner sees this"
            } else {
                "everyone sees this"
            };
            say!("<- bot ({seen_by}): {text}");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err("no answer to the owner's /approve".into());
        }
        Timer::after(Duration::from_millis(50)).await;
    }
}

fn say(sim: &Simulator, user: u64, name: &str, text: &str) -> Snowflake {
    say!("-> {name}: {text}");
    sim.send_dm(user, name, text).1
}

fn voice(sim: &Simulator, user: u64, name: &str, speech: &str) {
    say!("-> {name}: (voice note) \"{speech}\"");
    let mut ogg = b"OggS\0demo voice note\0".to_vec();
    ogg.extend_from_slice(SPEECH_MARKER);
    ogg.extend_from_slice(speech.as_bytes());
    sim.send_voice_dm(user, name, ogg, Duration::from_secs(2));
}

/// Prints bot messages as they appear (and when they are edited).
#[derive(Default)]
struct Transcript {
    shown: HashMap<Snowflake, String>,
}

impl Transcript {
    /// Waits until a bot message in `channel` matches `pred`; prints every
    /// new or edited bot message meanwhile. Returns the matching text.
    async fn wait_for(
        &mut self,
        sim: &Simulator,
        channel: Snowflake,
        pred: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + STEP;
        loop {
            // Every user's channel is shown, not only the one waited on.
            for user in [ALICE, BOB] {
                for message in sim.messages_in(sim.dm_channel_of(user)) {
                    let shown = shown_text(&message);
                    if self.shown.get(&message.id) != Some(&shown) {
                        let first_line = shown.lines().next().unwrap_or_default();
                        say!("<- bot: {first_line}");
                        self.shown.insert(message.id, shown);
                    }
                }
            }
            let found = sim
                .messages_in(channel)
                .into_iter()
                .map(|message| shown_text(&message))
                .find(|text| pred(text));
            if let Some(text) = found {
                return Ok(text);
            }
            if Instant::now() >= deadline {
                return Err(format!("no expected reply within {STEP:?}"));
            }
            Timer::after(Duration::from_millis(50)).await;
        }
    }
}

/// What a user sees of a bot message: its text, then each attachment as
/// `[name, N bytes, type]`.
fn shown_text(message: &smolcord_sim::BotMessage) -> String {
    let files: Vec<String> = message.object["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            format!(
                "[{}, {} bytes, {}]",
                a["filename"].as_str().unwrap_or("?"),
                a["size"].as_u64().unwrap_or(0),
                a["content_type"].as_str().unwrap_or("?")
            )
        })
        .collect();
    match (message.content.is_empty(), files.is_empty()) {
        (_, true) => message.content.clone(),
        (true, false) => files.join(" "),
        (false, false) => format!("{} {}", message.content, files.join(" ")),
    }
}

/// The closing report, from the bridge's own status and the simulator's
/// measurements.
async fn report(sim: &Simulator, state_dir: &Path, elapsed: Duration) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut snapshot = status::read(state_dir)
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    // The status file was written while the session was live; how it ended
    // is in the session state, saved after the gateway closed.
    snapshot.sessions = crate::bridge::load_session_state(state_dir).await.history;
    let counters: CountersSnapshot = snapshot.bridge.unwrap_or_default();
    let charset = Charset::for_stdout();
    let stats = sim.stats();
    let mut gaps: Vec<f64> = stats
        .connections
        .iter()
        .flat_map(|conn| conn.beats.iter().skip(1).map(|beat| beat.gap_ms))
        .collect();
    gaps.sort_by(f64::total_cmp);
    let gap_at = |q: f64| {
        if gaps.is_empty() {
            "-".to_owned()
        } else {
            format!(
                "{:.1} ms",
                gaps[((gaps.len() - 1) as f64 * q).round() as usize]
            )
        }
    };
    let interval = DEMO_HEARTBEAT.as_secs_f64() * 1000.0;
    let _ = writeln!(
        out,
        "\n== smolcord demo report ({:.1} s) ==",
        elapsed.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "messages handled      {} ({} voice notes transcribed, {} agent runs)",
        counters.messages_handled, counters.transcriptions, counters.agent_runs
    );
    let _ = writeln!(
        out,
        "replies delivered     {} (+ {} queued result(s) from the spool)",
        counters
            .replies_delivered
            .saturating_sub(counters.results_delivered),
        counters.results_delivered
    );
    let _ = writeln!(
        out,
        "strangers refused     {} (pairing codes issued: {})",
        counters.refused, counters.pairing_codes_issued
    );
    let _ = writeln!(
        out,
        "gateway sessions      {} (identifies seen by the gateway: {}, resumes: {})",
        snapshot.sessions_started, stats.totals.identifies, stats.totals.resumes
    );
    let _ = writeln!(
        out,
        "heartbeat, gateway    {} beats; gap p50 {} p99 {} max {} (interval {interval:.0} ms); {} late, {} missed",
        stats.totals.heartbeats,
        gap_at(0.5),
        gap_at(0.99),
        gap_at(1.0),
        stats.totals.late_heartbeats,
        stats.totals.missed_deadlines
    );
    // The client's own account, drawn as `smolcord status` draws it.
    let _ = writeln!(out, "\nheartbeat, client (as `smolcord status` shows it):");
    out.push_str(&render::heartbeat_charts(
        &snapshot.heartbeat.lifetime,
        charset,
    ));
    out.push_str(&render::sessions(&snapshot, now_unix_ms(), charset));
    out
}

/// Removes the demo's temporary state dir (best effort).
async fn remove_dir(dir: PathBuf) {
    #[allow(clippy::disallowed_methods)] // on the blocking pool
    let result = offload::unblock(move || std::fs::remove_dir_all(&dir).map(|()| dir)).await;
    if let Err(err) = result {
        log::debug!("could not remove the demo state dir: {err}");
    }
}
