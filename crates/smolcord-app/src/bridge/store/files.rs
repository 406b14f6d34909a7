//! Each task's files on disk: `STATE_DIR/files/ID/in/` holds the message's
//! attachments, downloaded before the agent runs; `STATE_DIR/files/ID/out/`
//! is where the agent leaves files to send with its reply.
//!
//! Bounded: all of it together holds at most `Tunables::files_budget`
//! bytes (a download reserves its size before it starts, so two at once
//! cannot both take the last room), and a task's directory goes when the
//! task is done (the reply delivered; for the spool, the result named
//! after the task delivered) or, at the latest, `Tunables::files_max_age`
//! after it was made: swept at start and whenever the budget is short. A
//! crash leaves nothing that grows without end: the next start counts what
//! is there against the budget and the sweep removes what is old.

use smolcord::offload;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The directory under the state dir.
pub const FILES_DIR: &str = "files";

/// Task directories looked at in one sweep (a task dir is made per
/// message handed on, so there are rarely more than a few).
const SWEEP_LIMIT: usize = 4096;

/// The task directories and their budget.
#[derive(Debug)]
pub(crate) struct TaskFiles {
    root: PathBuf,
    budget: u64,
    max_age: Duration,
    /// Bytes on disk or reserved for downloads under way.
    used: Cell<u64>,
}

impl TaskFiles {
    pub fn new(state_dir: &Path, budget: u64, max_age: Duration) -> TaskFiles {
        TaskFiles {
            root: state_dir.join(FILES_DIR),
            budget,
            max_age,
            used: Cell::new(0),
        }
    }

    /// `files/ID`.
    pub fn task_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// `files/ID/in`: the attachments.
    pub fn in_dir(&self, id: &str) -> PathBuf {
        self.task_dir(id).join("in")
    }

    /// `files/ID/out`: the agent's files for the reply.
    pub fn out_dir(&self, id: &str) -> PathBuf {
        self.task_dir(id).join("out")
    }

    /// At start: what earlier runs left counts against the budget, and
    /// what is too old goes.
    pub async fn load(&self, now: SystemTime) {
        match offload::tree_bytes(&self.root).await {
            Ok(bytes) => self.used.set(bytes),
            Err(e) => log::warn!("measuring the task files: {e}"),
        }
        self.sweep(now).await;
    }

    /// Takes `bytes` of the budget for a download; false if they do not
    /// fit (after sweeping out what is too old).
    pub async fn reserve(&self, bytes: u64) -> bool {
        if !self.fits(bytes) {
            self.sweep(SystemTime::now()).await;
        }
        if !self.fits(bytes) {
            return false;
        }
        self.used.set(self.used.get() + bytes);
        true
    }

    fn fits(&self, bytes: u64) -> bool {
        self.used.get().saturating_add(bytes) <= self.budget
    }

    /// Gives back `bytes` reserved and not used.
    pub fn release(&self, bytes: u64) {
        self.used.set(self.used.get().saturating_sub(bytes));
    }

    /// Counts `bytes` the agent wrote (its output files) as used.
    pub fn add(&self, bytes: u64) {
        self.used.set(self.used.get().saturating_add(bytes));
    }

    /// Bytes on disk or reserved.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used.get()
    }

    /// The budget.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Removes the task's directory (nothing if it has none).
    pub async fn remove(&self, id: &str) {
        if id.is_empty() || id.contains(['/', '.']) {
            return; // not a task id: never a path outside `files/`
        }
        match offload::remove_tree(&self.task_dir(id)).await {
            Ok(bytes) => self.release(bytes),
            Err(e) => log::warn!("removing the files of task {id}: {e}"),
        }
    }

    /// Removes the task directories made longer than `max_age` ago.
    pub async fn sweep(&self, now: SystemTime) {
        let listed = match offload::list_files(&self.root, SWEEP_LIMIT).await {
            Ok(listed) => listed,
            Err(e) => {
                log::warn!("listing the task files: {e}");
                return;
            }
        };
        let dirs = listed
            .others
            .iter()
            .filter(|(_, kind)| *kind == "a directory");
        for (dir, _) in dirs {
            let made = match offload::modified(dir).await {
                Ok(Some(made)) => made,
                Ok(None) => continue,
                Err(e) => {
                    log::warn!("{e}");
                    continue;
                }
            };
            let age = now.duration_since(made).unwrap_or_default();
            if age >= self.max_age {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
                log::info!(
                    "removing the files of task {} ({} h old, past the {} h bound)",
                    name.as_deref().unwrap_or("?"),
                    age.as_secs() / 3600,
                    self.max_age.as_secs() / 3600
                );
                match offload::remove_tree(dir).await {
                    Ok(bytes) => self.release(bytes),
                    Err(e) => log::warn!("{e}"),
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // the test makes its files directly
mod tests {
    use super::*;

    #[test]
    fn the_budget_holds_and_old_task_dirs_are_swept() {
        let state = tempfile::tempdir().unwrap();
        let files = TaskFiles::new(state.path(), 100, Duration::from_secs(3600));
        std::fs::create_dir_all(files.in_dir("1")).unwrap();
        std::fs::write(files.in_dir("1").join("a"), [0u8; 60]).unwrap();
        smol::block_on(async {
            files.load(SystemTime::now()).await;
            assert_eq!(files.used(), 60);
            assert!(!files.reserve(41).await);
            assert!(files.reserve(40).await);
            files.release(40);
            // An hour later the directory is stale: a reservation that
            // does not fit sweeps it out first.
            files.sweep(SystemTime::now()).await;
            assert!(files.task_dir("1").exists());
            files
                .sweep(SystemTime::now() + Duration::from_secs(3601))
                .await;
            assert!(!files.task_dir("1").exists());
            assert_eq!(files.used(), 0);
            // Not a task id: nothing outside `files/` is touched.
            files.remove("..").await;
            assert!(state.path().exists());
        });
    }
}
