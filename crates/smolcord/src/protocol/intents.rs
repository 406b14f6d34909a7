//! Gateway intents: which event groups the bot subscribes to.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::ParseError;

/// A set of gateway intents (a bitmask on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Intents(u64);

/// (name, bit value, privileged) for every documented intent.
const TABLE: &[(&str, u64, bool)] = &[
    ("GUILDS", 1 << 0, false),
    ("GUILD_MEMBERS", 1 << 1, true),
    ("GUILD_MODERATION", 1 << 2, false),
    ("GUILD_EXPRESSIONS", 1 << 3, false),
    ("GUILD_INTEGRATIONS", 1 << 4, false),
    ("GUILD_WEBHOOKS", 1 << 5, false),
    ("GUILD_INVITES", 1 << 6, false),
    ("GUILD_VOICE_STATES", 1 << 7, false),
    ("GUILD_PRESENCES", 1 << 8, true),
    ("GUILD_MESSAGES", 1 << 9, false),
    ("GUILD_MESSAGE_REACTIONS", 1 << 10, false),
    ("GUILD_MESSAGE_TYPING", 1 << 11, false),
    ("DIRECT_MESSAGES", 1 << 12, false),
    ("DIRECT_MESSAGE_REACTIONS", 1 << 13, false),
    ("DIRECT_MESSAGE_TYPING", 1 << 14, false),
    ("MESSAGE_CONTENT", 1 << 15, true),
    ("GUILD_SCHEDULED_EVENTS", 1 << 16, false),
    ("AUTO_MODERATION_CONFIGURATION", 1 << 20, false),
    ("AUTO_MODERATION_EXECUTION", 1 << 21, false),
    ("GUILD_MESSAGE_POLLS", 1 << 24, false),
    ("DIRECT_MESSAGE_POLLS", 1 << 25, false),
];

impl Intents {
    /// GUILDS (1).
    pub const GUILDS: Intents = Intents(1 << 0);
    /// GUILD_MEMBERS (2), privileged.
    pub const GUILD_MEMBERS: Intents = Intents(1 << 1);
    /// GUILD_PRESENCES (256), privileged.
    pub const GUILD_PRESENCES: Intents = Intents(1 << 8);
    /// GUILD_MESSAGES (512).
    pub const GUILD_MESSAGES: Intents = Intents(1 << 9);
    /// DIRECT_MESSAGES (4096): DM message events; enough for a DM bridge.
    pub const DIRECT_MESSAGES: Intents = Intents(1 << 12);
    /// MESSAGE_CONTENT (32768), privileged: `content`, embeds, attachments
    /// and components of guild messages that neither mention the bot nor
    /// are its own (DMs carry them without it).
    pub const MESSAGE_CONTENT: Intents = Intents(1 << 15);

    /// No intents.
    pub const fn empty() -> Intents {
        Intents(0)
    }

    /// From a raw bitmask (not validated; see [`Intents::unknown_bits`]).
    pub const fn from_bits(bits: u64) -> Intents {
        Intents(bits)
    }

    /// The raw bitmask.
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// Every documented intent.
    pub fn all_known() -> Intents {
        Intents(TABLE.iter().fold(0, |acc, (_, bit, _)| acc | bit))
    }

    /// The privileged intents (must be enabled in the Developer Portal).
    pub fn privileged() -> Intents {
        Intents(
            TABLE
                .iter()
                .filter(|(_, _, privileged)| *privileged)
                .fold(0, |acc, (_, bit, _)| acc | bit),
        )
    }

    /// Bits that no documented intent uses (the gateway closes with 4013).
    pub fn unknown_bits(self) -> u64 {
        self.0 & !Intents::all_known().0
    }

    /// The privileged intents in this set.
    pub fn privileged_part(self) -> Intents {
        Intents(self.0 & Intents::privileged().0)
    }

    /// Whether every intent of `other` is in this set.
    pub fn contains(self, other: Intents) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets together.
    pub fn union(self, other: Intents) -> Intents {
        Intents(self.0 | other.0)
    }

    /// Parses `"DIRECT_MESSAGES|GUILDS"` or a number.
    pub fn parse(text: &str) -> Result<Intents, ParseError> {
        if let Ok(bits) = text.trim().parse::<u64>() {
            return Ok(Intents(bits));
        }
        text.split(['|', ',', ' '])
            .filter(|part| !part.is_empty())
            .try_fold(Intents::empty(), |acc, name| {
                TABLE
                    .iter()
                    .find(|(known, _, _)| known.eq_ignore_ascii_case(name))
                    .map(|(_, bit, _)| Intents(acc.0 | bit))
                    .ok_or_else(|| ParseError::new(name, "an intent Discord documents"))
            })
    }
}

/// `Intents::DIRECT_MESSAGES | Intents::MESSAGE_CONTENT`.
impl std::ops::BitOr for Intents {
    type Output = Intents;

    fn bitor(self, other: Intents) -> Intents {
        self.union(other)
    }
}

impl std::ops::BitOrAssign for Intents {
    fn bitor_assign(&mut self, other: Intents) {
        *self = self.union(other);
    }
}

impl fmt::Debug for Intents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = TABLE
            .iter()
            .filter(|(_, bit, _)| self.0 & bit != 0)
            .map(|(name, _, _)| *name)
            .collect();
        write!(f, "Intents({} = {}", self.0, names.join("|"))?;
        if self.unknown_bits() != 0 {
            write!(f, " + unknown {:#x}", self.unknown_bits())?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileged_are_members_presences_content() {
        assert_eq!(
            Intents::privileged(),
            Intents::GUILD_MEMBERS
                .union(Intents::GUILD_PRESENCES)
                .union(Intents::MESSAGE_CONTENT)
        );
        assert_eq!(Intents::DIRECT_MESSAGES.privileged_part(), Intents::empty());
    }

    #[test]
    fn docs_example_513_is_guilds_and_guild_messages() {
        assert_eq!(Intents::parse("GUILDS|GUILD_MESSAGES").unwrap().bits(), 513);
        assert_eq!(Intents::parse("4096").unwrap(), Intents::DIRECT_MESSAGES);
        assert!(Intents::parse("DIRECT_MESAGES")
            .unwrap_err()
            .to_string()
            .contains("`DIRECT_MESAGES` is not an intent"));
    }

    #[test]
    fn unknown_bits_are_found() {
        assert_eq!(Intents::from_bits(1 << 17).unknown_bits(), 1 << 17);
        assert_eq!(Intents::all_known().unknown_bits(), 0);
        assert!(format!("{:?}", Intents::from_bits(4096 | 1 << 17)).contains("unknown"));
    }

    #[test]
    fn serialises_as_a_number() {
        assert_eq!(
            serde_json::to_string(&Intents::DIRECT_MESSAGES).unwrap(),
            "4096"
        );
    }

    #[test]
    fn bit_or_is_union() {
        let mut intents = Intents::DIRECT_MESSAGES | Intents::MESSAGE_CONTENT;
        assert_eq!(intents.bits(), 4096 | 32768);
        intents |= Intents::GUILDS;
        assert!(intents.contains(Intents::GUILDS | Intents::DIRECT_MESSAGES));
    }
}
