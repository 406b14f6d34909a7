//! The process makes itself non-dumpable before anything else runs, so the
//! bot token (in our environment and memory) stays in the bridge.
//!
//! Without it, any process of the same uid — the agent and the transcriber
//! we start, or anything they start — can read `/proc/<our pid>/environ`
//! (which holds `DISCORD_TOKEN`), `/proc/<our pid>/mem`, or attach with
//! ptrace, and a core dump would hold the token. `PR_SET_DUMPABLE` 0 makes
//! `/proc/<pid>` owned by root and refuses ptrace access to processes
//! without `CAP_SYS_PTRACE`; no core file is written. Root with
//! `CAP_SYS_PTRACE`, `CAP_SYS_ADMIN` or `CAP_PERFMON` (root on the host;
//! not root in a default Docker container) can still read it: that is the limit of what a process can do
//! for itself. Children get it back on `exec` (the kernel resets it for an
//! ordinary binary), which is harmless: they never hold the token.

/// Marks this process non-dumpable; a warning if the kernel refuses.
pub fn keep_memory_from_same_uid() {
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        log::warn!(
            "cannot make the process non-dumpable ({err}): processes of the same user could read the token from /proc"
        );
    }
}
