//! Reading JSON state files, with an optional fall-back to `<path>.bak`.
//!
//! Reading and parsing both happen on the blocking pool (one `unblock`), so a
//! large file costs the event loop nothing. A bad file is an error naming the
//! file and the line and column, never a panic and never a silent default.

use std::path::Path;

use serde::de::DeserializeOwned;

use super::blocking_fs::{backup_path, read_optional};
use super::{unblock, Error};

/// What [`read_json`] does when the primary file is missing or bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fallback {
    /// Report the primary file as it is: `Ok(None)` if missing, an error if bad.
    None,
    /// If the primary is missing, empty or not valid JSON, try `<path>.bak`
    /// (as kept by [`write_json_atomic_with_backup`](super::write_json_atomic_with_backup)).
    Backup,
}

/// Reads and parses the JSON file at `path`.
///
/// `Ok(None)` if the file (and, with [`Fallback::Backup`], its backup) does
/// not exist. An empty or malformed file is [`Error::BadJson`] naming it. When
/// the backup is used instead of a bad primary, a warning is logged; if both
/// are bad, the primary's error is returned.
pub async fn read_json<T: DeserializeOwned + Send + 'static>(
    path: &Path,
    fallback: Fallback,
) -> Result<Option<T>, Error> {
    let path = path.to_path_buf();
    unblock(move || read_json_blocking(&path, fallback)).await
}

fn read_json_blocking<T: DeserializeOwned>(
    path: &Path,
    fallback: Fallback,
) -> Result<Option<T>, Error> {
    // `None` here: the primary is missing; `Some(e)`: it is empty or malformed.
    let primary_problem = match parse_file(path) {
        Ok(Some(value)) => return Ok(Some(value)),
        other if fallback == Fallback::None => return other,
        // Not a torn or corrupt file but a system problem, or something
        // that is no state file of ours (a FIFO, a link, far too large):
        // say so rather than quietly use the backup.
        Err(e @ (Error::Io { .. } | Error::NotRegular { .. } | Error::TooLarge { .. })) => {
            return Err(e)
        }
        Ok(None) => None,
        Err(bad) => Some(bad),
    };
    let bak = backup_path(path);
    match (primary_problem, parse_file(&bak)) {
        (None, backup) => {
            if let Ok(Some(_)) = backup {
                log::warn!(
                    "{} is missing; using its backup {}",
                    path.display(),
                    bak.display()
                );
            }
            backup
        }
        (Some(bad), Ok(Some(value))) => {
            log::warn!("{bad}; using the backup {}", bak.display());
            Ok(Some(value))
        }
        (Some(bad), Ok(None)) => Err(bad),
        (Some(bad), Err(bad_backup)) => {
            log::warn!("backup unusable too: {bad_backup}");
            Err(bad)
        }
    }
}

fn parse_file<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, Error> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| Error::BadJson {
            path: path.into(),
            source,
        })
}
