//! The reconciler's reads: the unfinished work per kind, and pages of the ledger with their
//! timelines for the conservation audit.

use super::{BoxFuture, StoreError};
use crate::event::Event;
use crate::task::{Task, TaskId};
use jiff::Timestamp;

/// Summarises the work that is not finished, per kind, for the reconciler's overdue duty and
/// `backstop doctor`. Reads only pending and running rows (through their partial indexes),
/// so its cost follows the backlog, never the finished history.
#[derive(Clone, Debug)]
pub struct BacklogParams {
    /// Due means `run_at` at or before this.
    pub now: Timestamp,
    /// Overdue means `run_at` before this (now minus the threshold).
    pub overdue_before: Timestamp,
    /// How many overdue task ids to return per kind, oldest first.
    pub sample: usize,
}

/// The unfinished work of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindBacklog {
    /// The kind.
    pub kind: String,
    /// Pending tasks, due or not.
    pub pending: u64,
    /// Pending tasks whose `run_at` has come.
    pub due: u64,
    /// Pending tasks whose `run_at` is older than the overdue threshold.
    pub overdue: u64,
    /// The oldest `run_at` among pending tasks.
    pub oldest_run_at: Option<Timestamp>,
    /// Running tasks (leased).
    pub running: u64,
    /// Up to `sample` overdue tasks, oldest `run_at` first.
    pub overdue_sample: Vec<TaskId>,
}

/// Tasks with their whole timelines, as [`Backlog::audit_page`] returns them.
pub type AuditPage = Vec<(Task, Vec<Event>)>;

impl KindBacklog {
    /// A kind with pending tasks only (running and samples filled in later).
    pub fn pending(
        kind: String,
        pending: u64,
        due: u64,
        overdue: u64,
        oldest_run_at: Option<Timestamp>,
    ) -> Self {
        KindBacklog {
            kind,
            pending,
            due,
            overdue,
            oldest_run_at,
            running: 0,
            overdue_sample: Vec::new(),
        }
    }

    /// Adds the running counts per kind to the pending ones (a kind may have only running
    /// tasks), sorted by kind: how every store assembles [`Backlog::backlog`] from its two
    /// reads.
    pub fn with_running(mut all: Vec<KindBacklog>, running: Vec<(String, u64)>) -> Vec<Self> {
        for (kind, n) in running {
            match all.iter_mut().find(|b| b.kind == kind) {
                Some(b) => b.running = n,
                None => {
                    let mut b = KindBacklog::pending(kind, 0, 0, 0, None);
                    b.running = n;
                    all.push(b);
                }
            }
        }
        all.sort_by(|a, b| a.kind.cmp(&b.kind));
        all
    }
}

/// A page of the ledger in id order, with timelines, for the conservation audit.
#[derive(Clone, Debug)]
pub struct AuditParams {
    /// Only tasks with an id after this one (the audit's cursor); from the start when `None`.
    pub after: Option<TaskId>,
    /// Most tasks on the page.
    pub limit: usize,
}

/// What the reconciler reads to find overdue work and to check conservation.
pub trait Backlog: Send + Sync {
    /// Unfinished work per kind (kinds with pending or running tasks only).
    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>>;

    /// Tasks in id order after a cursor, each with its whole timeline (as
    /// [`Tasks::timeline`](super::Tasks::timeline) gives it).
    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>>;
}
