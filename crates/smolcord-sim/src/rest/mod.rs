//! The REST side: routes, message bodies, replies, reactions, threads, and rate limits as Discord puts them on the wire.

pub(crate) mod cdn;
pub(crate) mod interactions;
pub(crate) mod message_body;
pub(crate) mod ratelimit_headers;
pub(crate) mod reactions;
pub(crate) mod replies;
pub(crate) mod routes;
pub(crate) mod threads;
pub(crate) mod upload_limits;
