//! Processes a command left running outside its process group.
//!
//! Each command runs in a process group of its own, and whatever is left in
//! it when the command ends is killed. A daemon that calls `setsid` (or
//! double-forks into a group of its own) escapes that, and smolcord cannot
//! tell it from an unrelated process by its parentage: it is reparented to
//! PID 1. What it keeps is its environment, so each command gets a marker
//! in it ([`MARKER_VAR`] = a value unique to the run), and after the group
//! is killed one bounded scan of `/proc` finds processes that still carry
//! it. They are named in the log, not killed: an agent may start a daemon
//! on purpose, and the operator decides.

// Blocking (a directory scan and small reads of /proc): run through unblock.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

use super::blocking_fs::read_capped;
use super::FileKind;

/// The variable each command finds in its environment (its value is
/// unique to that run).
pub const MARKER_VAR: &str = "SMOLCORD_COMMAND_RUN";
/// `/proc` entries looked at per scan (a small host runs a few hundred).
const MAX_ENTRIES: usize = 32_768;
/// The most read of one process's environment.
const ENVIRON_MAX_BYTES: u64 = 256 * 1024;
/// Leftovers named per command.
const MAX_NAMED: usize = 8;

/// A value for [`MARKER_VAR`] no other run shares.
pub(crate) fn new_marker() -> String {
    format!("{}-{:016x}", std::process::id(), fastrand::u64(..))
}

/// The pid and name of each process (at most [`MAX_NAMED`]) outside the
/// process group `group` whose environment holds `marker`, skipping
/// zombies. Unreadable processes (other users') are skipped.
pub(crate) fn find(marker: &str, group: Option<u32>) -> Vec<(u32, String)> {
    let needle = format!("{MARKER_VAR}={marker}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.take(MAX_ENTRIES).flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let dir = entry.path();
        let Some((state, pgrp)) = state_and_group(&dir) else {
            continue;
        };
        // Zombies run nothing; the group's own members are being killed.
        if state == 'Z' || Some(pgrp) == group {
            continue;
        }
        let carries = read_capped(&dir.join("environ"), ENVIRON_MAX_BYTES, FileKind::Regular)
            .ok()
            .flatten()
            .is_some_and(|env| env.split(|&b| b == 0).any(|var| var == needle.as_bytes()));
        if carries {
            let name = read_capped(&dir.join("comm"), 64, FileKind::Regular)
                .ok()
                .flatten()
                .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
                .unwrap_or_default();
            found.push((pid, name));
            if found.len() == MAX_NAMED {
                break;
            }
        }
    }
    found
}

/// Field 3 (state) and 5 (process group) of `/proc/PID/stat`.
fn state_and_group(dir: &Path) -> Option<(char, u32)> {
    let stat = read_capped(&dir.join("stat"), 4096, FileKind::Regular).ok()??;
    let stat = String::from_utf8_lossy(&stat);
    // After the parenthesised name (which may hold spaces and parentheses).
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}
