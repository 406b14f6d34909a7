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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_is_told_once_within_the_bound() {
        let told = ToldOnce::default();
        assert!(told.first_time(Snowflake::new(1)));
        assert!(!told.first_time(Snowflake::new(1)));
        for id in 2..=MAX_CHANNELS as u64 {
            assert!(told.first_time(Snowflake::new(id)));
        }
        assert!(!told.first_time(Snowflake::new(u64::MAX)), "past the bound");
    }
}
