//! The start refuses a state dir whose state files are not ours: a FIFO, a
//! symbolic link, a device or a file past [`STATE_FILE_MAX_BYTES`] where
//! `session.json` or `access.json` belongs.
//!
//! Every read of them is bounded anyway (regular files only, capped), and a
//! malformed one is warned about and replaced; but a special file is no
//! crash's leftover: someone put it there (a link to a file kept
//! elsewhere, say), and starting without it and then writing a regular
//! file over it would quietly lose what it stood for. So the start stops
//! and names it, before anything is read.

use smolcord::offload::{self, STATE_FILE_MAX_BYTES};
use std::path::Path;

/// The files the bridge reads back from its state dir (each `.bak` too).
const READ_BACK: [&str; 6] = [
    crate::bridge::store::persist::SESSION_FILE,
    crate::bridge::access::book::ACCESS_FILE,
    crate::bridge::access::pairing::PAIRING_FILE,
    crate::bridge::access::restart::RUNTIME_FILE,
    crate::bridge::access::restart::RESTART_FILE,
    crate::status::FILE_NAME,
];

/// `Ok` if each state file is missing or a regular file within the cap;
/// else the first one that is not, named.
pub async fn check(state_dir: &Path) -> Result<(), offload::Error> {
    for name in READ_BACK {
        let path = state_dir.join(name);
        offload::check_regular(&path, STATE_FILE_MAX_BYTES).await?;
        offload::check_regular(&backup_of(&path), STATE_FILE_MAX_BYTES).await?;
    }
    Ok(())
}

fn backup_of(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    name.into()
}
