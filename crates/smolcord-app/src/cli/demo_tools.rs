//! The demo's stand-ins for real tools, run as subprocesses of the demo
//! (`smolcord demo-agent`, `smolcord demo-transcribe FILE`). Each takes
//! about two seconds on purpose: slow work the bridge must keep off its
//! event loop. They are separate processes, so blocking here is fine.
#![allow(clippy::disallowed_methods)]

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

/// How long each stand-in "thinks".
const THINKING: Duration = Duration::from_secs(2);
/// The demo's voice notes carry their "speech" after this marker.
pub const SPEECH_MARKER: &[u8] = b"demo-speech:";

/// Reads a task on stdin and answers on stdout, after a pause.
pub fn agent() -> ExitCode {
    let mut input = String::new();
    if let Err(err) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("demo-agent: cannot read the task: {err}");
        return ExitCode::FAILURE;
    }
    let task: serde_json::Value = match serde_json::from_str(&input) {
        Ok(task) => task,
        Err(err) => {
            eprintln!("demo-agent: the task is not JSON: {err}");
            return ExitCode::FAILURE;
        }
    };
    std::thread::sleep(THINKING);
    let text = task["text"].as_str().unwrap_or_default();
    let who = task["author"]["username"].as_str().unwrap_or("you");
    say!(
        "(demo agent, {} s in a separate process) {who}, you said: «{}»",
        THINKING.as_secs(),
        text.trim()
    );
    ExitCode::SUCCESS
}

/// "Transcribes" a demo voice note: prints the text after the marker.
pub fn transcribe(path: Option<&str>) -> ExitCode {
    let Some(path) = path else {
        eprintln!("demo-transcribe: usage: demo-transcribe FILE");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) => {
            eprintln!("demo-transcribe: {path}: {err}");
            return ExitCode::FAILURE;
        }
    };
    std::thread::sleep(THINKING);
    let speech = bytes
        .windows(SPEECH_MARKER.len())
        .position(|window| window == SPEECH_MARKER)
        .map(|at| String::from_utf8_lossy(&bytes[at + SPEECH_MARKER.len()..]).into_owned());
    match speech {
        Some(text) => {
            say!("{}", text.trim());
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "demo-transcribe: {path}: no speech found ({} bytes)",
                bytes.len()
            );
            ExitCode::FAILURE
        }
    }
}
