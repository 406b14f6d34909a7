//! One capturing logger per test binary: every record at debug and above,
//! from every target, kept in memory for the test to read (and echoed to
//! stderr with `TEST_LOG=1`). Each new line wakes [`super::wait::wait_until`].

use std::sync::{Mutex, MutexGuard, Once, PoisonError};

/// One captured record.
#[derive(Clone, Debug)]
pub struct Line {
    pub level: log::Level,
    pub target: String,
    pub text: String,
}

impl Line {
    /// `LEVEL target: text`.
    pub fn formatted(&self) -> String {
        format!("{} {}: {}", self.level, self.target, self.text)
    }
}

static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());

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

/// Installs the capturing logger (the first call in a binary; later calls
/// do nothing).
pub fn capture() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// For tests that read the log: installs the logger, serialises them
/// (tests run on parallel threads into one log) and starts from an empty
/// log. Hold the guard for the whole test.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    capture();
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    lines().clear();
    guard
}

/// Every line captured so far, formatted.
pub fn captured() -> Vec<String> {
    lines().iter().map(Line::formatted).collect()
}

/// smolcord's warnings captured so far (their text).
pub fn warnings() -> Vec<String> {
    lines()
        .iter()
        .filter(|l| l.level == log::Level::Warn && l.target.starts_with("smolcord"))
        .map(|l| l.text.clone())
        .collect()
}

/// The warnings containing `needle`.
pub fn warnings_with(needle: &str) -> Vec<String> {
    warnings()
        .into_iter()
        .filter(|w| w.contains(needle))
        .collect()
}
