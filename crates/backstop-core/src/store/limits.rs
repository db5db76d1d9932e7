//! Overrides of a kind's limits for one key, set at run time ([`crate::limit::KeyOverride`]):
//! one row per `(kind, key)`, and a history of every change, written in the same transaction.
//! A limited claim reads its kind's overrides itself, in its own transaction.

use super::{BoxFuture, StoreError};
use crate::limit::RateSpec;
use jiff::Timestamp;

/// A key's override as stored: what it sets, who set it and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitOverride {
    /// The kind whose limits it overrides.
    pub kind: String,
    /// The key (a value of the limit's pointer).
    pub key: String,
    /// Most running at once for this key (`None`: the kind's).
    pub max: Option<u32>,
    /// The rate for this key (`None`: the kind's).
    pub rate: Option<RateSpec>,
    /// Who set it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When.
    pub since: Timestamp,
}

impl LimitOverride {
    /// The stored numbers: `max`, `rate_limit`, `rate_period` (milliseconds), `rate_burst`.
    pub fn stored(&self) -> [Option<i64>; 4] {
        let r = self.rate.as_ref();
        [
            self.max.map(i64::from),
            r.map(|r| i64::from(r.limit)),
            r.map(|r| i64::try_from(r.period.as_millis()).unwrap_or(i64::MAX)),
            r.map(|r| i64::from(r.burst)),
        ]
    }

    /// The limits it sets, from the stored numbers (as [`LimitOverride::stored`] gives them).
    pub fn limits_from(stored: [Option<i64>; 4]) -> crate::limit::KeyOverride {
        let [max, limit, period, burst] = stored;
        crate::limit::KeyOverride::from_row(max, limit, period, burst)
    }
}

/// What a change of an override did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverrideAction {
    /// Set or replaced.
    Set,
    /// Removed: the key follows its kind again.
    Clear,
}

impl OverrideAction {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideAction::Set => "set",
            OverrideAction::Clear => "clear",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "set" => Some(OverrideAction::Set),
            "clear" => Some(OverrideAction::Clear),
            _ => None,
        }
    }

    /// Parses a name read from the store: one it never writes is the store's error.
    pub fn stored(s: &str) -> Result<Self, StoreError> {
        Self::parse(s)
            .ok_or_else(|| StoreError::Database(format!("unknown override action {s:?}").into()))
    }
}

/// One entry of an override's history: the action, with the override as it was set (or as it
/// was when cleared), its `by`, `reason` and `since` those of the change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverrideChange {
    /// Set or cleared.
    pub action: OverrideAction,
    /// The values, who, why and when.
    pub entry: LimitOverride,
}

/// A kind's overrides, by key in byte order.
#[derive(Clone, Debug)]
pub struct LimitOverridesParams {
    /// Whose.
    pub kind: String,
}

/// Sets (or replaces) a key's override and records it.
#[derive(Clone, Debug)]
pub struct SetLimitOverrideParams {
    /// The override; its `since` is when it is written.
    pub entry: LimitOverride,
}

/// Removes a key's override and records it.
#[derive(Clone, Debug)]
pub struct ClearLimitOverrideParams {
    /// The kind.
    pub kind: String,
    /// The key.
    pub key: String,
    /// Who.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When.
    pub now: Timestamp,
}

/// A key's override history, newest first.
#[derive(Clone, Debug)]
pub struct LimitOverrideHistoryParams {
    /// The kind.
    pub kind: String,
    /// The key.
    pub key: String,
    /// At most this many entries.
    pub limit: u32,
}

/// Overrides of limits per key, and their history.
pub trait LimitOverrides: Send + Sync {
    /// A kind's overrides.
    fn limit_overrides(
        &self,
        p: LimitOverridesParams,
    ) -> BoxFuture<'_, Result<Vec<LimitOverride>, StoreError>>;

    /// Sets a key's override (replacing any), recording the change.
    fn set_limit_override(
        &self,
        p: SetLimitOverrideParams,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Removes a key's override, recording the change; the override removed, `None` when the
    /// key had none (nothing is recorded then).
    fn clear_limit_override(
        &self,
        p: ClearLimitOverrideParams,
    ) -> BoxFuture<'_, Result<Option<LimitOverride>, StoreError>>;

    /// A key's history of changes, newest first.
    fn limit_override_history(
        &self,
        p: LimitOverrideHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<OverrideChange>, StoreError>>;
}
