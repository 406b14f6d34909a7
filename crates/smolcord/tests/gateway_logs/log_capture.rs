//! The capturing log itself: a test reads its own lines and those of
//! threads no test owns, never another test's, so tests that read the log
//! can run at once.

use crate::support::logs;

/// Logs `text` on a new thread named `name` (or unnamed) and waits for it.
fn log_on_thread(name: Option<&str>, text: &'static str) {
    let mut thread = std::thread::Builder::new();
    if let Some(name) = name {
        thread = thread.name(name.to_owned());
    }
    thread
        .spawn(move || log::warn!(target: "smolcord::test", "{text}"))
        .expect("a thread")
        .join()
        .expect("it logged");
}

#[test]
fn a_test_reads_its_own_lines_and_unowned_ones_never_another_tests() {
    logs::capture();
    log::warn!(target: "smolcord::test", "mine 7f3a");
    log_on_thread(Some("another_module::another_test"), "theirs 7f3a");
    log_on_thread(Some("blocking-1"), "a pool's 7f3a");
    log_on_thread(None, "unnamed 7f3a");
    let read = logs::warnings_with("7f3a");
    assert_eq!(read, ["mine 7f3a", "a pool's 7f3a", "unnamed 7f3a"]);
}
