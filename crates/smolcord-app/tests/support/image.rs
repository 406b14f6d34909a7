//! The packaging tests' view of the binary: run it the way the
//! FROM-scratch image and the systemd unit run it (empty environment, cwd
//! `/`, uid 65534 when the tests run as root).
//!
//! Run as root from a clone in a private home (`/root` is 0700), uid 65534
//! cannot reach `target/` to execute the binary. [`Image`] then runs a copy
//! from a fresh temp dir (0755) that it can reach; if even the temp dir is
//! private, it runs the binary as root and says so on stderr.

use std::fs::Permissions;
use std::os::unix::fs::{chown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::binary::Smolcord;

/// The image's `USER 65534:65534`.
pub const NOBODY: u32 = 65534;

pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The binary as the image runs it. Keep it alive while its children run
/// (it may own the copy they execute).
pub struct Image {
    binary: PathBuf,
    as_nobody: bool,
    _copy: Option<tempfile::TempDir>,
}

impl Image {
    /// The built binary, or a copy uid 65534 can reach (see the module doc).
    pub fn new() -> Image {
        Image::of(Path::new(env!("CARGO_BIN_EXE_smolcord")))
    }

    /// Like [`Image::new`] for the binary at `binary`.
    pub fn of(binary: &Path) -> Image {
        let as_is = |as_nobody| Image {
            binary: binary.to_path_buf(),
            as_nobody,
            _copy: None,
        };
        if !running_as_root() {
            return as_is(false);
        }
        if others_can_reach(binary) {
            return as_is(true);
        }
        let copy = tempfile::tempdir().expect("a temp dir for the binary");
        std::fs::set_permissions(copy.path(), Permissions::from_mode(0o755)).expect("chmod 0755");
        let copied = copy.path().join("smolcord");
        std::fs::copy(binary, &copied).expect("copy the binary");
        std::fs::set_permissions(&copied, Permissions::from_mode(0o755)).expect("chmod 0755");
        if others_can_reach(&copied) {
            return Image {
                binary: copied,
                as_nobody: true,
                _copy: Some(copy),
            };
        }
        eprintln!(
            "packaging: uid {NOBODY} can reach neither {} nor a copy in {}: \
             running the binary as root, not as {NOBODY}",
            binary.display(),
            copy.path().display()
        );
        as_is(false)
    }

    /// Whether the binary runs as uid 65534 (else as the current user).
    pub fn as_nobody(&self) -> bool {
        self.as_nobody
    }

    /// `smolcord ARGS` with an empty environment, cwd `/`, stdin closed,
    /// as nobody when [`Image::as_nobody`].
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::null());
        if self.as_nobody {
            // std also drops the supplementary groups when root sets a uid.
            command.uid(NOBODY).gid(NOBODY);
        }
        command
    }

    /// Runs `smolcord ARGS` with `env` to its end, bounded by 20 s.
    pub fn run(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut command = self.command(args);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = Smolcord::start(command);
        let status = child.wait(Duration::from_secs(20));
        Output {
            status,
            stdout: child.stdout().into_bytes(),
            stderr: child.stderr().into_bytes(),
        }
    }

    /// A state dir like the image's `/state` and systemd's StateDirectory:
    /// mode 0700, owned by the user the binary runs as.
    pub fn state_dir(&self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o700)).expect("chmod 0700");
        if self.as_nobody {
            chown(dir.path(), Some(NOBODY), Some(NOBODY)).expect("chown the state dir to nobody");
        }
        dir
    }
}

/// Whether a user that is neither owner nor group (uid 65534) can reach
/// `path`: search permission on every directory above it, and on itself.
fn others_can_reach(path: &Path) -> bool {
    path.ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn assert_no_panic(output: &Output) {
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "smolcord panicked: {stderr}");
}
