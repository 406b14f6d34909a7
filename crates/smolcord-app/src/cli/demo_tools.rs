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

/// A 1×1 PNG: the demo user's "photo", which the demo agent sends back.
pub const DEMO_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x64, 0x60, 0xf8, 0x5f,
    0x0f, 0x00, 0x02, 0x87, 0x01, 0x80, 0xeb, 0x47, 0xba, 0x92, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

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
    let files = read_files(&task);
    if !files.is_empty() {
        say!(
            "(demo agent) {who}, I read your files from disk: {}",
            files.join("; ")
        );
        return ExitCode::SUCCESS;
    }
    say!(
        "(demo agent, {} s in a separate process) {who}, you said: «{}»",
        THINKING.as_secs(),
        text.trim()
    );
    ExitCode::SUCCESS
}

/// Reads each attachment the bridge downloaded for the task, says what it
/// found, and answers an image with a PNG of its own in `output_dir`.
fn read_files(task: &serde_json::Value) -> Vec<String> {
    let mut said = Vec::new();
    let attachments = task["attachments"].as_array().cloned().unwrap_or_default();
    for attachment in &attachments {
        // A voice note is in the task as its transcript.
        let audio = attachment["content_type"].as_str().unwrap_or_default();
        if audio.starts_with("audio/") {
            continue;
        }
        let name = attachment["filename"].as_str().unwrap_or("?");
        let Some(path) = attachment["path"].as_str() else {
            let why = attachment["left_out"].as_str().unwrap_or("not downloaded");
            said.push(format!("{name} was left out ({why})"));
            continue;
        };
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(err) => {
                said.push(format!("{name}: {err}"));
                continue;
            }
        };
        if bytes.starts_with(b"\x89PNG") {
            said.push(format!("{name} is a {} byte PNG", bytes.len()));
            if let Some(out) = task["output_dir"].as_str() {
                let reply = std::path::Path::new(out).join("answer.png");
                match std::fs::write(&reply, DEMO_PNG) {
                    Ok(()) => said.push("my answer is answer.png".to_owned()),
                    Err(err) => eprintln!("demo-agent: {}: {err}", reply.display()),
                }
            }
        } else {
            let text = String::from_utf8_lossy(&bytes);
            let first = text.lines().next().unwrap_or_default();
            said.push(format!("{name} starts «{first}»"));
        }
    }
    said
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
