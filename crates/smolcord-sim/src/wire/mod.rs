//! Bytes in and out, with no simulator state: HTTP/1.1, TLS, the two gateway compressions, multipart bodies.

pub(crate) mod http;
pub(crate) mod multipart;
pub(crate) mod tls;
pub(crate) mod zlib;
pub(crate) mod zstd;
