//! What the bridge is working on, so a shutdown can wait for it (bounded)
//! and then say exactly what was left.

use smol::channel::{self, Receiver, Sender};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

#[derive(Default)]
struct Book {
    next: u64,
    jobs: BTreeMap<u64, String>,
}

/// The set of jobs in flight. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Inflight {
    book: Rc<RefCell<Book>>,
    idle_tx: Sender<()>,
    idle_rx: Receiver<()>,
}

/// One job; it leaves the set when dropped.
pub(crate) struct JobGuard {
    id: u64,
    inflight: Inflight,
}

impl Inflight {
    pub fn new() -> Inflight {
        let (idle_tx, idle_rx) = channel::bounded(1);
        Inflight {
            book: Rc::default(),
            idle_tx,
            idle_rx,
        }
    }

    pub fn begin(&self, what: String) -> JobGuard {
        let mut book = self.book.borrow_mut();
        book.next += 1;
        let id = book.next;
        book.jobs.insert(id, what);
        JobGuard {
            id,
            inflight: self.clone(),
        }
    }

    pub fn len(&self) -> usize {
        self.book.borrow().jobs.len()
    }

    pub fn descriptions(&self) -> Vec<String> {
        self.book.borrow().jobs.values().cloned().collect()
    }

    /// Waits until nothing is in flight or `deadline`; returns what is left.
    pub async fn drain(&self, deadline: Instant) -> Vec<String> {
        loop {
            if self.len() == 0 {
                return Vec::new();
            }
            let idle = async {
                let _ = self.idle_rx.recv().await;
                true
            };
            let timeout = async {
                async_io::Timer::at(deadline).await;
                false
            };
            if !futures_lite::future::or(idle, timeout).await {
                return self.descriptions();
            }
        }
    }
}

impl JobGuard {
    /// Updates what the job is doing (shown if it is left at shutdown).
    pub fn stage(&self, what: String) {
        if let Some(entry) = self.inflight.book.borrow_mut().jobs.get_mut(&self.id) {
            *entry = what;
        }
    }
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let empty = {
            let mut book = self.inflight.book.borrow_mut();
            book.jobs.remove(&self.id);
            book.jobs.is_empty()
        };
        if empty {
            let _ = self.inflight.idle_tx.try_send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn drain_waits_for_jobs_and_reports_leftovers() {
        let ex = smol::LocalExecutor::new();
        smol::block_on(ex.run(async {
            let inflight = Inflight::new();
            let quick = inflight.begin("quick".into());
            let slow = inflight.begin("slow".into());
            slow.stage("slow (agent running)".into());
            ex.spawn(async move {
                async_io::Timer::after(Duration::from_millis(20)).await;
                drop(quick);
            })
            .detach();
            let left = inflight
                .drain(Instant::now() + Duration::from_millis(200))
                .await;
            assert_eq!(left, ["slow (agent running)"]);
            drop(slow);
            assert!(inflight.drain(Instant::now()).await.is_empty());
        }));
    }
}
