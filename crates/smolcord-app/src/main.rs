//! The `smolcord` command line: argument parsing only; the work lives in
//! the `smolcord_app::cli` module.

use smolcord_app::cli::{self, Command};
use std::process::ExitCode;

const USAGE: &str = "\
smolcord — a Discord DM bridge for small hosts

usage:
  smolcord                     the demo against the embedded simulator when
                               DISCORD_TOKEN is unset, else `run`
  smolcord demo                the demo (embedded gateway simulator)
  smolcord run [--config F]    the bridge against Discord (DISCORD_TOKEN)
  smolcord sim [--listen ADDR] [--heartbeat-ms N] [--tls-cert F --tls-key F]
               [--token T] [--max-concurrency N] [--shards N]
               [--identify-pacing on|off]
                               serve the gateway simulator until Ctrl-C
  smolcord pair CODE [--config F]
                               approve a pairing code
  smolcord status [--json] [--config F]
                               the running bridge's live status (asked on
                               status.sock), else status.json: charts, session
                               timeline (--json: docs/status.schema.json);
                               exit 1 if the last heartbeat ACK is older than
                               two intervals or the process does not answer
  smolcord failures [--last N] [--config F]
                               print the failure journal

environment: DISCORD_TOKEN, SMOLCORD_CONFIG, SMOLCORD_STATE_DIR,
SMOLCORD_GATEWAY_URL, SMOLCORD_API_BASE, SMOLCORD_CA_FILE, SMOLCORD_ASCII=1
(plain ASCII output), RUST_LOG (default info; smolcord::wire=trace prints
every gateway frame in and out, token and session id redacted;
smolcord::sim::wire=trace the same from the simulator's side)";

/// The `blocking` pool's thread cap unless `BLOCKING_MAX_THREADS` is set
/// (the crate's default is 500). What runs there: REST calls (a thread
/// each for as long as the request is on the wire, up to 15 s), file reads,
/// fsync'd writes (the failure journal's included), process spawns. At
/// most 4 result deliveries, `agent_concurrency` agent replies and their
/// typing, 2 transcriptions and a few state writes are in flight at once:
/// 16 threads carry that with room to spare and cost a Pi under 1 MiB of
/// stacks actually touched, while a burst can no longer start hundreds of
/// threads. Past the cap, work queues for a free thread; the event loop
/// (and so the heartbeat) never waits for it.
const BLOCKING_MAX_THREADS: &str = "16";

fn main() -> ExitCode {
    // blocking reads the variable when the pool is first used: nothing has
    // touched it yet, and no other thread exists that could read the
    // environment concurrently.
    if std::env::var_os("BLOCKING_MAX_THREADS").is_none() {
        std::env::set_var("BLOCKING_MAX_THREADS", BLOCKING_MAX_THREADS);
    }
    let command = match parse(lexopt::Parser::from_env()) {
        Ok(Some(command)) => command,
        Ok(None) => {
            // A closed stdout (`smolcord --help | head -1`) is not an error.
            let _ =
                std::io::Write::write_all(&mut std::io::stdout(), format!("{USAGE}\n").as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("smolcord: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    cli::init_logging(command.default_log_filter());
    cli::main(command)
}

fn parse(mut args: lexopt::Parser) -> Result<Option<Command>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut subcommand: Option<String> = None;
    let mut positional: Option<String> = None;
    let mut config = None;
    let mut listen = None;
    let mut heartbeat_ms = None;
    let mut tls_cert: Option<std::path::PathBuf> = None;
    let mut tls_key: Option<std::path::PathBuf> = None;
    let mut last = None;
    let mut json = false;
    let mut sim = cli::SimArgs::default();
    while let Some(arg) = args.next()? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Long("config") => config = Some(args.value()?.into()),
            Long("listen") => listen = Some(args.value()?.parse()?),
            Long("heartbeat-ms") => heartbeat_ms = Some(args.value()?.parse()?),
            Long("tls-cert") => tls_cert = Some(args.value()?.into()),
            Long("tls-key") => tls_key = Some(args.value()?.into()),
            Long("last") => last = Some(args.value()?.parse()?),
            Long("json") => json = true,
            Long("token") => {
                let token = args.value()?.string()?;
                sim.token =
                    Some(smolcord::token::Token::new(&token).ok_or("--token must not be blank")?);
            }
            Long("max-concurrency") => sim.max_concurrency = Some(args.value()?.parse()?),
            Long("shards") => sim.shards = Some(args.value()?.parse()?),
            Long("identify-pacing") => {
                sim.identify_pacing = Some(match args.value()?.string()?.as_str() {
                    "on" => true,
                    "off" => false,
                    other => {
                        return Err(
                            format!("--identify-pacing takes on or off, not `{other}`").into()
                        )
                    }
                })
            }
            Value(value) if subcommand.is_none() => subcommand = Some(value.string()?),
            Value(value) if positional.is_none() => positional = Some(value.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    let command = match subcommand.as_deref() {
        None => Command::Default { config },
        Some("demo") => Command::Demo,
        Some("run") => Command::Run { config },
        Some("sim") => Command::Sim(cli::SimArgs {
            listen,
            heartbeat_ms,
            tls: match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => return Err("--tls-cert and --tls-key go together".into()),
            },
            ..sim
        }),
        Some("pair") => Command::Pair {
            code: positional.ok_or("pair needs the CODE the bot sent")?,
            config,
        },
        Some("status") => Command::Status { config, json },
        Some("failures") => Command::Failures { last, config },
        Some("demo-agent") => Command::DemoAgent,
        Some("demo-transcribe") => Command::DemoTranscribe { file: positional },
        Some(other) => return Err(format!("unknown command `{other}`").into()),
    };
    Ok(Some(command))
}
