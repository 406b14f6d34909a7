//! Config loading through the public API: files in temp dirs, the
//! environment as a map (never the real one, never $HOME).
// Tests may block (std::fs, std::net); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use smolcord::shard::Compression;
use smolcord_app::config::{Config, ConfigError};

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

fn load(args: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    smol::block_on(Config::load(args, env))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn defaults_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    let config = load(None, &env_of(&[("SMOLCORD_STATE_DIR", state)])).unwrap();
    assert_eq!(config, Config::with_state_dir(dir.path()));
    assert_eq!(config.gateway_url, None);
    assert_eq!(config.api_base, "https://discord.com/api/v10");
    assert_eq!(config.intents, 4096);
    assert_eq!(config.shard, [0, 1]);
    assert!(config.compress == Compression::None && !config.tofu);
    assert_eq!(config.owner_id, None);
    assert!(config.allowed_user_ids.is_empty());
    assert_eq!(config.transcribe_cmd, None);
    assert_eq!(config.transcribe_timeout_s, 25);
    assert_eq!(config.agent_cmd, None);
    assert_eq!(config.agent_timeout_s, 300);
    assert_eq!(config.dm_fallback_cmd, None);
    assert_eq!(config.dm_fallback_timeout_s, 15);
    assert_eq!(config.results_poll_ms, 1000);
    assert_eq!(config.max_attachment_bytes, 25 * 1024 * 1024);
    assert_eq!(config.max_result_bytes, 1024 * 1024);
    assert_eq!(config.heartbeat_warn_ms, 1000);
    assert_eq!(config.token_file, None);
    assert_eq!(config.agent_concurrency, 2);
    assert_eq!(config.safe_mode_after_failures, 3);
    assert_eq!(config.journal_capacity, 32);
}

#[test]
fn state_dir_falls_back_to_xdg_then_home_then_errors() {
    let config = load(
        None,
        &env_of(&[("XDG_STATE_HOME", "/xdg"), ("HOME", "/home/u")]),
    )
    .unwrap();
    assert_eq!(config.state_dir, Path::new("/xdg/smolcord"));
    // A relative XDG path is invalid by the XDG spec and ignored.
    let config = load(
        None,
        &env_of(&[("XDG_STATE_HOME", "rel"), ("HOME", "/home/u")]),
    )
    .unwrap();
    assert_eq!(config.state_dir, Path::new("/home/u/.local/state/smolcord"));
    let err = load(None, &env_of(&[])).unwrap_err();
    assert!(err.to_string().contains("SMOLCORD_STATE_DIR"), "{err}");
}

#[test]
fn every_key_is_read_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{
        "gateway_url": "ws://127.0.0.1:1",
        "api_base": "http://127.0.0.1:2/api/v10/",
        "state_dir": "/var/lib/smolcord",
        "intents": 37377,
        "shard": [1, 2],
        "compress": true,
        "owner_id": 80351110224678912,
        "allowed_user_ids": ["1", 2],
        "tofu": true,
        "transcribe_cmd": ["whisper", "--fast"],
        "transcribe_timeout_s": 5,
        "agent_cmd": ["agent"],
        "agent_timeout_s": 6,
        "dm_fallback_cmd": ["mail", "-s", "x"],
        "dm_fallback_timeout_s": 7,
        "results_poll_ms": 250,
        "max_attachment_bytes": 1000,
        "max_result_bytes": 2000,
        "heartbeat_warn_ms": 500,
        "token_file": "/run/secrets/token",
        "agent_concurrency": 4,
        "safe_mode_after_failures": 9,
        "journal_capacity": 64
    }"#;
    let path = write(dir.path(), "c.json", text);
    let config = load(Some(&path), &env_of(&[])).unwrap();
    assert_eq!(config.gateway_url.as_deref(), Some("ws://127.0.0.1:1"));
    assert_eq!(
        config.api_base, "http://127.0.0.1:2/api/v10",
        "trailing slash trimmed"
    );
    assert_eq!(config.state_dir, Path::new("/var/lib/smolcord"));
    assert_eq!(config.intents, 37377);
    assert_eq!(config.shard, [1, 2]);
    assert!(config.compress == Compression::Zlib && config.tofu);
    assert_eq!(config.owner_id.as_deref(), Some("80351110224678912"));
    assert_eq!(config.allowed_user_ids, ["1", "2"]);
    assert_eq!(
        config.transcribe_cmd,
        Some(vec!["whisper".into(), "--fast".into()])
    );
    assert_eq!(config.transcribe_timeout_s, 5);
    assert_eq!(config.agent_cmd, Some(vec!["agent".into()]));
    assert_eq!(config.agent_timeout_s, 6);
    assert_eq!(config.dm_fallback_cmd.as_ref().map(Vec::len), Some(3));
    assert_eq!(config.dm_fallback_timeout_s, 7);
    assert_eq!(config.results_poll_ms, 250);
    assert_eq!(config.max_attachment_bytes, 1000);
    assert_eq!(config.max_result_bytes, 2000);
    assert_eq!(config.heartbeat_warn_ms, 500);
    assert_eq!(
        config.token_file.as_deref(),
        Some(Path::new("/run/secrets/token"))
    );
    assert_eq!(config.agent_concurrency, 4);
    assert_eq!(config.safe_mode_after_failures, 9);
    assert_eq!(config.journal_capacity, 64);
}

#[test]
fn env_overrides_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.json",
        r#"{"gateway_url": "ws://file", "api_base": "http://file", "state_dir": "/file"}"#,
    );
    let env = env_of(&[
        ("SMOLCORD_GATEWAY_URL", "wss://env"),
        ("SMOLCORD_API_BASE", "https://env/api"),
        ("SMOLCORD_STATE_DIR", "/env"),
    ]);
    let config = load(Some(&path), &env).unwrap();
    assert_eq!(config.gateway_url.as_deref(), Some("wss://env"));
    assert_eq!(config.api_base, "https://env/api");
    assert_eq!(config.state_dir, Path::new("/env"));
    // A blank variable counts as unset.
    let config = load(Some(&path), &env_of(&[("SMOLCORD_API_BASE", " ")])).unwrap();
    assert_eq!(config.api_base, "http://file");
}

#[test]
fn file_sources_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    write(dir.path(), "config.json", r#"{"intents": 1}"#);
    let named = write(dir.path(), "named.json", r#"{"intents": 2}"#);
    let args = write(dir.path(), "args.json", r#"{"intents": 3}"#);
    let named_str = named.to_str().unwrap();

    let implicit = load(None, &env_of(&[("SMOLCORD_STATE_DIR", state)])).unwrap();
    assert_eq!(implicit.intents, 1, "STATE_DIR/config.json");
    let env = env_of(&[
        ("SMOLCORD_STATE_DIR", state),
        ("SMOLCORD_CONFIG", named_str),
    ]);
    assert_eq!(load(None, &env).unwrap().intents, 2, "SMOLCORD_CONFIG");
    assert_eq!(load(Some(&args), &env).unwrap().intents, 3, "--config wins");
}

#[test]
fn missing_explicit_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let err = load(Some(&missing), &env_of(&[("SMOLCORD_STATE_DIR", "/s")])).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("nope.json") && text.contains("not found"),
        "{text}"
    );
    let env = env_of(&[
        ("SMOLCORD_STATE_DIR", "/s"),
        ("SMOLCORD_CONFIG", missing.to_str().unwrap()),
    ]);
    assert!(load(None, &env).is_err());
}

#[test]
fn unknown_key_is_named_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.json",
        "{\n  \"tofu\": true,\n  \"alowed_user_ids\": []\n}",
    );
    let err = load(Some(&path), &env_of(&[("SMOLCORD_STATE_DIR", "/s")])).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("config {}", path.display())),
        "{text}"
    );
    assert!(text.contains("key `alowed_user_ids`"), "{text}");
    assert!(text.contains("line 3"), "{text}");
}

#[test]
fn wrong_type_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.json", "{\n  \"tofu\": \"yes\"\n}");
    let err = load(Some(&path), &env_of(&[("SMOLCORD_STATE_DIR", "/s")])).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("key `tofu`"), "{text}");
    assert!(text.contains("expected a boolean"), "{text}");
    assert!(text.contains("line 2 col"), "{text}");
}

#[test]
fn compress_takes_a_bool_or_the_stream_name() {
    let dir = tempfile::tempdir().unwrap();
    let env = env_of(&[("SMOLCORD_STATE_DIR", "/s")]);
    for (value, expected) in [
        ("true", Compression::Zlib),
        ("false", Compression::None),
        ("\"zlib\"", Compression::Zlib),
        ("\"zstd\"", Compression::Zstd),
    ] {
        let path = write(dir.path(), "c.json", &format!("{{\"compress\": {value}}}"));
        let config = load(Some(&path), &env).unwrap();
        assert_eq!(config.compress, expected, "{value}");
    }
    for value in ["\"yes\"", "\"zstd-stream\"", "1", "null"] {
        let path = write(
            dir.path(),
            "c.json",
            &format!("{{\n  \"compress\": {value}\n}}"),
        );
        let text = load(Some(&path), &env).unwrap_err().to_string();
        assert!(text.contains("key `compress`"), "{value}: {text}");
        assert!(
            text.contains(r#"expected true, false, "zlib" or "zstd""#),
            "{value}: {text}"
        );
        assert!(text.contains("line 2 col"), "{value}: {text}");
    }
}

#[test]
fn bad_shard_is_refused() {
    let env = env_of(&[("SMOLCORD_STATE_DIR", "/s")]);
    for text in [
        r#"{"shard": [2, 2]}"#,
        r#"{"shard": [0, 0]}"#,
        r#"{"shard": [0, 1, 2]}"#,
    ] {
        let err = Config::parse(text, Path::new("c.json"), &env).unwrap_err();
        assert!(err.to_string().contains("key `shard`"), "{text}: {err}");
    }
    assert!(Config::parse(r#"{"shard": [1, 2]}"#, Path::new("c.json"), &env).is_ok());
}

#[test]
fn token_key_is_refused_with_advice() {
    let env = env_of(&[("SMOLCORD_STATE_DIR", "/s")]);
    let err = Config::parse(r#"{"token": "abc.def"}"#, Path::new("c.json"), &env).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("key `token`"), "{text}");
    assert!(
        text.contains("DISCORD_TOKEN") && text.contains("token_file"),
        "{text}"
    );
    assert!(
        !text.contains("abc.def"),
        "the value is never echoed: {text}"
    );
}

#[test]
fn token_from_token_file_is_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "token", "  Bot sekrit.token.value \n");
    let path = write(dir.path(), "c.json", r#"{"token_file": "token"}"#);
    let config = load(Some(&path), &env_of(&[("SMOLCORD_STATE_DIR", "/s")])).unwrap();
    let token = smol::block_on(config.token(&env_of(&[]))).unwrap().unwrap();
    assert_eq!(token.expose(), "sekrit.token.value");
    assert!(!format!("{config:?} {token:?}").contains("sekrit"));
    // DISCORD_TOKEN wins; a blank one does not count.
    let env = env_of(&[("DISCORD_TOKEN", "from-env")]);
    let token = smol::block_on(config.token(&env)).unwrap().unwrap();
    assert_eq!(token.expose(), "from-env");
    let env = env_of(&[("DISCORD_TOKEN", " ")]);
    let token = smol::block_on(config.token(&env)).unwrap().unwrap();
    assert_eq!(token.expose(), "sekrit.token.value");
}

#[test]
fn token_absent_missing_or_empty() {
    let dir = tempfile::tempdir().unwrap();
    let none = Config::with_state_dir(dir.path());
    assert!(smol::block_on(none.token(&env_of(&[]))).unwrap().is_none());

    let mut missing = Config::with_state_dir(dir.path());
    missing.token_file = Some(dir.path().join("absent"));
    let err = smol::block_on(missing.token(&env_of(&[]))).unwrap_err();
    assert!(err.to_string().contains("absent"), "{err}");

    let mut empty = Config::with_state_dir(dir.path());
    empty.token_file = Some(write(dir.path(), "empty", "\n"));
    let err = smol::block_on(empty.token(&env_of(&[]))).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
}

/// Generous: refusing `/dev/zero` reads 1 MiB + 1 byte; reading it whole
/// (what the cap prevents) would never end.
const FAST: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `f` on its own thread and gives its result, or panics after
/// [`FAST`] (a read without a cap never returns from `/dev/zero`).
fn refused_fast<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(FAST)
        .expect("the file was not refused within the bound (read whole?)")
}

#[test]
fn a_dev_zero_config_is_refused_fast_naming_the_file() {
    let err = refused_fast(|| {
        load(
            Some(Path::new("/dev/zero")),
            &env_of(&[("SMOLCORD_STATE_DIR", "/s")]),
        )
        .unwrap_err()
    });
    let text = err.to_string();
    assert!(
        text.contains("config /dev/zero") && text.contains("is a device, not a regular file"),
        "{text}"
    );
    // SMOLCORD_CONFIG takes the same road.
    let err = refused_fast(|| {
        load(
            None,
            &env_of(&[
                ("SMOLCORD_STATE_DIR", "/s"),
                ("SMOLCORD_CONFIG", "/dev/zero"),
            ]),
        )
        .unwrap_err()
    });
    assert!(err.to_string().contains("is a device"), "{err}");
}

#[test]
fn an_oversized_regular_config_is_refused_and_one_at_the_cap_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let cap = smolcord_app::config::CONFIG_MAX_BYTES as usize;
    // A valid object padded with spaces to exactly the cap parses.
    let mut text = String::from(r#"{"tofu": true}"#);
    text.push_str(&" ".repeat(cap - text.len()));
    let at_cap = write(dir.path(), "at-cap.json", &text);
    assert!(
        load(Some(&at_cap), &env_of(&[("SMOLCORD_STATE_DIR", "/s")]))
            .unwrap()
            .tofu
    );
    text.push(' ');
    let over = write(dir.path(), "over.json", &text);
    let err = load(Some(&over), &env_of(&[("SMOLCORD_STATE_DIR", "/s")])).unwrap_err();
    assert!(
        err.to_string().contains("over.json") && err.to_string().contains("larger than"),
        "{err}"
    );
}

#[test]
fn a_dev_zero_token_file_is_refused_fast_naming_the_file() {
    let mut config = Config::with_state_dir("/s");
    config.token_file = Some(PathBuf::from("/dev/zero"));
    let err = refused_fast(move || smol::block_on(config.token(&env_of(&[]))).unwrap_err());
    let text = err.to_string();
    assert!(
        text.contains("token_file /dev/zero") && text.contains("is a device, not a regular file"),
        "{text}"
    );
}
