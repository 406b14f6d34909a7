//! A test binary's default thread count, for binaries whose tests mostly
//! wait (on a simulator's timers, a child process, Discord's 1–5 s pauses)
//! rather than compute.
//!
//! libtest runs as many tests at once as `RUST_TEST_THREADS` says, or one
//! per core: two on a 2-core CI machine, where the application's binary
//! then spent 138 s at 28 % of one core waiting. It offers no per-binary
//! setting, and a workspace-wide one (`[env]` in `.cargo/config.toml`)
//! would reach every binary alike, while each waits (and times its waits)
//! differently: one with timing bounds that hold at four at once but not
//! at six under load wants four, not eight. So a binary opts in here, with
//! its own count: the variable is set in an ELF constructor, before `main`
//! (and libtest) reads it and before any thread exists. A value the caller
//! set, or `--test-threads`, still wins.

/// Sets `RUST_TEST_THREADS` to `$threads` for this test binary unless the
/// caller set it. Use once, in the binary's `main.rs`.
#[macro_export]
macro_rules! default_test_threads {
    ($threads:literal) => {
        #[cfg(target_os = "linux")]
        #[used]
        #[link_section = ".init_array"]
        static DEFAULT_TEST_THREADS: extern "C" fn() = {
            extern "C" fn set_default_test_threads() {
                if std::env::var_os("RUST_TEST_THREADS").is_none() {
                    // Before main: one thread, nothing else reads the
                    // environment yet.
                    std::env::set_var("RUST_TEST_THREADS", stringify!($threads));
                }
            }
            set_default_test_threads
        };
    };
}
