//! Replies out: delivery with the DM fallback, what is shown, the operator's commands as specs.

pub(crate) mod channel_refused;
pub(crate) mod delivery;
pub(crate) mod reaction;
pub(crate) mod shown;
pub(crate) mod tool;
