//! Running a record's writer in the background without an executor of our own.
//!
//! `record()` is called from tasks on the bridge's single-threaded
//! `LocalExecutor`, which it has no handle to; `smol::spawn` would start
//! smol's global executor thread for a job that is nearly all waiting. So a
//! writer is an `async_task` whose every poll is a short job on the
//! `blocking` pool: a poll starts or checks a journal operation (itself a
//! pool job, through `offload`) and returns. While it waits — for a write or
//! a deadline timer — the writer holds no thread at all; only the journal
//! operations themselves do, and the recorder's capacity bounds those.

use std::future::Future;

use async_task::Runnable;

/// Runs `future` to completion in the background; nobody awaits it.
pub(crate) fn spawn_detached<F>(future: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let (runnable, task) = async_task::spawn(future, schedule);
    runnable.schedule();
    task.detach();
}

/// One poll is one trip to the blocking pool. This is not blocking work
/// (the poll returns at once), so it goes to `blocking` directly rather
/// than through `offload::unblock`, whose future could not be detached.
fn schedule(runnable: Runnable) {
    blocking::unblock(move || {
        runnable.run();
    })
    .detach();
}
