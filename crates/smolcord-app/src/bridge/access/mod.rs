//! Who may use the bot: the access book (the files and, in `live`, the running
//! bridge's book with its rules), pairing codes, restart markers.

pub mod book;
pub(crate) mod live;
pub mod pairing;
pub mod restart;
