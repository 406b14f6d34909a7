//! `contrib/whisper-transcribe`, the README's transcriber, run as smolcord
//! runs it (`whisper-transcribe MODEL AUDIO`) with stand-ins for ffmpeg and
//! whisper-cli that check what they are asked: the voice note converted to
//! 16 kHz mono WAV, whisper-cli given the model, no timestamps and that
//! WAV, its segments joined into one text; and the failures an operator
//! meets first said on stderr with a non-zero exit.
#![allow(clippy::disallowed_methods)] // a test runs a script and writes files

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    smolcord_testkit::repo_root().join("contrib/whisper-transcribe")
}

fn write_program(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\nset -eu\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// ffmpeg: insists on the conversion's arguments, writes a "WAV" holding
/// the input's bytes to the last argument.
const FFMPEG: &str = r#"
args="$*"
case "$args" in *"-ar 16000 -ac 1 "*) ;; *) echo "ffmpeg: not 16 kHz mono: $args" >&2; exit 9;; esac
for last; do :; done
while [ $# -gt 0 ]; do [ "$1" = -i ] && input=$2; shift; done
{ printf 'RIFF'; cat "$input"; } > "$last"
"#;

/// whisper-cli: insists on -m MODEL, -nt and -f WAV (a RIFF file), prints
/// two segments as whisper.cpp does (a leading space each) and a silence.
const WHISPER: &str = r#"
model= file= nt=
while [ $# -gt 0 ]; do
  case "$1" in -m) model=$2; shift;; -f) file=$2; shift;; -nt) nt=1;; -l) lang=$2; shift;; esac
  shift
done
[ -n "$nt" ] || { echo "whisper: timestamps were not turned off" >&2; exit 9; }
[ "$(cat "$model")" = model ] || { echo "whisper: wrong model $model" >&2; exit 9; }
case "$file" in *.wav) ;; *) echo "whisper: not a wav: $file" >&2; exit 9;; esac
[ "$(head -c 4 "$file")" = RIFF ] || { echo "whisper: not converted" >&2; exit 9; }
echo "loading model from '$model'" >&2
echo " Hello there,"
echo " [BLANK_AUDIO]"
echo " this is a voice note (${lang:-en}: $(tail -c +5 "$file"))."
"#;

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        write_program(&dir.path().join("bin"), "ffmpeg", FFMPEG);
        write_program(&dir.path().join("bin"), "whisper-cli", WHISPER);
        std::fs::write(dir.path().join("ggml-base.bin"), "model").unwrap();
        std::fs::write(dir.path().join("voice-message.ogg"), "OggS").unwrap();
        Setup { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn run(&self, model: &str, env: &[(&str, &str)]) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.path("bin").display());
        Command::new(script())
            .arg(self.path(model))
            .arg(self.path("voice-message.ogg"))
            .env_clear()
            .env("PATH", path)
            .env("TMPDIR", self.path("tmp"))
            .envs(env.iter().copied())
            .output()
            .expect("the script runs")
    }
}

#[test]
fn a_voice_note_becomes_one_line_of_text_and_leaves_nothing_behind() {
    let setup = Setup::new();
    let out = setup.run("ggml-base.bin", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello there, this is a voice note (en: OggS).\n"
    );
    // The WAV was made in TMPDIR and removed.
    let left: Vec<_> = std::fs::read_dir(setup.path("tmp")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");

    let out = setup.run("ggml-base.bin", &[("WHISPER_LANGUAGE", "de")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(de: OggS)"));
}

#[test]
fn a_missing_model_or_program_is_said_on_stderr() {
    let setup = Setup::new();
    let out = setup.run("no-such-model.bin", &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("model not found"), "{stderr}");
    assert!(stderr.contains("no-such-model.bin"), "{stderr}");

    let out = setup.run("ggml-base.bin", &[("WHISPER_CLI", "whisper-nowhere")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("whisper-nowhere not found"), "{stderr}");

    // whisper-cli failing: its exit is ours, its words on stderr.
    write_program(
        &setup.path("bin"),
        "whisper-cli",
        "echo 'error: failed to load model' >&2; exit 4",
    );
    let out = setup.run("ggml-base.bin", &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed to load model"));
    assert!(out.stdout.is_empty());
}
