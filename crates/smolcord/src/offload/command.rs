//! Running a subprocess without ever blocking the event loop.
//!
//! `run_command` takes an argv (never a shell line: the program is `argv[0]`
//! and every other element is one argument, passed as is), feeds optional
//! stdin, captures stdout and stderr up to a cap while draining the rest (so
//! a chatty child never blocks on a full pipe), and bounds the whole run with
//! a timeout. The child leads its own process group, so on timeout the whole
//! group (grandchildren too) gets SIGTERM, then SIGKILL after a grace period,
//! and is reaped: no zombies, and nothing of the command outlives the call.
//!
//! ```no_run
//! # smol::block_on(async {
//! use std::time::Duration;
//! use smolcord::offload::{run_command, CommandSpec};
//!
//! let spec = CommandSpec::new(vec!["uname".into(), "-r".into()], Duration::from_secs(5));
//! let out = run_command(spec).await?;
//! println!("kernel {} (exit {:?})", out.stdout_text(), out.exit_code);
//! # Ok::<(), smolcord::offload::Error>(()) });
//! ```

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::{supervise, Error};

/// What to run and within which limits. Build with [`CommandSpec::new`] and
/// adjust the public fields.
#[derive(Clone)]
pub struct CommandSpec {
    /// Program and arguments. `argv[0]` is looked up in `PATH` unless it contains a `/`.
    pub argv: Vec<String>,
    /// Bytes written to the child's stdin (then closed); `None` gives it `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// How long the command may run before its process group is terminated.
    pub timeout: Duration,
    /// The child's environment.
    pub env: CommandEnv,
    /// Variables set on top of `env` (say, where a task's files are).
    pub env_add: Vec<(String, String)>,
    /// At most this many bytes of stdout, and of stderr, are kept; the rest is drained and dropped.
    pub output_cap: usize,
    /// `Some(n)`: keep the *last* `n` bytes of stderr instead of the first
    /// `output_cap` (a failing program's reason is usually its last line,
    /// after pages of progress).
    pub stderr_tail: Option<usize>,
    /// Working directory; `None` keeps ours.
    pub cwd: Option<PathBuf>,
    /// Time between SIGTERM and SIGKILL after a timeout.
    pub kill_grace: Duration,
    /// `Some`: stdout so far is also noted here while the command runs
    /// (the output still comes whole in [`CommandOutput::stdout`]).
    pub stdout_progress: Option<super::OutputProgress>,
}

/// The environment a command runs with.
#[derive(Clone)]
#[non_exhaustive]
pub enum CommandEnv {
    /// Our own environment, unchanged.
    Inherit,
    /// Our own environment without these variables (e.g. the bot token,
    /// which a transcriber or agent has no business seeing).
    InheritWithout(Vec<String>),
    /// Exactly these variables and no others. Without a `PATH` entry here, a
    /// bare program name is still looked up in *our* `PATH`.
    Exactly(Vec<(String, String)>),
}

impl CommandSpec {
    /// Default output cap per stream: 1 MiB.
    pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;
    /// Default grace between SIGTERM and SIGKILL: 2 s.
    pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);

    /// A spec with defaults: no stdin, inherited environment, 1 MiB cap per
    /// stream, our working directory, 2 s kill grace.
    pub fn new(argv: Vec<String>, timeout: Duration) -> Self {
        CommandSpec {
            argv,
            stdin: None,
            timeout,
            env: CommandEnv::Inherit,
            env_add: Vec::new(),
            output_cap: Self::DEFAULT_OUTPUT_CAP,
            stderr_tail: None,
            cwd: None,
            kill_grace: Self::DEFAULT_KILL_GRACE,
            stdout_progress: None,
        }
    }

    /// `argv[0]`, if it is a usable program name.
    pub(crate) fn program(&self) -> Result<&str, Error> {
        match self.argv.first() {
            Some(program) if !program.is_empty() => Ok(program),
            _ => Err(Error::EmptyArgv),
        }
    }
}

// Arguments, stdin and environment values may hold user text or secrets:
// Debug shows only their shape.
impl fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandSpec")
            .field("program", &self.argv.first())
            .field("args", &self.argv.len().saturating_sub(1))
            .field("stdin_bytes", &self.stdin.as_ref().map(Vec::len))
            .field("timeout", &self.timeout)
            .field("env", &self.env)
            .field(
                "env_add",
                &self.env_add.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("output_cap", &self.output_cap)
            .field("stderr_tail", &self.stderr_tail)
            .field("cwd", &self.cwd)
            .field("kill_grace", &self.kill_grace)
            .finish()
    }
}

impl fmt::Debug for CommandEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandEnv::Inherit => f.write_str("Inherit"),
            CommandEnv::InheritWithout(names) => {
                f.debug_tuple("InheritWithout").field(names).finish()
            }
            CommandEnv::Exactly(vars) => f
                .debug_tuple("Exactly")
                .field(&vars.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// What a finished (or killed) command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// Exit code, if the program exited by itself.
    pub exit_code: Option<i32>,
    /// The signal that ended the program, if one did.
    pub signal: Option<i32>,
    /// Captured stdout (at most `output_cap` bytes).
    pub stdout: Vec<u8>,
    /// Captured stderr (at most `output_cap` bytes, or its last
    /// `stderr_tail` bytes).
    pub stderr: Vec<u8>,
    /// stdout had more than `output_cap` bytes; the rest was dropped.
    pub stdout_truncated: bool,
    /// stderr had more than it kept; the rest (its start, with
    /// `stderr_tail`) was dropped.
    pub stderr_truncated: bool,
    /// Wall time from start until the output was complete.
    pub duration: Duration,
    /// The timeout expired and the process group was terminated.
    pub timed_out: bool,
    /// The command closed its stdout (the read reached its end) before the
    /// timeout expired: what it printed is all it meant to print, even if
    /// it then ran on and was killed.
    pub stdout_closed_in_time: bool,
}

impl CommandOutput {
    /// Exited by itself with code 0, within the timeout.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// stdout as text (invalid UTF-8 replaced), trailing whitespace trimmed.
    /// When the output was cut at the cap, a character cut in half there is
    /// left out rather than shown as a replacement character.
    pub fn stdout_text(&self) -> String {
        let bytes = if self.stdout_truncated {
            without_cut_char(&self.stdout)
        } else {
            &self.stdout
        };
        String::from_utf8_lossy(bytes).trim_end().to_string()
    }
}

/// `bytes` without a UTF-8 sequence left incomplete at its end.
fn without_cut_char(bytes: &[u8]) -> &[u8] {
    // A sequence is at most 4 bytes: find where the last one starts.
    for back in 1..=bytes.len().min(4) {
        let start = bytes.len() - back;
        let lead = bytes[start];
        if lead & 0xC0 == 0x80 {
            continue; // a continuation byte
        }
        let needed = match lead {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < needed {
            &bytes[..start]
        } else {
            bytes
        };
    }
    bytes
}

/// Runs `spec.argv` (no shell), bounded by `spec.timeout`; see the module docs.
///
/// A program that exits non-zero, dies from a signal or times out is an
/// `Ok` [`CommandOutput`] saying so. Errors are for commands that could not be
/// run or supervised at all: an empty argv, a missing or non-executable
/// program ([`Error::Spawn`], naming it), a failed pipe or wait.
///
/// If the returned future is dropped early, the command's process group is
/// killed.
pub async fn run_command(spec: CommandSpec) -> Result<CommandOutput, Error> {
    supervise::run(spec).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &[u8], truncated: bool) -> CommandOutput {
        CommandOutput {
            exit_code: Some(0),
            signal: None,
            stdout: stdout.to_vec(),
            stderr: Vec::new(),
            stdout_truncated: truncated,
            stderr_truncated: false,
            duration: Duration::ZERO,
            timed_out: false,
            stdout_closed_in_time: true,
        }
    }

    #[test]
    fn a_character_cut_at_the_cap_is_left_out() {
        let text = "ab€"; // '€' is 3 bytes
        for cut in 3..text.len() {
            assert_eq!(output(&text.as_bytes()[..cut], true).stdout_text(), "ab");
        }
        assert_eq!(output(text.as_bytes(), true).stdout_text(), "ab€");
        // Without a cut, a broken end is shown as broken.
        assert_eq!(
            output(&text.as_bytes()[..4], false).stdout_text(),
            "ab\u{fffd}"
        );
        assert_eq!(output(b"", true).stdout_text(), "");
    }
}
