//! The runs of statement reconciliation, as the ledger keeps them.

use super::{BoxFuture, StoreError};
use jiff::Timestamp;

/// One statement reconciliation run, as the ledger keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatementRun {
    /// Derived from the kind, the statement's bytes and the window, so that running the same
    /// reconciliation again is the same run (and applies nothing twice).
    pub id: String,
    /// The kind reconciled.
    pub kind: String,
    /// The statement's file name, as given.
    pub statement: String,
    /// When the run started.
    pub started_at: Timestamp,
    /// `None` while it runs (or when it was killed before the end).
    pub finished_at: Option<Timestamp>,
    /// `RECONCILED`, `RECONCILED_WITH_PENDING`, `BREAKS`, `INCOMPLETE`; `None` until finished.
    pub verdict: Option<String>,
    /// Tasks re-driven by `--apply` so far.
    pub applied: u64,
    /// The JSON report (its lists capped), once finished.
    pub report: Option<String>,
}

/// Lists statement runs, newest first.
#[derive(Clone, Debug, Default)]
pub struct StatementRunsParams {
    /// Only runs of this kind.
    pub kind: Option<String>,
    /// Most runs returned.
    pub limit: usize,
}

/// Statement reconciliation's record of its runs.
pub trait Statements: Send + Sync {
    /// Records a statement run (upsert by id).
    fn record_statement_run(&self, run: StatementRun) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Statement runs, newest first.
    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>>;

    /// One statement run.
    fn statement_run<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StatementRun>, StoreError>>;
}
