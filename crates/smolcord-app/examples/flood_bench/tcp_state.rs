//! Whether a TCP connection is still established, as the kernel's
//! `/proc/net/tcp` says: how the benchmark sees a client leave a server
//! that stopped reading (the client's end of the connection leaves the
//! established state when the client closes or drops it), before the
//! client's backoff and reconnect.

use std::net::{IpAddr, SocketAddr};

/// `/proc/net/tcp`'s state of an established connection.
const ESTABLISHED: &str = "01";

/// `0100007F:1F90` (the address as the kernel's native-endian u32, the
/// port big-endian) as a socket address.
fn parse(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?.to_ne_bytes();
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddr::new(IpAddr::from(ip), port))
}

/// Whether the connection from `local` to `peer` (IPv4) is established;
/// `None` if `/proc/net/tcp` cannot be read.
pub fn established(local: SocketAddr, peer: SocketAddr) -> Option<bool> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    Some(table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        let (Some(l), Some(p), Some(state)) = (fields.next(), fields.next(), fields.next()) else {
            return false;
        };
        parse(l) == Some(local) && parse(p) == Some(peer) && state == ESTABLISHED
    }))
}
