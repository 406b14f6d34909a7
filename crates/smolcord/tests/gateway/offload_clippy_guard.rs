//! The clippy gate really bites: a scratch crate using the repository's
//! clippy.toml fails `cargo clippy -- -D warnings` when it calls blocking std
//! functions, naming each one, and passes when the same calls sit under the
//! scoped `#[allow]` that src/offload uses. Both halves must hold, so a
//! missing, unparsable or ineffective clippy.toml cannot pass vacuously.
// Tests may block: this one writes the scratch crate and runs cargo.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// A function making one call from each family clippy.toml forbids.
/// `{ALLOW}` becomes nothing, or the allow attribute offload uses.
const BLOCKING_CALLS: &str = r#"
use std::io::Write;
use std::net::ToSocketAddrs;

{ALLOW}
pub fn blocks_the_loop() -> std::io::Result<()> {
    std::thread::sleep(std::time::Duration::from_millis(1));
    std::fs::write("x", b"y")?;
    let _ = std::fs::read_to_string("x")?;
    let mut file = std::fs::OpenOptions::new().append(true).open("x")?;
    file.write_all(b"z")?;
    file.sync_all()?;
    std::fs::File::open("x")?.sync_data()?;
    let _ = std::path::Path::new("x").exists();
    let _ = std::process::Command::new("true").status()?;
    let _: std::io::Result<std::net::TcpStream> = std::net::TcpStream::connect("127.0.0.1:1");
    let _ = "localhost:1".to_socket_addrs();
    Ok(())
}
"#;

/// What clippy must name in the forbidden crate's output.
const MUST_NAME: &[&str] = &[
    "std::thread::sleep",
    "std::fs::write",
    "std::fs::read_to_string",
    "std::fs::OpenOptions::open",
    "std::fs::File::sync_all",
    "std::fs::File::open",
    "std::fs::File::sync_data",
    "std::path::Path::exists",
    "std::process::Command::new",
    "std::process::Command::status",
    "std::net::TcpStream::connect",
    "std::net::ToSocketAddrs::to_socket_addrs",
    "disallowed type `std::net::TcpStream`",
];

fn scratch_crate(dir: &Path, name: &str, allow: &str) {
    let repo_config = smolcord_testkit::repo_root().join("clippy.toml");
    fs::create_dir_all(dir.join("src")).expect("mkdir");
    fs::copy(&repo_config, dir.join("clippy.toml")).expect("copy clippy.toml");
    fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n\n[workspace]\n"
        ),
    )
    .expect("Cargo.toml");
    fs::write(
        dir.join("src/lib.rs"),
        BLOCKING_CALLS.replace("{ALLOW}", allow),
    )
    .expect("lib.rs");
}

fn clippy(dir: &Path, target: &Path) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(["clippy", "--offline", "--quiet", "--", "-D", "warnings"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        // Read the copied config, whatever the caller's environment says.
        .env("CLIPPY_CONF_DIR", dir)
        .output()
        .expect("run cargo clippy")
}

#[test]
fn clippy_rejects_blocking_calls_and_accepts_them_under_offloads_allow() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let target = tmp.path().join("target");

    let forbidden = tmp.path().join("forbidden");
    scratch_crate(&forbidden, "forbidden", "");
    let out = clippy(&forbidden, &target);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("no such command"),
        "clippy is not installed (rustup component add clippy):\n{stderr}"
    );
    assert!(
        !out.status.success(),
        "clippy passed blocking calls:\n{stderr}"
    );
    for name in MUST_NAME {
        assert!(
            stderr.contains(name),
            "clippy did not flag `{name}`:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("use offload::"),
        "the reasons should point to offload:\n{stderr}"
    );

    let allowed = tmp.path().join("allowed");
    scratch_crate(
        &allowed,
        "allowed",
        "#[allow(clippy::disallowed_methods, clippy::disallowed_types)]",
    );
    let out = clippy(&allowed, &target);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "clippy failed the allowed crate:\n{stderr}"
    );
    // Also catches clippy.toml entries clippy cannot resolve (it warns).
    assert!(!stderr.contains("warning"), "clippy warned:\n{stderr}");
}
