//! The gateway envelope `{op, d, s, t}`, decoded lazily.

use super::opcode::OpCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

/// One gateway frame. `d` stays raw JSON until [`Frame::data`] asks for it.
#[derive(Debug, Deserialize, Serialize)]
pub struct Frame {
    op: u8,
    #[serde(default)]
    d: Option<Box<RawValue>>,
    #[serde(default)]
    s: Option<u64>,
    #[serde(default)]
    t: Option<String>,
}

/// A frame or its payload could not be decoded. The message names what was
/// wrong and quotes the start of the offending text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    what: String,
    detail: String,
    excerpt: String,
}

impl DecodeError {
    fn new(what: impl Into<String>, detail: impl fmt::Display, text: &[u8]) -> DecodeError {
        const EXCERPT_CHARS: usize = 120;
        let lossy = String::from_utf8_lossy(text);
        let mut excerpt: String = lossy.chars().take(EXCERPT_CHARS).collect();
        if lossy.chars().count() > EXCERPT_CHARS {
            excerpt.push('…');
        }
        DecodeError {
            what: what.into(),
            detail: detail.to_string(),
            excerpt,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (in `{}`)", self.what, self.detail, self.excerpt)
    }
}

impl std::error::Error for DecodeError {}

impl Frame {
    /// Reads the envelope of one gateway frame. Only the structure is
    /// checked; `d` is kept as raw JSON.
    pub fn decode(text: &[u8]) -> Result<Frame, DecodeError> {
        // serde would also read a struct from a JSON array (`[1,2]` as op 1).
        if text.trim_ascii_start().first() != Some(&b'{') {
            return Err(DecodeError::new(
                "malformed gateway frame",
                "expected a JSON object",
                text,
            ));
        }
        serde_json::from_slice(text)
            .map_err(|err| DecodeError::new("malformed gateway frame", err, text))
    }

    /// Builds a frame to send (the simulator uses this for server frames).
    pub fn new(op: OpCode, d: Option<Box<RawValue>>, s: Option<u64>, t: Option<&str>) -> Frame {
        Frame {
            op: op.as_u8(),
            d,
            s,
            t: t.map(str::to_owned),
        }
    }

    /// The opcode, or `None` for a number Discord does not document.
    pub fn opcode(&self) -> Option<OpCode> {
        OpCode::from_u8(self.op)
    }

    /// The raw opcode number, for error messages about unknown opcodes.
    pub fn raw_opcode(&self) -> u8 {
        self.op
    }

    /// The sequence number (dispatches only).
    pub fn sequence(&self) -> Option<u64> {
        self.s
    }

    /// The event name (dispatches only).
    pub fn event_name(&self) -> Option<&str> {
        self.t.as_deref()
    }

    /// The raw `d` payload (`null` when absent).
    pub fn raw_data(&self) -> &str {
        self.d.as_deref().map_or("null", RawValue::get)
    }

    /// Decodes `d` into `T`. The error names the event or opcode.
    pub fn data<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        let raw = self.raw_data();
        serde_json::from_str(raw).map_err(|err| {
            let what = match &self.t {
                Some(t) => format!("bad payload for event {t}"),
                None => format!("bad payload for opcode {}", self.op),
            };
            DecodeError::new(what, err, raw.as_bytes())
        })
    }

    /// Encodes the frame as JSON text.
    pub fn to_json(&self) -> String {
        // A Frame holds only integers, strings and already-valid raw JSON,
        // so serialisation cannot fail; fall back to an empty object anyway.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Hello, Message, Ready};

    #[test]
    fn hello_with_trace_and_unknown_fields() {
        let text = br#"{"t":null,"s":null,"op":10,"d":{"heartbeat_interval":41250,"_trace":["[\"gateway-prd-main-858d\",{\"micros\":0.0}]"]},"extra":1}"#;
        let frame = Frame::decode(text).unwrap();
        assert_eq!(frame.opcode(), Some(OpCode::Hello));
        assert_eq!(frame.sequence(), None);
        let hello: Hello = frame.data().unwrap();
        assert_eq!(hello.heartbeat_interval, 41250);
    }

    #[test]
    fn unknown_event_names_are_carried_not_rejected() {
        let frame =
            Frame::decode(br#"{"op":0,"s":42,"t":"SOME_FUTURE_EVENT","d":{"x":[1,2]}}"#).unwrap();
        assert_eq!(frame.opcode(), Some(OpCode::Dispatch));
        assert_eq!(frame.sequence(), Some(42));
        assert_eq!(frame.event_name(), Some("SOME_FUTURE_EVENT"));
        assert_eq!(frame.raw_data(), r#"{"x":[1,2]}"#);
    }

    #[test]
    fn unknown_opcode_is_none_not_an_error() {
        let frame = Frame::decode(br#"{"op":99,"d":null}"#).unwrap();
        assert_eq!(frame.opcode(), None);
        assert_eq!(frame.raw_opcode(), 99);
    }

    #[test]
    fn invalid_session_payload_is_a_bool() {
        let frame = Frame::decode(br#"{"op":9,"d":false}"#).unwrap();
        assert_eq!(frame.opcode(), Some(OpCode::InvalidSession));
        assert!(!frame.data::<bool>().unwrap());
    }

    #[test]
    fn malformed_input_gives_clear_errors_never_panics() {
        for bad in [
            &b""[..],
            b"{",
            b"null",
            b"[]",
            b"[1,2]",
            b" [1,null,null,null]",
            b"{\"d\":1}",
            b"{\"op\":\"ten\"}",
            b"{\"op\":300}",
            b"\xff\xfe",
            b"{\"op\":0,\"s\":-1}",
        ] {
            let err = Frame::decode(bad).unwrap_err();
            assert!(
                err.to_string().starts_with("malformed gateway frame"),
                "{err}"
            );
        }
    }

    #[test]
    fn bad_payload_error_names_the_event() {
        let frame = Frame::decode(br#"{"op":0,"s":1,"t":"READY","d":{"v":10}}"#).unwrap();
        let err = frame.data::<Ready>().unwrap_err().to_string();
        assert!(err.contains("bad payload for event READY"), "{err}");
        assert!(err.contains("missing field"), "{err}");
        let frame = Frame::decode(br#"{"op":0,"s":2,"t":"MESSAGE_CREATE","d":[]}"#).unwrap();
        assert!(frame.data::<Message>().is_err());
    }

    #[test]
    fn long_excerpts_are_cut() {
        let mut text = b"{\"op\":".to_vec();
        text.extend(std::iter::repeat_n(b'x', 10_000));
        let err = Frame::decode(&text).unwrap_err().to_string();
        assert!(err.len() < 400, "{}", err.len());
    }

    #[test]
    fn encodes_back_to_the_envelope() {
        let d = RawValue::from_string("{\"a\":1}".into()).unwrap();
        let frame = Frame::new(OpCode::Dispatch, Some(d), Some(7), Some("X"));
        let again = Frame::decode(frame.to_json().as_bytes()).unwrap();
        assert_eq!(again.sequence(), Some(7));
        assert_eq!(again.event_name(), Some("X"));
        assert_eq!(again.raw_data(), "{\"a\":1}");
    }
}
