//! The ledger's side, as the caller provides it: the tasks of the kind being reconciled.
//! The `backstop` binary implements [`Ledger`] over its store; tests over a map.

use crate::money::Money;
use backstop_core::{Status, TaskId};
use jiff::Timestamp;
use std::future::Future;

/// A task of the reconciled kind, as the ledger knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The task's id.
    pub task_id: TaskId,
    /// The business key, matched against the statement's key column.
    pub key: String,
    /// Where the task is.
    pub status: Status,
    /// The amount the task is for, when the kind has one (read from the payload by the
    /// caller). `None`: amounts are not compared for this task.
    pub amount: Option<Money>,
    /// When the task finished (its last update), for finished tasks.
    pub finished_at: Option<Timestamp>,
}

/// One page of the scan for succeeded tasks (see [`Ledger::succeeded_page`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanQuery {
    /// Only tasks that finished at or after this, when set.
    pub since: Option<Timestamp>,
    /// Only tasks that finished at or before this, when set.
    pub until: Option<Timestamp>,
    /// Where the previous page ended (`LedgerPage::next`); `None` for the first page.
    pub cursor: Option<String>,
    /// The most entries wanted.
    pub limit: usize,
}

/// A page of succeeded tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerPage {
    /// The tasks. Entries that are not `succeeded` or finished outside the window are
    /// ignored, so an implementation may filter loosely.
    pub entries: Vec<LedgerEntry>,
    /// Where the next page starts; `None` when this was the last. It must change from page
    /// to page (the scan stops with an error otherwise, rather than loop).
    pub next: Option<String>,
}

/// The tasks of one kind, as the reconciliation reads them. Both calls are batched: the
/// statement is looked up a chunk of keys at a time, and the ledger's succeeded tasks are
/// scanned a page at a time, so neither side is ever held whole in memory.
pub trait Ledger {
    /// What the ledger can fail with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The tasks with these keys, in any status and any order; keys without a task are
    /// simply absent. `keys` has no duplicates.
    fn lookup(
        &mut self,
        keys: &[String],
    ) -> impl Future<Output = Result<Vec<LedgerEntry>, Self::Error>> + Send;

    /// A page of the `succeeded` tasks that finished within the query's window, in a stable
    /// order of the implementation's choosing, to find those the statement lacks.
    fn succeeded_page(
        &mut self,
        query: &ScanQuery,
    ) -> impl Future<Output = Result<LedgerPage, Self::Error>> + Send;
}
