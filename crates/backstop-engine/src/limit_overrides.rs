//! A kind's limits per key as they stand, and overrides of them for one key set at run time
//! (`PUT /v1/limits/{kind}/keys/{key}`, `backstop limits set|clear`). An override is a ledger
//! row, read by every limited claim of the kind on any process, so it takes effect at the next
//! claim and outlives restarts; each change is kept in the key's history with who and why.

use crate::engine::Engine;
use backstop_core::StoreError;
use backstop_core::duration::format_duration;
use backstop_core::limit::{MAX_KEY_BYTES, RateSpec};
use backstop_core::store::{
    ClearLimitOverrideParams, LimitOverride, LimitOverrideHistoryParams, LimitOverridesParams,
    SetLimitOverrideParams,
};
use jiff::Timestamp;
use serde::Serialize;

/// History entries shown with a key's limits.
const HISTORY: u32 = 20;

/// Why a read or change of a key's limits was refused.
#[derive(Debug, thiserror::Error)]
pub enum LimitOverrideError {
    #[error("no kind named {0:?} (configured: {1})")]
    Unknown(String, String),
    #[error(
        "kind {0:?} has no limits per key: give it limits.concurrency or limits.rate in the configuration first (an override needs the limit's key)"
    )]
    NotLimited(String),
    #[error(
        "kind {0:?} has no limits.concurrency, so `max` has nothing to override; give it one in the configuration, or set only `rate`"
    )]
    NoConcurrencyLimit(String),
    #[error(
        "kind {0:?} has no limits.rate, so `rate` has nothing to override; give it one in the configuration, or set only `max`"
    )]
    NoRateLimit(String),
    #[error("give `max`, `rate` or both: an override with neither changes nothing")]
    Empty,
    #[error("{0}")]
    Invalid(String),
    #[error("a reason is required: say why the key's limits change (it is kept in its history)")]
    NoReason,
    #[error("the key is {0} bytes long; a limit key is at most {MAX_KEY_BYTES}")]
    KeyTooLong(usize),
    #[error("key {1:?} of kind {0:?} has no override to clear")]
    NoOverride(String, String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a key's limits become.
#[derive(Clone, Debug, Default)]
pub struct KeyLimits {
    /// Most running at once for the key.
    pub max: Option<u32>,
    /// Its rate.
    pub rate: Option<RateSpec>,
}

/// A kind's limits per key: as configured, and every key's override.
#[derive(Debug, Clone, Serialize)]
pub struct KindLimitsView {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateView>,
    pub overrides: Vec<OverrideView>,
}

/// One key's limits: in force now (its override's, else the kind's), its override, its history.
#[derive(Debug, Clone, Serialize)]
pub struct KeyLimitsView {
    pub kind: String,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateView>,
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub overridden: Option<OverrideView>,
    /// Sets and clears, newest first.
    pub history: Vec<ChangeView>,
}

/// A concurrency limit.
#[derive(Debug, Clone, Serialize)]
pub struct ConcurrencyView {
    /// The payload's pointer.
    pub key: String,
    pub max: u32,
}

/// A rate limit.
#[derive(Debug, Clone, Serialize)]
pub struct RateView {
    /// The payload's pointer.
    pub key: String,
    pub limit: u32,
    pub period: String,
    pub burst: u32,
}

/// A key's override.
#[derive(Debug, Clone, Serialize)]
pub struct OverrideView {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateSpecView>,
    pub by: String,
    pub reason: String,
    pub since: Timestamp,
}

/// A rate without its key.
#[derive(Debug, Clone, Serialize)]
pub struct RateSpecView {
    pub limit: u32,
    pub period: String,
    pub burst: u32,
}

/// One change of a key's override.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeView {
    /// `set` or `clear`.
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateSpecView>,
    pub by: String,
    pub reason: String,
    pub at: Timestamp,
}

fn spec_view(r: &RateSpec) -> RateSpecView {
    RateSpecView {
        limit: r.limit,
        period: format_duration(r.period),
        burst: r.burst,
    }
}

fn override_view(o: &LimitOverride) -> OverrideView {
    OverrideView {
        key: o.key.clone(),
        max: o.max,
        rate: o.rate.as_ref().map(spec_view),
        by: o.by.clone(),
        reason: o.reason.clone(),
        since: o.since,
    }
}

impl Engine {
    /// `kind`'s limits per key as configured, with every key's override.
    pub async fn kind_limits(&self, kind: &str) -> Result<KindLimitsView, LimitOverrideError> {
        self.limited_kind(kind)?;
        let overrides = self
            .ctx
            .store
            .limit_overrides(LimitOverridesParams { kind: kind.into() })
            .await?;
        let (concurrency, rate) = self.in_force(kind, None);
        Ok(KindLimitsView {
            kind: kind.to_string(),
            concurrency,
            rate,
            overrides: overrides.iter().map(override_view).collect(),
        })
    }

    /// One key's limits in force, its override and its history.
    pub async fn key_limits(
        &self,
        kind: &str,
        key: &str,
    ) -> Result<KeyLimitsView, LimitOverrideError> {
        self.limited_kind(kind)?;
        let overridden = self
            .ctx
            .store
            .limit_overrides(LimitOverridesParams { kind: kind.into() })
            .await?
            .into_iter()
            .find(|o| o.key == key);
        let history = self
            .ctx
            .store
            .limit_override_history(LimitOverrideHistoryParams {
                kind: kind.into(),
                key: key.into(),
                limit: HISTORY,
            })
            .await?;
        let (concurrency, rate) = self.in_force(kind, overridden.as_ref());
        Ok(KeyLimitsView {
            kind: kind.to_string(),
            key: key.to_string(),
            concurrency,
            rate,
            overridden: overridden.as_ref().map(override_view),
            history: history
                .iter()
                .map(|c| ChangeView {
                    action: c.action.as_str(),
                    max: c.entry.max,
                    rate: c.entry.rate.as_ref().map(spec_view),
                    by: c.entry.by.clone(),
                    reason: c.entry.reason.clone(),
                    at: c.entry.since,
                })
                .collect(),
        })
    }

    /// Sets `key`'s limits of `kind` (replacing any override it had); `by` is who asks.
    pub async fn set_key_limits(
        &self,
        kind: &str,
        key: &str,
        limits: KeyLimits,
        reason: &str,
        by: &str,
    ) -> Result<KeyLimitsView, LimitOverrideError> {
        let cfg = self.limited_kind(kind)?;
        check_key(key)?;
        if limits.max.is_none() && limits.rate.is_none() {
            return Err(LimitOverrideError::Empty);
        }
        if limits.max.is_some() && cfg.concurrency_limit.is_none() {
            return Err(LimitOverrideError::NoConcurrencyLimit(kind.into()));
        }
        if limits.rate.is_some() && cfg.rate_limit.is_none() {
            return Err(LimitOverrideError::NoRateLimit(kind.into()));
        }
        if limits.max == Some(0) {
            return Err(LimitOverrideError::Invalid(
                "max 0 would never let a task of the key run: give at least 1 (to stop a key, cancel its tasks)".into(),
            ));
        }
        if reason.trim().is_empty() {
            return Err(LimitOverrideError::NoReason);
        }
        let entry = LimitOverride {
            kind: kind.into(),
            key: key.into(),
            max: limits.max,
            rate: limits.rate,
            by: by.into(),
            reason: reason.trim().into(),
            since: self.ctx.clock.now(),
        };
        self.ctx
            .store
            .set_limit_override(SetLimitOverrideParams { entry })
            .await?;
        tracing::warn!(kind, key, by, reason, "limits of a key overridden");
        self.key_limits(kind, key).await
    }

    /// Clears `key`'s override: it follows its kind's limits again.
    pub async fn clear_key_limits(
        &self,
        kind: &str,
        key: &str,
        reason: &str,
        by: &str,
    ) -> Result<KeyLimitsView, LimitOverrideError> {
        self.limited_kind(kind)?;
        check_key(key)?;
        if reason.trim().is_empty() {
            return Err(LimitOverrideError::NoReason);
        }
        let gone = self
            .ctx
            .store
            .clear_limit_override(ClearLimitOverrideParams {
                kind: kind.into(),
                key: key.into(),
                by: by.into(),
                reason: reason.trim().into(),
                now: self.ctx.clock.now(),
            })
            .await?;
        if gone.is_none() {
            return Err(LimitOverrideError::NoOverride(kind.into(), key.into()));
        }
        tracing::warn!(kind, key, by, reason, "override of a key's limits cleared");
        self.key_limits(kind, key).await
    }

    fn limited_kind(&self, kind: &str) -> Result<&backstop_core::KindConfig, LimitOverrideError> {
        let Some(cfg) = self.ctx.kinds.configs().get(kind) else {
            return Err(LimitOverrideError::Unknown(
                kind.to_string(),
                self.ctx.kinds.names(),
            ));
        };
        if cfg.concurrency_limit.is_none() && cfg.rate_limit.is_none() {
            return Err(LimitOverrideError::NotLimited(kind.to_string()));
        }
        Ok(cfg)
    }

    /// The limits in force for a key with this override (the kind's where it sets none).
    fn in_force(
        &self,
        kind: &str,
        o: Option<&LimitOverride>,
    ) -> (Option<ConcurrencyView>, Option<RateView>) {
        let cfg = &self.ctx.kinds.configs()[kind];
        let concurrency = cfg.concurrency_limit.as_ref().map(|c| ConcurrencyView {
            key: c.key.clone(),
            max: o.and_then(|o| o.max).unwrap_or(c.max),
        });
        let rate = cfg.rate_limit.as_ref().map(|r| {
            let spec = o.and_then(|o| o.rate).unwrap_or(r.spec());
            RateView {
                key: r.key.clone(),
                limit: spec.limit,
                period: format_duration(spec.period),
                burst: spec.burst,
            }
        });
        (concurrency, rate)
    }
}

fn check_key(key: &str) -> Result<(), LimitOverrideError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(LimitOverrideError::KeyTooLong(key.len()));
    }
    Ok(())
}
