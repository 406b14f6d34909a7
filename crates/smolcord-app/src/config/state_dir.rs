//! Where the state directory is when nothing names it: `SMOLCORD_STATE_DIR`,
//! else `$XDG_STATE_HOME/smolcord`, else `$HOME/.local/state/smolcord`
//! (the XDG base-directory rules for state data).

use std::path::PathBuf;

use super::Env;

/// An environment variable that is set and not blank.
pub(super) fn non_empty(env: Env<'_>, name: &str) -> Option<String> {
    env(name).filter(|value| !value.trim().is_empty())
}

/// The state dir from the environment alone.
pub(super) fn from_env(env: Env<'_>) -> Option<PathBuf> {
    if let Some(dir) = non_empty(env, "SMOLCORD_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    // The XDG spec says a relative XDG_* path is invalid and must be ignored.
    if let Some(xdg) = non_empty(env, "XDG_STATE_HOME").map(PathBuf::from) {
        if xdg.is_absolute() {
            return Some(xdg.join("smolcord"));
        }
    }
    non_empty(env, "HOME").map(|home| PathBuf::from(home).join(".local/state/smolcord"))
}
