//! Pausing and resuming a kind by hand (`POST /v1/kinds/{kind}/pause|resume`, `backstop kinds
//! pause|resume KIND`), and what a kind's pauses are now. The pause is a ledger row, so every
//! process on the database obeys it within its watch interval and it outlives restarts; each
//! pause and resume is kept in the kind's history with who and why.

use super::watch;
use crate::engine::Engine;
use backstop_core::StoreError;
use backstop_core::pause::{Gate, PauseCause, PauseEntry, PauseRecord};
use backstop_core::store::{PauseHistoryParams, PauseParams, PausesParams, ResumeParams};
use jiff::Timestamp;
use serde::Serialize;

/// History entries shown with a kind's pauses.
const HISTORY: u32 = 20;

/// Why a pause or resume by hand was refused.
#[derive(Debug, thiserror::Error)]
pub enum KindPauseError {
    #[error("no kind named {0:?} (configured: {1})")]
    Unknown(String, String),
    #[error("a reason is required: say why the kind is paused (it is kept in its history)")]
    NoReason,
    #[error(
        "kind {0:?} is paused in the configuration (paused = true): remove that line and restart to resume it"
    )]
    PausedInConfig(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A kind's dispatch as it stands: open, paused (and why, by whom, until when) or probing,
/// its stored pauses and its recent history.
#[derive(Debug, Clone, Serialize)]
pub struct KindPauseView {
    pub kind: String,
    /// `open`, `paused` or `probing`.
    pub state: &'static str,
    /// What pauses it: `manual`, `breaker` or `retry_after` (none when open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the pause ends by itself (a cool-down, a `Retry-After`); none for a manual one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// Every stored pause of the kind (a manual pause and a breaker's can stand together).
    pub pauses: Vec<PauseView>,
    /// The latest pauses and resumes, newest first.
    pub history: Vec<HistoryView>,
}

/// One stored pause.
#[derive(Debug, Clone, Serialize)]
pub struct PauseView {
    pub cause: &'static str,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    /// The breaker's trips in a row.
    pub trips: u32,
    pub by: String,
    pub since: Timestamp,
}

/// One history entry.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryView {
    pub at: Timestamp,
    /// `pause` or `resume`.
    pub action: &'static str,
    pub cause: &'static str,
    pub reason: String,
    pub by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

impl Engine {
    /// Pauses `kind` by hand: nothing of it is claimed or leased until resumed, by any process
    /// on this database. `by` is who asks (the API token's name, `cli`).
    pub async fn pause_kind(
        &self,
        kind: &str,
        reason: &str,
        by: &str,
    ) -> Result<KindPauseView, KindPauseError> {
        let scope = self.known_kind(kind)?;
        if reason.trim().is_empty() {
            return Err(KindPauseError::NoReason);
        }
        let now = self.ctx.clock.now();
        self.ctx
            .store
            .pause(PauseParams {
                record: PauseRecord {
                    scope,
                    cause: PauseCause::Manual,
                    reason: reason.trim().to_string(),
                    until: None,
                    trips: 0,
                    by: by.to_string(),
                    since: now,
                },
            })
            .await?;
        tracing::warn!(kind, by, reason, "kind paused by hand");
        self.kind_pause(kind).await
    }

    /// Resumes `kind`: clears its manual pause and any breaker or `Retry-After` pause (the
    /// operator says the target is fine). A kind paused in the configuration stays paused.
    pub async fn resume_kind(
        &self,
        kind: &str,
        reason: &str,
        by: &str,
    ) -> Result<KindPauseView, KindPauseError> {
        let scope = self.known_kind(kind)?;
        if self.ctx.kinds.configs()[kind].paused {
            return Err(KindPauseError::PausedInConfig(kind.to_string()));
        }
        let reason = match reason.trim() {
            "" => "resumed by hand".to_string(),
            r => r.to_string(),
        };
        let removed = self
            .ctx
            .store
            .resume(ResumeParams {
                scope,
                causes: PauseCause::ALL.to_vec(),
                reason: reason.clone(),
                by: by.to_string(),
                now: self.ctx.clock.now(),
            })
            .await?;
        // A breaker of its host is the person's to clear too: they say the target is back.
        // The host's own `Retry-After` is not: the host said when to come back.
        let host_breaker = self
            .ctx
            .kinds
            .get(kind)
            .and_then(|k| Some(k.gate.host_breaker()?.scope.clone()));
        if let Some(scope) = host_breaker {
            self.ctx
                .store
                .resume(ResumeParams {
                    scope,
                    causes: vec![PauseCause::Breaker],
                    reason: format!("{reason} (by resuming {kind})"),
                    by: by.to_string(),
                    now: self.ctx.clock.now(),
                })
                .await?;
        }
        if let Some(k) = self.ctx.kinds.get(kind) {
            k.gate.reset();
        }
        tracing::info!(
            kind,
            by,
            reason,
            cleared = removed.len(),
            "kind resumed by hand"
        );
        self.kind_pause(kind).await
    }

    /// `kind`'s dispatch as the ledger says now, with its history. Also sets this process's
    /// gates from what it read, so a change made here applies here at once.
    pub async fn kind_pause(&self, kind: &str) -> Result<KindPauseView, KindPauseError> {
        let scope = self.known_kind(kind)?;
        let store = &self.ctx.store;
        let all = store.pauses(PausesParams::default()).await?;
        let now = self.ctx.clock.now();
        // Its own rows and its host's (a `Retry-After` pauses every kind on the host).
        let rows: Vec<PauseRecord> = match self.ctx.kinds.get(kind) {
            Some(k) => all
                .iter()
                .filter(|r| k.gate.governed_by(r))
                .cloned()
                .collect(),
            None => all.iter().filter(|r| r.scope == scope).cloned().collect(),
        };
        watch::apply(&self.ctx.kinds, all, now);
        let history = store
            .pause_history(PauseHistoryParams {
                scope,
                limit: HISTORY,
            })
            .await?;
        let gate = match self.ctx.kinds.get(kind) {
            Some(k) => k.gate.current(),
            None => Gate::of(&rows, now),
        };
        Ok(view(kind, gate, &rows, &history))
    }

    /// `kind`'s dispatch in this process, as its gate says (`open`, `paused`, `probing`):
    /// current in a running engine, whose pause watch keeps it.
    pub fn dispatch_state(&self, kind: &str) -> Option<&'static str> {
        Some(self.ctx.kinds.get(kind)?.gate.current().state())
    }

    /// The scope of a configured kind.
    fn known_kind(&self, kind: &str) -> Result<String, KindPauseError> {
        if self.ctx.kinds.get(kind).is_none() {
            let names = self.ctx.kinds.names();
            return Err(KindPauseError::Unknown(kind.to_string(), names));
        }
        Ok(backstop_core::pause::kind_scope(kind))
    }
}

fn view(kind: &str, gate: Gate, rows: &[PauseRecord], history: &[PauseEntry]) -> KindPauseView {
    let mut v = KindPauseView {
        kind: kind.to_string(),
        state: gate.state(),
        cause: None,
        reason: None,
        until: None,
        by: None,
        since: None,
        pauses: rows
            .iter()
            .map(|r| PauseView {
                cause: r.cause.as_str(),
                reason: r.reason.clone(),
                until: r.until,
                trips: r.trips,
                by: r.by.clone(),
                since: r.since,
            })
            .collect(),
        history: history
            .iter()
            .map(|e| HistoryView {
                at: e.at,
                action: e.action.as_str(),
                cause: e.cause.as_str(),
                reason: e.reason.clone(),
                by: e.by.clone(),
                until: e.until,
            })
            .collect(),
    };
    match gate {
        Gate::Open => {}
        Gate::Closed {
            cause,
            reason,
            until,
            by,
            since,
        } => {
            v.cause = Some(cause.as_str());
            v.reason = Some(reason);
            v.until = until;
            v.by = Some(by);
            v.since = (since != Timestamp::UNIX_EPOCH).then_some(since);
        }
        Gate::Probing { reason, .. } => {
            v.cause = Some(PauseCause::Breaker.as_str());
            v.reason = Some(reason);
        }
    }
    v
}
