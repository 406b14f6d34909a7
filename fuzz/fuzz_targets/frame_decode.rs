//! Gateway frames: whatever the gateway (or a proxy) sends must decode to a
//! frame or a clear error, and a decoded frame must survive re-encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smolcord::protocol::{Frame, Hello, Message, Ready};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::decode(data) else {
        return;
    };
    let _ = (frame.opcode(), frame.raw_opcode(), frame.sequence());
    // The typed payloads the shard and the bridge read.
    let _ = frame.data::<Hello>();
    let _ = frame.data::<Ready>();
    let _ = frame.data::<Message>();
    let _ = frame.data::<serde_json::Value>();
    let again = Frame::decode(frame.to_json().as_bytes()).expect("a decoded frame re-encodes");
    assert_eq!(again.raw_opcode(), frame.raw_opcode());
    assert_eq!(again.sequence(), frame.sequence());
    assert_eq!(again.event_name(), frame.event_name());
});
