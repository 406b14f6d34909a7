//! Which transport compression a connection asks for, and the context that
//! undoes it (one per connection, dropped with it).

#[cfg(any(feature = "zlib", feature = "zstd"))]
use super::DecompressError;
#[cfg(feature = "zlib")]
use super::Inflater;
use super::TransportError;
#[cfg(feature = "zstd")]
use super::ZstdInflater;

/// Transport compression (the `compress` query parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Text frames, no compression.
    #[default]
    None,
    /// `zlib-stream` (feature `zlib`).
    Zlib,
    /// `zstd-stream` (feature `zstd`).
    Zstd,
}

impl Compression {
    /// The `compress` query value, if any.
    pub fn query_value(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Zlib => Some("zlib-stream"),
            Compression::Zstd => Some("zstd-stream"),
        }
    }

    /// The cargo feature this build lacks for it, if it lacks one.
    pub fn missing_feature(self) -> Option<&'static str> {
        match self {
            Compression::Zlib if !cfg!(feature = "zlib") => Some("zlib"),
            Compression::Zstd if !cfg!(feature = "zstd") => Some("zstd"),
            _ => None,
        }
    }
}

/// A connection's decompression context.
pub(super) enum Decompressor {
    None,
    #[cfg(feature = "zlib")]
    Zlib(Inflater),
    #[cfg(feature = "zstd")]
    Zstd(ZstdInflater),
}

impl Decompressor {
    /// A fresh context for `compression`; the caller has checked that this
    /// build has it (see [`Compression::missing_feature`]).
    pub(super) fn new(compression: Compression, max_message: usize) -> Decompressor {
        match compression {
            #[cfg(feature = "zlib")]
            Compression::Zlib => Decompressor::Zlib(Inflater::with_limit(max_message)),
            #[cfg(feature = "zstd")]
            Compression::Zstd => Decompressor::Zstd(ZstdInflater::with_limit(max_message)),
            _ => {
                let _ = max_message;
                Decompressor::None
            }
        }
    }

    /// One binary WebSocket message in; a gateway message out once one is
    /// complete (zlib-stream may spread one over several frames).
    pub(super) fn push(
        &mut self,
        bytes: &[u8],
        limit: usize,
    ) -> Result<Option<String>, TransportError> {
        let too_large = |detail: String| TransportError::TooLarge { detail, limit };
        match self {
            Decompressor::None => {
                let _ = (bytes, too_large);
                Err(TransportError::Decode(
                    "binary frame on an uncompressed connection".into(),
                ))
            }
            #[cfg(feature = "zlib")]
            Decompressor::Zlib(inflater) => inflater.push(bytes).map_err(|err| match err {
                DecompressError::TooLarge(..) => too_large(err.to_string()),
                other => TransportError::Decode(other.to_string()),
            }),
            #[cfg(feature = "zstd")]
            Decompressor::Zstd(inflater) => match inflater.push(bytes) {
                Ok(text) => Ok(Some(text)),
                Err(err @ DecompressError::TooLarge(..)) => Err(too_large(err.to_string())),
                Err(other) => Err(TransportError::Decode(other.to_string())),
            },
        }
    }
}
