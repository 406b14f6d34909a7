//! The three ways the flood reaches a client: plain text, zlib-stream and
//! zstd-stream (the `compress` query parameter; each client is built or
//! configured for it).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Plain,
    Zlib,
    Zstd,
}

impl Wire {
    /// Every flood case runs in each, in this order (the table's cells).
    pub const ALL: [Wire; 3] = [Wire::Plain, Wire::Zlib, Wire::Zstd];

    /// The short name: a table cell, twilight's binary suffix.
    pub fn name(self) -> &'static str {
        match self {
            Wire::Plain => "plain",
            Wire::Zlib => "zlib",
            Wire::Zstd => "zstd",
        }
    }

    /// The gateway path and query a client asks for.
    pub fn target(self) -> &'static str {
        match self {
            Wire::Plain => "/?v=10&encoding=json",
            Wire::Zlib => "/?v=10&encoding=json&compress=zlib-stream",
            Wire::Zstd => "/?v=10&encoding=json&compress=zstd-stream",
        }
    }

    /// What the server serves for a client's path and query.
    pub fn of_target(target: &str) -> Wire {
        if target.contains("compress=zlib-stream") {
            Wire::Zlib
        } else if target.contains("compress=zstd-stream") {
            Wire::Zstd
        } else {
            Wire::Plain
        }
    }

    /// smolcord's config and shard setting for it.
    pub fn compression(self) -> smolcord::shard::Compression {
        match self {
            Wire::Plain => smolcord::shard::Compression::None,
            Wire::Zlib => smolcord::shard::Compression::Zlib,
            Wire::Zstd => smolcord::shard::Compression::Zstd,
        }
    }

    /// The `compress` value of smolcord's config file.
    pub fn config_value(self) -> serde_json::Value {
        match self {
            Wire::Plain => false.into(),
            Wire::Zlib => "zlib".into(),
            Wire::Zstd => "zstd".into(),
        }
    }

    /// `--compress VALUE` of the shard client.
    pub fn parse(value: &str) -> Option<Wire> {
        Wire::ALL.into_iter().find(|wire| wire.name() == value)
    }
}
