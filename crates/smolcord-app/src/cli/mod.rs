//! Application, not library API: the command-line programs (`demo`, `run`,
//! `sim`, `pair`, `status`, `failures`), one file each, on top of the
//! library modules.

/// `println!` that ignores a closed stdout (`smolcord status | head` must
/// not panic on EPIPE).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` with the same tolerance.
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

#[cfg(feature = "sim")]
mod demo;
mod demo_tools;
mod dumpable;
mod failures;
mod fatal_fix;
mod logging;
mod pair;
mod run;
mod signals;
#[cfg(feature = "sim")]
mod sim;
mod status;
mod token_check;

pub use logging::init_logging;
pub use signals::shutdown_signals;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// The options of `smolcord sim` (each `None`: the simulator's default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimArgs {
    /// `--listen ADDR`.
    pub listen: Option<SocketAddr>,
    /// `--heartbeat-ms N`.
    pub heartbeat_ms: Option<u64>,
    /// `--tls-cert F --tls-key F`: serve wss:// and https://.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--token T`: the token to accept (its first part sets the bot id).
    pub token: Option<smolcord::token::Token>,
    /// `--max-concurrency N`: identifies per 5 s bucket.
    pub max_concurrency: Option<u32>,
    /// `--shards N`: the shard count `GET /gateway/bot` recommends.
    pub shards: Option<u32>,
    /// `--identify-pacing on|off`: op 9 for an Identify too early for its
    /// bucket (on unless turned off).
    pub identify_pacing: Option<bool>,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// No subcommand: `run` with a token, else the demo.
    Default {
        /// `--config FILE`.
        config: Option<PathBuf>,
    },
    /// The demo against the embedded simulator.
    Demo,
    /// The bridge against Discord.
    Run {
        /// `--config FILE`.
        config: Option<PathBuf>,
    },
    /// Serve the simulator.
    Sim(SimArgs),
    /// Approve a pairing code.
    Pair {
        /// The code.
        code: String,
        /// `--config FILE`.
        config: Option<PathBuf>,
    },
    /// Print the status snapshot.
    Status {
        /// `--config FILE`.
        config: Option<PathBuf>,
        /// `--json`: the machine-readable form.
        json: bool,
    },
    /// The demo's stand-in agent (a subprocess of the demo).
    DemoAgent,
    /// The demo's stand-in transcriber (a subprocess of the demo).
    DemoTranscribe {
        /// The audio file.
        file: Option<String>,
    },
    /// Print the failure journal.
    Failures {
        /// `--last N`.
        last: Option<usize>,
        /// `--config FILE`.
        config: Option<PathBuf>,
    },
}

impl Command {
    /// The log filter when `RUST_LOG` is unset: the demo keeps the
    /// simulator's own connection chatter out of the way.
    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Demo | Command::Default { .. } => "info,smolcord_sim=warn",
            _ => "info",
        }
    }
}

/// The process environment as a lookup function (tests pass their own).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Runs a command to completion on one thread and gives the exit code.
pub fn main(command: Command) -> ExitCode {
    // First, before a token is read or a child started: every smolcord
    // process may hold DISCORD_TOKEN in its environment (a health check's
    // `status` started in the bridge's container has it too).
    dumpable::keep_memory_from_same_uid();
    // smolcord's own runtime: this thread runs the tasks and also sleeps
    // in epoll for the sockets and timers created on it, so an idle bot
    // wakes once per timer expiry or arrival (see `smolcord::rt`).
    let result = smolcord::rt::block_on(async {
        match command {
            Command::Default { config } => {
                if process_env("DISCORD_TOKEN").is_some_and(|t| !t.trim().is_empty()) {
                    run::run(config.as_deref(), &process_env).await
                } else {
                    default_without_token().await
                }
            }
            #[cfg(feature = "sim")]
            Command::Demo => demo::run().await,
            Command::Status { config, json } => {
                status::run(config.as_deref(), &process_env, json).await
            }
            Command::Run { config } => run::run(config.as_deref(), &process_env).await,
            Command::Pair { code, config } => {
                pair::run(config.as_deref(), &process_env, &code).await
            }
            #[cfg(feature = "sim")]
            Command::Sim(args) => sim::run(args).await,
            Command::Failures { last, config } => {
                failures::run(last, config.as_deref(), &process_env).await
            }
            // Subprocesses of the demo: they block on purpose (own process).
            Command::DemoAgent => Ok(demo_tools::agent()),
            Command::DemoTranscribe { file } => Ok(demo_tools::transcribe(file.as_deref())),
            #[cfg(not(feature = "sim"))]
            Command::Demo | Command::Sim(_) => {
                Err("this build has no simulator (cargo feature `sim`)".into())
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("smolcord: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "sim")]
async fn default_without_token() -> Result<ExitCode, String> {
    demo::run().await
}

#[cfg(not(feature = "sim"))]
async fn default_without_token() -> Result<ExitCode, String> {
    Err(
        "DISCORD_TOKEN is not set, and this build has no simulator for the demo (feature `sim`)"
            .into(),
    )
}
