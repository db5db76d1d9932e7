//! Manual actions on one task: retry, resolve, cancel, redrive.

use super::{BoxFuture, StoreError};
use crate::task::{Task, TaskId};
use jiff::Timestamp;

/// A manual action on one task, recorded with who asked.
#[derive(Clone, Debug)]
pub struct ManualParams {
    /// The task.
    pub id: TaskId,
    /// Who asked (a token name, `cli`, a rule).
    pub actor: String,
    /// Required for resolve; optional otherwise.
    pub reason: Option<String>,
    /// For retry: the attempt budget from now on (the kind's limit); `None` keeps the task's.
    pub max_attempts: Option<u32>,
    /// The caller's clock.
    pub now: Timestamp,
}

/// The actions a person or a rule takes on one task; each writes an event with its actor.
pub trait ManualActions: Send + Sync {
    /// A `failed` or `compensated` task back to `pending`, due now, attempt budget renewed.
    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// A `failed` task to `compensated` with a reason.
    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// A `pending` task to `compensated` with reason `canceled`.
    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// A `succeeded` task back to `pending`, due now, attempt budget renewed (statement
    /// reconciliation found no provider record of it).
    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;
}
