//! The state every bridge task shares (one thread: `Rc` + `RefCell`, and
//! no borrow is ever held across an `.await`).

use super::access::Access;
use super::counters::BridgeCounters;
use super::inflight::Inflight;
use super::pairing::PairingBook;
use super::persist::{Coalescing, SeqFloor};
use super::queue::JobQueues;
use super::report::Reporter;
use super::restart::RuntimeState;
use super::spool::Spool;
use super::Tunables;
use crate::config::Config;
use crate::protocol::Snowflake;
use crate::rest::RestClient;
use smol::lock::Semaphore;
use smol::LocalExecutor;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::PathBuf;
use std::rc::Weak;

pub(crate) struct Ctx {
    pub config: Config,
    pub tunables: Tunables,
    pub rest: RestClient,
    pub reporter: Reporter,
    pub counters: BridgeCounters,
    pub state_dir: PathBuf,
    pub tmp_dir: PathBuf,
    pub spool: Spool,
    /// Only the owner is answered (lifted by the first successful turn).
    pub safe_mode: Cell<bool>,
    pub access: RefCell<Access>,
    pub pairing: RefCell<PairingBook>,
    pub runtime: RefCell<RuntimeState>,
    pub runtime_writer: Coalescing,
    pub floor: RefCell<SeqFloor>,
    pub inflight: Inflight,
    /// Per-channel queues of messages waiting for their channel's worker.
    pub queues: JobQueues,
    pub agent_slots: Semaphore,
    pub transcribe_slots: Semaphore,
    /// A turn succeeded in this run (the failure counter was cleared).
    pub turn_done: Cell<bool>,
    /// No new work is taken (shutting down).
    pub stopping: Cell<bool>,
    /// Weak: the executor owns the tasks, which own the context.
    pub executor: Weak<LocalExecutor<'static>>,
    /// Wakes the results poller early (a pairing code was issued: it must
    /// start watching for the approval).
    pub poller_wake: event_listener::Event,
}

impl Ctx {
    /// Spawns a watched task on the bridge's executor (nothing happens if
    /// the executor is gone, i.e. at the very end of a shutdown).
    pub fn spawn(&self, name: &'static str, future: impl Future<Output = ()> + 'static) {
        if let Some(ex) = self.executor.upgrade() {
            ex.spawn(crate::loopwatch::watch(name, future)).detach();
        }
    }

    pub fn bot_user(&self) -> Option<Snowflake> {
        self.runtime.borrow().bot_user_id
    }

    /// Marks a message processed (saved in the background).
    pub fn mark_processed(&self, channel: Snowflake, message: Snowflake) {
        let mut runtime = self.runtime.borrow_mut();
        runtime.mark_processed(channel, message);
        self.runtime_writer.set(&*runtime);
    }

    /// The first successful turn clears the restart-failure counter and
    /// lifts safe mode.
    pub fn turn_succeeded(&self) {
        if self.turn_done.replace(true) {
            return;
        }
        let mut runtime = self.runtime.borrow_mut();
        if runtime.failed_starts != 0 {
            log::info!("first successful turn: restart-failure counter cleared");
            runtime.failed_starts = 0;
            self.runtime_writer.set(&*runtime);
        }
        if self.safe_mode.replace(false) {
            log::info!("safe mode lifted: allowed users are answered again");
            self.counters.set_safe_mode(false);
        }
    }

    /// A stop that left nothing unfinished: not a failed start-up (the
    /// final save writes it).
    pub fn stopped_cleanly(&self) {
        let mut runtime = self.runtime.borrow_mut();
        if runtime.failed_starts != 0 {
            log::info!("clean stop: restart-failure counter cleared");
            runtime.failed_starts = 0;
        }
    }
}
