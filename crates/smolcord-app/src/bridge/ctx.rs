//! The state every bridge task shares (one thread: `Rc` + `RefCell`, and
//! no borrow is ever held across an `.await`).
//!
//! The message path runs one way — intake (`dispatch`, `results`) →
//! `worker` → `transcribe` / `agent` → `delivery` — and this context sits
//! below all of them: it imports none of those modules, only the state
//! they share (crates/smolcord-app/tests/app/bridge_layers.rs checks it).
//!
//! What changes while the bridge runs lives in owned sub-states, each in
//! the layer its data belongs to, its fields private and its rules in its
//! methods (callers say what happened, not which field to write):
//! [`AccessBook`] (access, pairing, the owner rule, the re-read),
//! [`RuntimeBook`] (`runtime.json`: each change schedules its write),
//! [`SequenceFloor`] (the seq the session may be saved at and the jobs in
//! flight: what is done), [`Lifecycle`] (safe mode, a turn done,
//! stopping) and [`ToldOnce`] (refusing channels the owner heard of). The
//! other fields are services with no state of their own to guard.

use crate::bridge::access::live::AccessBook;
use crate::bridge::jobs::floor::SequenceFloor;
use crate::bridge::jobs::lifecycle::Lifecycle;
use crate::bridge::jobs::queue::JobQueues;
use crate::bridge::jobs::tunables::Tunables;
use crate::bridge::report::counters::BridgeCounters;
use crate::bridge::report::reporter::Reporter;
use crate::bridge::report::told_once::ToldOnce;
use crate::bridge::store::files::TaskFiles;
use crate::bridge::store::outbox::Outbox;
use crate::bridge::store::runtime::RuntimeBook;
use crate::bridge::store::spool::Spool;
use crate::config::{ChannelConfig, Config};
use smol::lock::Semaphore;
use smol::LocalExecutor;
use smolcord::protocol::Snowflake;
use smolcord::rest::RestClient;
use std::future::Future;
use std::path::PathBuf;
use std::rc::{Rc, Weak};

pub(crate) struct Ctx {
    pub config: Config,
    pub tunables: Tunables,
    pub rest: RestClient,
    pub reporter: Reporter,
    pub counters: BridgeCounters,
    pub state_dir: PathBuf,
    pub spool: Spool,
    /// Each task's downloaded attachments and output files, and their budget.
    pub files: TaskFiles,
    /// Replies and results being delivered, on disk.
    pub outbox: Outbox,
    /// Safe mode, a turn done, stopping.
    pub lifecycle: Lifecycle,
    /// Who is in, the pairing codes, and their rules.
    pub access: AccessBook,
    /// `runtime.json` and its writer.
    pub runtime: RuntimeBook,
    /// What is done: the seq the session may be saved at, the jobs in
    /// flight.
    pub floor: SequenceFloor,
    /// Per-channel queues of messages waiting for their channel's worker.
    pub queues: JobQueues,
    pub agent_slots: Semaphore,
    pub transcribe_slots: Semaphore,
    /// Weak: the executor owns the tasks, which own the context.
    pub executor: Weak<LocalExecutor<'static>>,
    /// Server channels that refused a reply for good in this run: the
    /// owner was told about each once (at most one per configured channel,
    /// [`crate::config::channels::MAX_CHANNELS`]).
    pub channels_refused: ToldOnce,
}

impl Ctx {
    /// Spawns a watched task on the bridge's executor (nothing happens if
    /// the executor is gone, i.e. at the very end of a shutdown).
    pub fn spawn(&self, name: &'static str, future: impl Future<Output = ()> + 'static) {
        if let Some(ex) = self.executor.upgrade() {
            ex.spawn(smolcord::loopwatch::watch(name, future)).detach();
        }
    }

    /// Spawns `work` (given the context) as a job in flight from now: the
    /// shutdown drain waits for it and names it `what`.
    pub fn spawn_job<Fut>(
        self: &Rc<Self>,
        name: &'static str,
        what: String,
        work: impl FnOnce(Rc<Ctx>) -> Fut,
    ) where
        Fut: Future<Output = ()> + 'static,
    {
        let guard = self.floor.begin_job(what);
        let work = work(self.clone());
        self.spawn(name, async move {
            let _guard = guard;
            work.await;
        });
    }

    /// The `channels` entry a guild channel is answered by: its own, or,
    /// for a thread the bot started (thread mode), its channel's; `true`
    /// in that thread.
    pub fn channel_entry(&self, channel: Snowflake) -> Option<(&ChannelConfig, bool)> {
        if let Some(entry) = self.config.channel(channel) {
            return Some((entry, false));
        }
        let parent = self.runtime.thread_parent(channel)?;
        self.config
            .channel(parent)
            .filter(|entry| entry.thread)
            .map(|entry| (entry, true))
    }

    /// The first successful turn clears the restart-failure counter and
    /// lifts safe mode.
    pub fn turn_succeeded(&self) {
        if !self.lifecycle.first_turn() {
            return;
        }
        self.runtime.first_turn_succeeded();
        self.lifecycle.lift_safe_mode();
    }
}
