//! The live websocket connections, as the rest of the simulator reaches
//! them: a queue to each one's writer and one to its reader. A connection
//! registers here when it opens and leaves when it ends; what it sends
//! is queued (never awaited), so the state's lock is never held across a
//! socket write.

use super::faults::Fault;
use crate::model::clock::later;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What a connection's writer sends, in order.
pub(crate) enum Out {
    /// A JSON frame (compressed by the writer if the connection asked).
    Text { text: String, not_before: Instant },
    /// A close frame; the writer stops after it.
    Close {
        code: u16,
        reason: String,
        not_before: Instant,
    },
    /// Switch per-payload compression (Identify `compress: true`).
    PayloadCompression(bool),
    /// `Fault::Flood`: this many DMs for the session, made one at a time
    /// as the socket takes them.
    Flood { session_id: String, count: u64 },
    /// `Fault::PingFlood`.
    Pings(u64),
    /// `Fault::Fragmented`.
    Fragmented { total: usize, fragment: usize },
}

/// What the rest of the simulator asks of a connection's reader.
pub(crate) enum ConnCmd {
    Fault(Fault),
    /// Another connection resumed this one's session: drop this one.
    Superseded,
}

/// The simulator's handle on one live websocket connection.
pub(crate) struct ConnEntry {
    pub(crate) out: async_channel::Sender<Out>,
    pub(crate) cmd: async_channel::Sender<ConnCmd>,
    /// `Fault::Delay`: hold every frame back this long.
    pub(crate) delay: Duration,
}

impl ConnEntry {
    pub(crate) fn send_text(&self, text: String) {
        // A full or closed queue means the connection is going away; the
        // session's replay buffer still has every dispatch.
        let _ = self.out.try_send(Out::Text {
            text,
            not_before: later(Instant::now(), self.delay),
        });
    }

    pub(crate) fn send_close(&self, code: u16, reason: &str) {
        let _ = self.out.try_send(Out::Close {
            code,
            reason: reason.to_owned(),
            not_before: later(Instant::now(), self.delay),
        });
    }
}

/// Every live connection by id.
pub(crate) struct Conns {
    entries: HashMap<u64, ConnEntry>,
    next: u64,
}

impl Default for Conns {
    fn default() -> Conns {
        Conns {
            entries: HashMap::new(),
            next: 1,
        }
    }
}

impl Conns {
    /// Registers a new connection; returns its id (1, 2, …).
    pub(crate) fn open(
        &mut self,
        out: async_channel::Sender<Out>,
        cmd: async_channel::Sender<ConnCmd>,
    ) -> u64 {
        let id = self.next;
        self.next += 1;
        self.entries.insert(
            id,
            ConnEntry {
                out,
                cmd,
                delay: Duration::ZERO,
            },
        );
        id
    }

    /// Unregisters a connection that ended.
    pub(crate) fn close(&mut self, id: u64) {
        self.entries.remove(&id);
    }

    pub(crate) fn get(&self, id: u64) -> Option<&ConnEntry> {
        self.entries.get(&id)
    }

    /// Queues `out` for connection `id`'s writer, if it is still there.
    pub(crate) fn queue(&self, id: u64, out: Out) {
        if let Some(entry) = self.entries.get(&id) {
            // A full or closed queue means the connection is going away.
            let _ = entry.out.try_send(out);
        }
    }

    /// Queues a frame for connection `id` (its delay applies).
    pub(crate) fn send_text(&self, id: u64, text: String) {
        if let Some(entry) = self.entries.get(&id) {
            entry.send_text(text);
        }
    }

    /// Tells connection `id`'s reader that another connection resumed
    /// its session.
    pub(crate) fn supersede(&self, id: u64) {
        if let Some(entry) = self.entries.get(&id) {
            let _ = entry.cmd.try_send(ConnCmd::Superseded);
        }
    }

    /// Applies a gateway fault to every live connection; returns how many
    /// it reached. `Fault::Delay` is kept here (the writer reads it from
    /// each frame's `not_before`); the others go to each reader.
    pub(crate) fn fault_all(&mut self, fault: Fault) -> usize {
        if let Fault::Delay(delay) = fault {
            for entry in self.entries.values_mut() {
                entry.delay = delay;
            }
            return self.entries.len();
        }
        self.entries
            .values()
            .filter(|entry| entry.cmd.try_send(ConnCmd::Fault(fault.clone())).is_ok())
            .count()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}
