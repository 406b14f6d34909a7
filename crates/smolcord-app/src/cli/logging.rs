//! Logging to stderr with env_logger: `RUST_LOG` picks the level (default
//! `info`); each line carries a timestamp so a flap rate is readable.
//!
//! Whatever `RUST_LOG` says, the crates that print wire data at `trace` —
//! WebSocket frames (the Identify frame carries the token), HTTP headers
//! (`Authorization: Bot …`), TLS handshake dumps — are capped at `debug`:
//! `RUST_LOG=trace` must never put the token in a log.

use log::{Level, Log, Metadata, Record};

/// Crates (log target prefixes) whose `trace` output carries frames,
/// headers or handshakes; they log at `debug` at most.
const CAPPED_TARGETS: &[&str] = &[
    "tungstenite",
    "async_tungstenite",
    "rustls",
    "futures_rustls",
    "ureq",
    "ureq_proto",
];

/// The most a capped crate may log.
const CAP: Level = Level::Debug;

/// Installs the logger once (later calls do nothing); `default_filter`
/// applies when `RUST_LOG` is unset.
pub fn init_logging(default_filter: &str) {
    let env = env_logger::Env::default().default_filter_or(default_filter);
    let inner = env_logger::Builder::from_env(env)
        .format_timestamp_millis()
        .target(env_logger::Target::Stderr)
        .build();
    let max_level = inner.filter();
    if log::set_boxed_logger(Box::new(Capped { inner })).is_ok() {
        log::set_max_level(max_level);
    }
}

/// Whether a record from `target` at `level` is above its crate's cap.
fn over_cap(target: &str, level: Level) -> bool {
    level > CAP
        && CAPPED_TARGETS.iter().any(|capped| {
            target
                .strip_prefix(capped)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
}

/// env_logger behind the cap: a filter directive (`RUST_LOG=
/// tungstenite::protocol=trace`) cannot lift it.
struct Capped {
    inner: env_logger::Logger,
}

impl Log for Capped {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        !over_cap(metadata.target(), metadata.level()) && self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !over_cap(record.target(), record.level()) {
            self.inner.log(record);
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_printing_crates_are_capped_at_debug() {
        assert!(over_cap("tungstenite::protocol", Level::Trace));
        assert!(over_cap("tungstenite", Level::Trace));
        assert!(over_cap("ureq_proto::util", Level::Trace));
        assert!(over_cap("rustls::client::hs", Level::Trace));
        assert!(!over_cap("tungstenite::protocol", Level::Debug));
        assert!(!over_cap("ureq", Level::Warn));
    }

    #[test]
    fn other_targets_are_not_capped() {
        assert!(!over_cap("smolcord::shard", Level::Trace));
        // A prefix of the name is not the crate.
        assert!(!over_cap("tungstenite_ext", Level::Trace));
        assert!(!over_cap("ureqx::y", Level::Trace));
    }
}
