//! The runtime book: `runtime.json`'s state ([`RuntimeState`]) together
//! with its coalescing writer, so that every change also schedules the
//! write. One method per change; the borrow of the state never leaves a
//! method (nor is held across an `.await`).

use crate::bridge::access::restart::RuntimeState;
use crate::bridge::store::persist::Coalescing;
use smolcord::protocol::Snowflake;
use std::cell::RefCell;

/// `runtime.json`: what it holds, and its writer.
pub(crate) struct RuntimeBook {
    state: RefCell<RuntimeState>,
    writer: Coalescing,
}

impl RuntimeBook {
    pub fn new(state: RuntimeState, writer: Coalescing) -> RuntimeBook {
        RuntimeBook {
            state: RefCell::new(state),
            writer,
        }
    }

    /// Applies `change`; if it says the state changed, schedules the write.
    fn change(&self, change: impl FnOnce(&mut RuntimeState) -> bool) {
        let mut state = self.state.borrow_mut();
        if change(&mut state) {
            self.writer.set(&*state);
        }
    }

    /// Reads the state (for a pure verdict that takes it whole).
    pub fn read<R>(&self, read: impl FnOnce(&RuntimeState) -> R) -> R {
        read(&self.state.borrow())
    }

    pub fn bot_user(&self) -> Option<Snowflake> {
        self.state.borrow().bot_user_id
    }

    /// Remembers the bot's own user id (from READY).
    pub fn remember_bot(&self, id: Snowflake) {
        self.change(|state| state.bot_user_id.replace(id) != Some(id));
    }

    /// Whether `message` was handled already (by this run or, on disk,
    /// an earlier one).
    pub fn is_processed(&self, channel: Snowflake, message: Snowflake) -> bool {
        self.state.borrow().is_processed(channel, message)
    }

    /// The last processed message of `channel`, if any.
    pub fn processed_mark(&self, channel: Snowflake) -> Option<Snowflake> {
        self.state.borrow().processed.get(&channel).copied()
    }

    /// Every channel's processed mark, `(channel, last)`.
    pub fn processed_marks(&self) -> Vec<(Snowflake, Snowflake)> {
        let state = self.state.borrow();
        state
            .processed
            .iter()
            .map(|(c, last)| (*c, *last))
            .collect()
    }

    /// Marks a message processed and waits until the mark is on disk: it
    /// is what keeps a replay of the message (a resume from an older seq)
    /// from being handled again. False if the write failed (logged and
    /// journalled by the writer).
    pub async fn record_processed(&self, channel: Snowflake, message: Snowflake) -> bool {
        self.change(|state| {
            state.mark_processed(channel, message);
            true
        });
        self.writer.flush().await
    }

    /// Whether the owner's command (interaction `id`) was handled already.
    pub fn interaction_handled(&self, id: Snowflake) -> bool {
        self.state.borrow().interaction_handled(id)
    }

    /// Records the owner's command `id` as handled and waits until that is
    /// on disk (a replay of it is then skipped). False if the write failed
    /// (logged and journalled by the writer).
    pub async fn record_interaction(&self, id: Snowflake) -> bool {
        self.change(|state| {
            state.mark_interaction(id);
            true
        });
        self.writer.flush().await
    }

    /// Remembers an answered user's DM channel for good (written in the
    /// background: losing it costs one `POST /users/@me/channels`,
    /// nothing else).
    pub fn remember_dm(&self, user: Snowflake, channel: Snowflake) {
        self.change(|state| state.remember_dm(user, channel));
    }

    /// The remembered DM channel of `user`.
    pub fn dm_channel(&self, user: Snowflake) -> Option<Snowflake> {
        self.state.borrow().dm_channels.get(&user).copied()
    }

    /// The answered user whose DM channel `channel` is.
    pub fn dm_user(&self, channel: Snowflake) -> Option<Snowflake> {
        let state = self.state.borrow();
        let found = state.dm_channels.iter().find(|(_, c)| **c == channel);
        found.map(|(user, _)| *user)
    }

    /// Forgets the DM channels of users no longer answered.
    pub fn keep_dms_of(&self, answered: &[Snowflake]) {
        self.change(|state| state.keep_dms_of(answered));
    }

    /// Remembers a thread the bot started in `channel` (thread mode).
    pub fn remember_thread(&self, thread: Snowflake, channel: Snowflake) {
        self.change(|state| {
            state.remember_thread(thread, channel);
            true
        });
    }

    /// The threads the bot started, `(thread, its channel)`, oldest first
    /// (at most [`crate::bridge::access::restart::THREADS_KEPT`]).
    pub fn threads(&self) -> Vec<(Snowflake, Snowflake)> {
        let state = self.state.borrow();
        state.threads.iter().map(|(t, c)| (*t, *c)).collect()
    }

    /// The channel a thread the bot started belongs to.
    pub fn thread_parent(&self, thread: Snowflake) -> Option<Snowflake> {
        self.state.borrow().threads.get(&thread).copied()
    }

    /// A fresh session began (READY on shard 0) at `at` (unix ms): the
    /// start of its span (`live`), written with the next write.
    pub fn session_began(&self, at: u64) {
        self.change(|state| {
            state.session_began(at);
            true
        });
    }

    /// The newest session was live (or resumable) at `at`: its span grows,
    /// on disk with the next write, or scheduled now when `write`.
    pub fn session_seen(&self, at: u64, write: bool) {
        let mut state = self.state.borrow_mut();
        if state.session_seen(at) && write {
            self.writer.set(&*state);
        }
    }

    /// When the latest sessions were live, `(from, to)` unix ms on the
    /// host's clock, oldest first.
    pub fn live_spans(&self) -> Vec<(u64, u64)> {
        let state = self.state.borrow();
        state.live.iter().map(|span| (span.from, span.to)).collect()
    }

    /// Whether a read-back was cut short (by a crash or a stop).
    pub fn readback_due(&self) -> bool {
        self.state.borrow().readback_due
    }

    /// A read-back is due, on disk before the call returns; false if the
    /// write failed.
    pub async fn mark_readback_due(&self) -> bool {
        self.change(|state| {
            state.readback_due = true;
            true
        });
        self.writer.flush().await
    }

    /// The read-back finished: no longer due.
    pub fn readback_done(&self) {
        self.change(|state| std::mem::take(&mut state.readback_due));
    }

    /// Start-ups since the last successful turn (this one included).
    pub fn failed_starts(&self) -> u32 {
        self.state.borrow().failed_starts
    }

    /// The first successful turn: the restart-failure counter cleared (and
    /// written).
    pub fn first_turn_succeeded(&self) {
        self.change(|state| {
            if state.failed_starts == 0 {
                return false;
            }
            log::info!("first successful turn: restart-failure counter cleared");
            state.failed_starts = 0;
            true
        });
    }

    /// A stop that left nothing unfinished: not a failed start-up (the
    /// final [`RuntimeBook::save`] writes it).
    pub fn stopped_cleanly(&self) {
        let mut state = self.state.borrow_mut();
        if state.failed_starts != 0 {
            log::info!("clean stop: restart-failure counter cleared");
            state.failed_starts = 0;
        }
    }

    /// Schedules a write of the state as it is (the final save).
    pub fn save(&self) {
        self.writer.set(&*self.state.borrow());
    }

    /// Writes what is scheduled now; true once it is on disk.
    pub async fn flush(&self) -> bool {
        self.writer.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::report::counters::BridgeCounters;
    use crate::bridge::report::reporter::Reporter;
    use crate::recorder::Recorder;
    use smolcord::offload;
    use std::time::Duration;

    #[test]
    fn a_change_schedules_its_write_and_no_news_writes_nothing() {
        smol::block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("runtime.json");
            let reporter = Reporter::new(Recorder::disabled(), BridgeCounters::default());
            let (writer, _task) = Coalescing::new(path.clone(), Duration::ZERO, reporter);
            let book = RuntimeBook::new(RuntimeState::default(), writer);
            let (user, dm) = (Snowflake::new(1), Snowflake::new(10));
            let on_disk = || async {
                let bytes = offload::read_bytes(&path).await.unwrap()?;
                Some(serde_json::from_slice::<RuntimeState>(&bytes).unwrap())
            };

            book.remember_dm(user, dm);
            assert!(book.flush().await);
            assert_eq!(on_disk().await.unwrap().dm_channels[&user], dm);
            assert_eq!(book.dm_user(dm), Some(user));

            // Known already: nothing to write.
            offload::remove_file(&path).await.unwrap();
            book.remember_dm(user, dm);
            book.remember_bot(Snowflake::new(5));
            book.remember_bot(Snowflake::new(5));
            assert!(book.flush().await);
            assert_eq!(
                on_disk().await.unwrap().bot_user_id,
                Some(Snowflake::new(5))
            );
            offload::remove_file(&path).await.unwrap();
            book.remember_bot(Snowflake::new(5));
            book.readback_done();
            assert!(book.flush().await);
            assert!(on_disk().await.is_none());

            // A processed mark is on disk when the call returns.
            assert!(book.record_processed(dm, Snowflake::new(100)).await);
            assert!(on_disk()
                .await
                .unwrap()
                .is_processed(dm, Snowflake::new(99)));
            assert!(book.is_processed(dm, Snowflake::new(100)));
            assert!(!book.is_processed(dm, Snowflake::new(101)));
            assert!(book.mark_readback_due().await);
            assert!(on_disk().await.unwrap().readback_due);
        });
    }
}
