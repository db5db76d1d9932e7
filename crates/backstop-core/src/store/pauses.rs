//! Pauses of a kind's dispatch ([`crate::pause`]): one row per `(scope, cause)`, and a history
//! of every pause and resume, written in the same transaction.

use super::{BoxFuture, StoreError};
use crate::pause::{PauseCause, PauseEntry, PauseRecord};
use jiff::Timestamp;

/// Every stored pause (of every scope; there is one row per scope and cause at most).
#[derive(Clone, Debug, Default)]
pub struct PausesParams {}

/// Writes a pause where [`PauseRecord::replaces`] says it changes the stored one, and records
/// it in the history.
#[derive(Clone, Debug)]
pub struct PauseParams {
    /// The pause; its `since` is when it is written.
    pub record: PauseRecord,
}

/// Clears the pauses of `scope` of the given causes, and records each in the history.
#[derive(Clone, Debug)]
pub struct ResumeParams {
    /// What to resume.
    pub scope: String,
    /// Which causes (an operator's resume: all; a breaker closing: breaker and `Retry-After`).
    pub causes: Vec<PauseCause>,
    /// Why (the operator's reason, "probe succeeded").
    pub reason: String,
    /// Who.
    pub by: String,
    /// When.
    pub now: Timestamp,
}

/// A scope's pause history, newest first.
#[derive(Clone, Debug)]
pub struct PauseHistoryParams {
    /// Whose history.
    pub scope: String,
    /// At most this many entries.
    pub limit: u32,
}

/// Pauses and their history.
pub trait Pauses: Send + Sync {
    /// Every stored pause.
    fn pauses(&self, p: PausesParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>>;

    /// Writes a pause; returns whether it changed what was stored (a breaker trip that another
    /// process already counted changes nothing and leaves no history).
    fn pause(&self, p: PauseParams) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Clears pauses; returns the ones it removed.
    fn resume(&self, p: ResumeParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>>;

    /// A scope's history, newest first.
    fn pause_history(
        &self,
        p: PauseHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<PauseEntry>, StoreError>>;
}
