//! Replies out: delivery with the DM fallback, what is shown, the operator's commands as specs
//! and the end of their stderr.

pub(crate) mod channel_refused;
pub(crate) mod delivery;
pub(crate) mod files_out;
pub(crate) mod interaction_answer;
pub(crate) mod reaction;
pub(crate) mod shown;
pub(crate) mod stderr_tail;
pub(crate) mod tool;
