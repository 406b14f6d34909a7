//! Who may use the bot: the access book, pairing codes, restart markers.

pub mod book;
pub mod pairing;
pub mod restart;
