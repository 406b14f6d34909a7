//! [`OutputProgress`]: a running command's stdout so far, for a caller
//! that shows it while the command runs (an agent that prints as it
//! thinks). Bounded: the count of bytes seen and the last
//! [`PROGRESS_TAIL`] of them, whatever the command prints.
//!
//! ```
//! use smolcord::offload::OutputProgress;
//! let progress = OutputProgress::default();
//! assert_eq!(progress.snapshot(), (0, String::new()));
//! ```

use std::sync::{Arc, Mutex};

/// Bytes of the end of stdout kept for a look while the command runs.
pub const PROGRESS_TAIL: usize = 8 * 1024;

/// A command's stdout so far (cheap to clone: clones share it).
#[derive(Clone, Debug, Default)]
pub struct OutputProgress(Arc<Mutex<Seen>>);

#[derive(Debug, Default)]
struct Seen {
    bytes: u64,
    tail: Vec<u8>,
}

impl OutputProgress {
    /// Notes a chunk the command printed.
    pub(crate) fn record(&self, chunk: &[u8]) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.bytes += chunk.len() as u64;
        let chunk = &chunk[chunk.len().saturating_sub(PROGRESS_TAIL)..];
        seen.tail.extend_from_slice(chunk);
        let excess = seen.tail.len().saturating_sub(PROGRESS_TAIL);
        seen.tail.drain(..excess);
    }

    /// Bytes printed so far (grows with every chunk: a caller compares it
    /// with the last it showed), and the end of them as text (a character
    /// cut at the tail's start, or invalid UTF-8, is replaced).
    pub fn snapshot(&self) -> (u64, String) {
        let seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        (seen.bytes, String::from_utf8_lossy(&seen.tail).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_the_count_and_a_bounded_tail() {
        let progress = OutputProgress::default();
        progress.record(b"hello ");
        progress.record(b"world");
        assert_eq!(progress.snapshot(), (11, "hello world".into()));
        progress.record(&vec![b'x'; PROGRESS_TAIL * 2]);
        let (bytes, tail) = progress.snapshot();
        assert_eq!(bytes, 11 + 2 * PROGRESS_TAIL as u64);
        assert_eq!(tail.len(), PROGRESS_TAIL);
    }
}
