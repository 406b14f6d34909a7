//! Logging to stderr with env_logger: `RUST_LOG` picks the level (default
//! `info`); each line carries a timestamp so a flap rate is readable.

/// Installs the logger once (later calls do nothing); `default_filter`
/// applies when `RUST_LOG` is unset.
pub fn init_logging(default_filter: &str) {
    let env = env_logger::Env::default().default_filter_or(default_filter);
    let _ = env_logger::Builder::from_env(env)
        .format_timestamp_millis()
        .target(env_logger::Target::Stderr)
        .try_init();
}
