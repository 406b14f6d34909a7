//! Channels the owner was told about once in this run (a server channel
//! that refuses the bot for good): the second refusal tells nobody. At most
//! one per configured channel ([`MAX_CHANNELS`]), so the set is bounded.

use crate::config::channels::MAX_CHANNELS;
use smolcord::protocol::Snowflake;
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The channels told about in this run.
#[derive(Default)]
pub(crate) struct ToldOnce {
    told: RefCell<BTreeSet<Snowflake>>,
}

impl ToldOnce {
    /// True the first time `channel` is named in this run (within the
    /// bound): tell the owner now.
    pub fn first_time(&self, channel: Snowflake) -> bool {
        let mut told = self.told.borrow_mut();
        told.len() < MAX_CHANNELS && told.insert(channel)
    }
}
