//! Discord ids ("snowflakes"): 64-bit integers sent as JSON strings.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

use super::ParseError;

/// A Discord id. Serialises as a string (as Discord sends it) and accepts a
/// string or an integer when reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Snowflake(u64);

impl Snowflake {
    /// Wraps a raw id.
    pub const fn new(id: u64) -> Snowflake {
        Snowflake(id)
    }

    /// The raw id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Snowflake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Snowflake {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Snowflake, ParseError> {
        s.trim()
            .parse::<u64>()
            .map(Snowflake)
            .map_err(|_| ParseError::new(s, "a Discord id (expected digits)"))
    }
}

impl Serialize for Snowflake {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Snowflake {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Snowflake, D::Error> {
        struct SnowflakeVisitor;
        impl Visitor<'_> for SnowflakeVisitor {
            type Value = Snowflake;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Discord id as a string of digits or an integer")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Snowflake, E> {
                Ok(Snowflake(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Snowflake, E> {
                u64::try_from(v)
                    .map(Snowflake)
                    .map_err(|_| E::custom("a Discord id cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Snowflake, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(SnowflakeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strings_and_integers_writes_strings() {
        let a: Snowflake = serde_json::from_str("\"175928847299117063\"").unwrap();
        let b: Snowflake = serde_json::from_str("175928847299117063").unwrap();
        assert_eq!(a, b);
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"175928847299117063\"");
    }

    #[test]
    fn rejects_garbage_with_a_message() {
        let err = serde_json::from_str::<Snowflake>("\"12ab\"").unwrap_err();
        assert!(err.to_string().contains("not a Discord id"), "{err}");
        assert!(serde_json::from_str::<Snowflake>("-5").is_err());
        assert!(serde_json::from_str::<Snowflake>("1.5").is_err());
    }
}
