//! What a store can fail with.

use crate::task::{Status, TaskId};

/// What a store can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The same `(kind, key)` exists with a different payload.
    #[error("task {kind}/{key} already exists with a different payload (id {existing})")]
    Conflict {
        /// The task's kind.
        kind: String,
        /// The task's business key.
        key: String,
        /// The id of the task that holds `(kind, key)`.
        existing: TaskId,
    },
    /// No task has this id.
    #[error("no task with id {0}")]
    NotFound(TaskId),
    /// The task is not in a status the action applies to.
    #[error("task {id} is {status}; {action} needs it to be {expected}")]
    WrongStatus {
        /// The task.
        id: TaskId,
        /// Its status now.
        status: Status,
        /// What was asked (`retry`, `cancel`, …).
        action: &'static str,
        /// The status or statuses the action needs.
        expected: &'static str,
    },
    /// The database could not be opened or migrated.
    #[error("cannot open the database: {0}")]
    Open(String),
    /// The database is from a newer backstop.
    #[error("the database schema is version {found}, newer than this backstop knows ({known})")]
    SchemaTooNew {
        /// The version the database records.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// The ledger cannot take the request now: the database is unreachable, full, read-only
    /// or locked by another process. The same request may succeed later; nothing was written.
    #[error("the ledger is unavailable: {0}")]
    Unavailable(String),
    /// Any other database failure.
    #[error("database error: {0}")]
    Database(String),
}

impl StoreError {
    /// The error again, for each caller that shares one failed write (a group commit): the
    /// same variant when callers act on it (`Unavailable`), its message otherwise.
    pub fn replicate(&self) -> StoreError {
        match self {
            StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
            e => StoreError::Database(e.to_string()),
        }
    }
}
