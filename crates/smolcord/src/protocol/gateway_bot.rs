//! `GET /gateway/bot`: where to connect, and the identify budget.

use serde::{Deserialize, Serialize};

/// `GET /gateway/bot`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayBot {
    /// Gateway URL (`wss://gateway.discord.gg`), without query.
    pub url: String,
    /// Recommended shard count.
    pub shards: u32,
    /// The identify budget.
    pub session_start_limit: SessionStartLimit,
}

/// How many fresh sessions (identifies) may still be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStartLimit {
    /// Identifies allowed per window (1000 for most bots).
    pub total: u32,
    /// Identifies left in this window.
    pub remaining: u32,
    /// Milliseconds until the window resets.
    pub reset_after: u64,
    /// Identifies allowed per 5 s.
    pub max_concurrency: u32,
}
