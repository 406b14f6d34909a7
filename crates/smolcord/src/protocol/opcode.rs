//! Gateway opcodes (the `op` field).

/// A gateway opcode. Unknown numbers are kept as `None` by
/// [`OpCode::from_u8`] so the caller decides what to do with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpCode {
    /// 0, receive: an event, carrying `t` and `s`.
    Dispatch,
    /// 1, send and receive: a heartbeat; from the server it asks for one now.
    Heartbeat,
    /// 2, send: start a new session.
    Identify,
    /// 3, send: update the bot's presence.
    PresenceUpdate,
    /// 4, send: join, move or leave voice.
    VoiceStateUpdate,
    /// 6, send: resume a previous session.
    Resume,
    /// 7, receive: reconnect and resume.
    Reconnect,
    /// 8, send: request guild members.
    RequestGuildMembers,
    /// 9, receive: the session is invalid; `d` says whether it can be resumed.
    InvalidSession,
    /// 10, receive: first frame, carries `heartbeat_interval`.
    Hello,
    /// 11, receive: acknowledges a heartbeat.
    HeartbeatAck,
    /// 31, send: request soundboard sounds.
    RequestSoundboardSounds,
}

impl OpCode {
    /// The opcode for a wire number, or `None` if Discord documents none.
    pub fn from_u8(op: u8) -> Option<OpCode> {
        Some(match op {
            0 => OpCode::Dispatch,
            1 => OpCode::Heartbeat,
            2 => OpCode::Identify,
            3 => OpCode::PresenceUpdate,
            4 => OpCode::VoiceStateUpdate,
            6 => OpCode::Resume,
            7 => OpCode::Reconnect,
            8 => OpCode::RequestGuildMembers,
            9 => OpCode::InvalidSession,
            10 => OpCode::Hello,
            11 => OpCode::HeartbeatAck,
            31 => OpCode::RequestSoundboardSounds,
            _ => return None,
        })
    }

    /// The wire number.
    pub fn as_u8(self) -> u8 {
        match self {
            OpCode::Dispatch => 0,
            OpCode::Heartbeat => 1,
            OpCode::Identify => 2,
            OpCode::PresenceUpdate => 3,
            OpCode::VoiceStateUpdate => 4,
            OpCode::Resume => 6,
            OpCode::Reconnect => 7,
            OpCode::RequestGuildMembers => 8,
            OpCode::InvalidSession => 9,
            OpCode::Hello => 10,
            OpCode::HeartbeatAck => 11,
            OpCode::RequestSoundboardSounds => 31,
        }
    }

    /// Whether a client may send this opcode.
    pub fn is_client_command(self) -> bool {
        matches!(
            self,
            OpCode::Heartbeat
                | OpCode::Identify
                | OpCode::PresenceUpdate
                | OpCode::VoiceStateUpdate
                | OpCode::Resume
                | OpCode::RequestGuildMembers
                | OpCode::RequestSoundboardSounds
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_known_opcode() {
        for n in 0..=255u8 {
            if let Some(op) = OpCode::from_u8(n) {
                assert_eq!(op.as_u8(), n);
            }
        }
        assert_eq!(OpCode::from_u8(5), None);
        assert_eq!(OpCode::from_u8(12), None);
        assert!(OpCode::Resume.is_client_command());
        assert!(!OpCode::HeartbeatAck.is_client_command());
    }
}
