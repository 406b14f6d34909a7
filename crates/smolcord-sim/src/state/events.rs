//! Events the simulator reports to tests, so a test waits for what it
//! expects instead of sleeping and hoping.

use smolcord::protocol::Identify;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Something that happened in the simulator. `conn` is the connection
/// number (as in [`ConnStats::id`](crate::ConnStats::id)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SimEvent {
    /// A websocket connection was accepted.
    Connected {
        /// Connection number.
        conn: u64,
        /// Request path (`/` or `/resume`).
        path: String,
    },
    /// An Identify was accepted and READY sent.
    Identified {
        /// Connection number.
        conn: u64,
        /// The new session.
        session_id: String,
        /// What the client sent (its `Debug` hides the token).
        identify: Identify,
    },
    /// A Resume was accepted: `replayed` dispatches after `seq`, then RESUMED.
    Resumed {
        /// Connection number.
        conn: u64,
        /// The resumed session.
        session_id: String,
        /// The client's `seq`.
        seq: u64,
        /// Dispatches replayed (RESUMED not counted).
        replayed: usize,
    },
    /// A heartbeat arrived.
    Heartbeat {
        /// Connection number.
        conn: u64,
        /// Its `d`.
        seq: Option<u64>,
        /// Time since the previous beat (the first: since Hello).
        gap: Duration,
    },
    /// Any decodable command arrived (heartbeats included). `raw` is the
    /// frame text with the token replaced by `<redacted>`.
    CommandReceived {
        /// Connection number.
        conn: u64,
        /// Its opcode number.
        op: u8,
        /// The frame text.
        raw: String,
    },
    /// The simulator closed a connection: `Some(code)` with a close frame,
    /// `None` by dropping TCP.
    ClosedByServer {
        /// Connection number.
        conn: u64,
        /// The close code sent, if any.
        code: Option<u16>,
    },
    /// The client ended a connection: `Some(code)` with a close frame
    /// (`Some(1005)` for a close frame without a code), `None` by dropping
    /// TCP.
    ClientClosed {
        /// Connection number.
        conn: u64,
        /// The client's close code.
        code: Option<u16>,
    },
    /// A dispatch got a sequence number in a session (sent, or buffered for
    /// replay when the session's client is away).
    Dispatched {
        /// The session.
        session_id: String,
        /// Event name.
        event: String,
        /// Its `s`.
        seq: u64,
    },
    /// The simulator sent op 9 Invalid Session.
    InvalidSession {
        /// Connection number.
        conn: u64,
        /// Its `d`.
        resumable: bool,
    },
    /// A REST request was answered.
    Rest {
        /// HTTP method.
        method: String,
        /// Path without the query.
        path: String,
        /// Status answered.
        status: u16,
    },
}

/// Events kept for [`Simulator::wait_for`](crate::Simulator::wait_for) to
/// look back at.
const HISTORY: usize = 10_000;

/// History plus live subscribers.
#[derive(Default)]
pub(crate) struct EventBus {
    history: VecDeque<SimEvent>,
    subscribers: Vec<async_channel::Sender<SimEvent>>,
}

impl EventBus {
    pub(crate) fn emit(&mut self, event: SimEvent) {
        log::debug!("sim event: {event:?}");
        self.subscribers
            .retain(|tx| tx.try_send(event.clone()).is_ok());
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(event);
    }

    pub(crate) fn subscribe(&mut self) -> async_channel::Receiver<SimEvent> {
        let (tx, rx) = async_channel::unbounded();
        self.subscribers.push(tx);
        rx
    }

    /// The first matching event in the history, or else a subscription for
    /// the ones to come (taken under the same lock, so none slips between).
    pub(crate) fn find_or_subscribe(
        &mut self,
        pred: &mut impl FnMut(&SimEvent) -> bool,
    ) -> Result<SimEvent, async_channel::Receiver<SimEvent>> {
        match self.history.iter().find(|e| pred(e)) {
            Some(event) => Ok(event.clone()),
            None => Err(self.subscribe()),
        }
    }

    pub(crate) fn history(&self) -> Vec<SimEvent> {
        self.history.iter().cloned().collect()
    }
}

/// Waits on `rx` for an event matching `pred`, until `timeout`.
pub async fn next_matching(
    rx: &async_channel::Receiver<SimEvent>,
    timeout: Duration,
    mut pred: impl FnMut(&SimEvent) -> bool,
) -> Option<SimEvent> {
    let deadline = crate::model::clock::later(Instant::now(), timeout);
    let search = async {
        while let Ok(event) = rx.recv().await {
            if pred(&event) {
                return Some(event);
            }
        }
        None
    };
    futures_lite::future::or(search, async {
        async_io::Timer::at(deadline).await;
        None
    })
    .await
}
