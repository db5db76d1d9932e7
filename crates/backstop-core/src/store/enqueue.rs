//! Putting tasks in the ledger.

use super::{BoxFuture, StoreError};
use crate::task::{NewTask, TaskId};
use jiff::Timestamp;

/// Puts tasks in the ledger, all in one transaction.
#[derive(Clone, Debug)]
pub struct EnqueueParams {
    /// The tasks, in order.
    pub tasks: Vec<NewTask>,
    /// When they are enqueued (`created_at`).
    pub now: Timestamp,
}

/// The fate of one task of an [`EnqueueParams`].
#[derive(Clone, Debug, PartialEq)]
pub enum EnqueueResult {
    /// A new task was created with this id.
    Created(TaskId),
    /// The same `(kind, key)` with the same payload already existed: this is its id.
    Existing(TaskId),
    /// The same `(kind, key)` exists with a different payload; nothing was written for it.
    Conflict(TaskId),
}

impl EnqueueResult {
    /// The id of the task this result is about.
    pub fn id(&self) -> TaskId {
        match self {
            EnqueueResult::Created(id)
            | EnqueueResult::Existing(id)
            | EnqueueResult::Conflict(id) => *id,
        }
    }
}

/// Creating tasks (the API, the CLI, cron ticks, statement re-dispatch).
pub trait Enqueue: Send + Sync {
    /// Creates tasks, idempotently by `(kind, key)`. Returns one result per task, in order.
    /// Durable when it returns.
    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>>;
}
