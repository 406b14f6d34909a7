//! One capturing logger per test binary: every record at debug and above,
//! from every target, kept in memory for the test to read (and echoed to
//! stderr with `TEST_LOG=1`). Each new line wakes [`super::wait::wait_until`].
//!
//! Tests run at once on threads of their own, into this one log. libtest
//! names each test's thread after the test (`module::test`), so a line
//! logged on another test's thread is that test's, and a reader never sees
//! it. A line from any other thread (a blocking pool's, a simulator's, an
//! unnamed one) may be anyone's: every reader sees it, and a test that
//! reads such lines takes [`serial`].

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

/// One captured record.
#[derive(Clone, Debug)]
pub struct Line {
    pub level: log::Level,
    pub target: String,
    pub text: String,
    /// The name of the thread that logged it.
    pub thread: Option<String>,
}

impl Line {
    /// `LEVEL target: text`.
    pub fn formatted(&self) -> String {
        format!("{} {}: {}", self.level, self.target, self.text)
    }
}

static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());

thread_local! {
    /// Where this thread's reading starts (set by [`serial`]).
    static SINCE: Cell<usize> = const { Cell::new(0) };
}

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Debug
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = Line {
            level: record.level(),
            target: record.target().to_owned(),
            text: record.args().to_string(),
            thread: std::thread::current().name().map(str::to_owned),
        };
        if std::env::var_os("TEST_LOG").is_some() {
            eprintln!("{}", line.formatted());
        }
        lines().push(line);
        super::wait::changed();
    }

    fn flush(&self) {}
}

fn lines() -> MutexGuard<'static, Vec<Line>> {
    LINES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a thread of this name runs a test: libtest names them after the
/// test's path, and every test here sits in a module.
fn is_test_thread(name: &str) -> bool {
    name.contains("::")
}

/// What `pick` makes of each line the current thread may read: from its
/// own start on, none logged on another test's thread.
fn readable<T>(mut pick: impl FnMut(&Line) -> Option<T>) -> Vec<T> {
    let me = std::thread::current().name().map(str::to_owned);
    let me = me.as_deref().filter(|name| is_test_thread(name));
    let since = SINCE.with(Cell::get);
    lines()
        .iter()
        .skip(since)
        .filter(|line| match (me, line.thread.as_deref()) {
            (Some(me), Some(thread)) if is_test_thread(thread) => thread == me,
            _ => true,
        })
        .filter_map(&mut pick)
        .collect()
}

/// Installs the capturing logger (the first call in a binary; later calls
/// do nothing).
pub fn capture() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// For tests that read what other threads log (a blocking pool's, a
/// simulator's: lines no test's name marks): installs the logger,
/// serialises them, and starts their reading at the log's end. Hold the
/// guard for the whole test.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    capture();
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let end = lines().len();
    SINCE.with(|since| since.set(end));
    guard
}

/// Every line this test may read, formatted.
pub fn captured() -> Vec<String> {
    readable(|line| Some(line.formatted()))
}

/// smolcord's warnings this test may read (their text).
pub fn warnings() -> Vec<String> {
    readable(|line| {
        (line.level == log::Level::Warn && line.target.starts_with("smolcord"))
            .then(|| line.text.clone())
    })
}

/// The warnings containing `needle`.
pub fn warnings_with(needle: &str) -> Vec<String> {
    warnings()
        .into_iter()
        .filter(|w| w.contains(needle))
        .collect()
}
