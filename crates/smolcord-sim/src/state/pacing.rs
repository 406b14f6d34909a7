//! Identify pacing, changeable while the simulator runs: whether an
//! Identify too early for its `max_concurrency` bucket gets op 9 (Discord:
//! one per bucket per 5 s), the bucket count `GET /gateway/bot` reports and
//! identifies are bucketed by, and the shard count it recommends. Starts
//! from the [`SimConfig`](crate::SimConfig); `smolcord sim` sets it with
//! `--identify-pacing`, `--max-concurrency`, `--shards`, and the control
//! API with `POST /control/identify`.

use crate::model::config::SimConfig;
use crate::model::sim_error::SimError;
use serde::Serialize;
use serde_json::Value;

/// The largest `max_concurrency` accepted (Discord's large bots have 16 ×
/// 2^k buckets; beyond this nothing more is exercised).
pub const MAX_CONCURRENCY: u32 = 1024;
/// The largest recommended shard count accepted.
pub const MAX_SHARDS: u32 = 4096;

/// How identifies are paced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IdentifyPacing {
    /// Op 9 `false` for an Identify within the identify window of the
    /// previous one of its bucket.
    pub enforce: bool,
    /// Buckets (`shard_id % max_concurrency`), as `GET /gateway/bot`
    /// reports them.
    pub max_concurrency: u32,
    /// The shard count `GET /gateway/bot` recommends (unless
    /// `SimConfig::required_shards` says otherwise).
    pub shards: u32,
}

impl IdentifyPacing {
    pub(crate) fn from_config(config: &SimConfig) -> IdentifyPacing {
        IdentifyPacing {
            enforce: config.enforce_identify_concurrency,
            max_concurrency: config.session_start_limit.max_concurrency.max(1),
            shards: config.recommended_shards.max(1),
        }
    }

    /// Checks the ranges; the error names the field.
    pub fn check(&self) -> Result<(), SimError> {
        if !(1..=MAX_CONCURRENCY).contains(&self.max_concurrency) {
            return Err(SimError::OutOfRange {
                field: "max_concurrency",
                value: u64::from(self.max_concurrency),
                max: u64::from(MAX_CONCURRENCY),
            });
        }
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(SimError::OutOfRange {
                field: "shards",
                value: u64::from(self.shards),
                max: u64::from(MAX_SHARDS),
            });
        }
        Ok(())
    }

    /// This pacing with the fields of a control API body changed:
    /// `{"enforce": bool, "max_concurrency": n, "shards": n}`, each
    /// optional.
    pub(crate) fn updated(mut self, body: &Value) -> Result<IdentifyPacing, String> {
        let count = |name: &str| -> Result<Option<u32>, String> {
            match body.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| format!("field `{name}` must be a positive integer")),
            }
        };
        if let Some(v) = body.get("enforce").filter(|v| !v.is_null()) {
            self.enforce = v.as_bool().ok_or("field `enforce` must be true or false")?;
        }
        if let Some(n) = count("max_concurrency")? {
            self.max_concurrency = n;
        }
        if let Some(n) = count("shards")? {
            self.shards = n;
        }
        self.check().map_err(|e| e.to_string())?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn updates_are_partial_and_checked() {
        let pacing = IdentifyPacing::from_config(&SimConfig::default());
        assert_eq!(
            pacing,
            IdentifyPacing {
                enforce: false,
                max_concurrency: 1,
                shards: 1
            }
        );
        let changed = pacing.updated(&json!({"max_concurrency": 16})).unwrap();
        assert_eq!((changed.enforce, changed.max_concurrency), (false, 16));
        let on = changed.updated(&json!({"enforce": true})).unwrap();
        assert_eq!((on.enforce, on.max_concurrency), (true, 16));
        assert!(pacing
            .updated(&json!({"max_concurrency": 0}))
            .unwrap_err()
            .contains("max_concurrency must be 1"));
        assert!(pacing
            .updated(&json!({"shards": "x"}))
            .unwrap_err()
            .contains("`shards`"));
        assert!(pacing
            .updated(&json!({"enforce": 1}))
            .unwrap_err()
            .contains("`enforce`"));
    }
}
