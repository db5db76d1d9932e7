//! What a store can fail with.
//!
//! The variants about the database (`Open`, `Unavailable`, `Database`) say what failed; their
//! [`Cause`], the error's `source()`, says why: the driver's error itself, kept whole (so a
//! caller can downcast it), or a message where there is no underlying error.
//!
//! Displayed, a `StoreError` says both, what failed and why: it is logged as `error = %e` in
//! many places and stored in reconciler reports, where a bare "database error" would hide
//! what happened. A printer of a whole error chain (the CLI's) skips a cause whose text the
//! line already holds, so the cause is printed once.

use crate::task::{Status, TaskId};
use std::error::Error;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

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
    Open(#[source] Cause),
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
    Unavailable(#[source] Cause),
    /// Any other database failure.
    #[error("database error: {0}")]
    Database(#[source] Cause),
}

impl StoreError {
    /// The error again, for each caller that shares one failed write (a group commit): the
    /// same variant with the same cause when it has one (`Open`, `Unavailable`,
    /// `Database`), a `Database` error with its message otherwise.
    pub fn replicate(&self) -> StoreError {
        match self {
            StoreError::Open(c) => StoreError::Open(c.clone()),
            StoreError::Unavailable(c) => StoreError::Unavailable(c.clone()),
            StoreError::Database(c) => StoreError::Database(c.clone()),
            e => StoreError::Database(Cause::msg(e.to_string())),
        }
    }

    /// What failed and why, as one line (the error's `Display`, which includes its cause):
    /// for texts users read, such as an HTTP problem's `detail`.
    pub fn detail(&self) -> String {
        self.to_string()
    }
}

/// Why a store operation failed: the underlying error (a driver's, an I/O error) or a
/// message. Shared (`Arc`), so that one failed group commit gives every caller the same cause.
///
/// It displays the underlying error's message (after `context`, if one was given) and ends the
/// source chain: drivers' messages already include their own causes, so walking further would
/// print them twice. [`Cause::error`] gives the underlying error itself.
#[derive(Clone)]
pub struct Cause {
    text: String,
    error: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl Cause {
    /// The cause is `error`.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        Cause {
            text: error.to_string(),
            error: Some(Arc::new(error)),
        }
    }

    /// The cause is `error`, in `context` (what was being done, which database): displayed
    /// as `context: error`.
    pub fn with_context(
        context: impl fmt::Display,
        error: impl Error + Send + Sync + 'static,
    ) -> Self {
        Cause {
            text: format!("{context}: {error}"),
            error: Some(Arc::new(error)),
        }
    }

    /// A cause that is only a message (no underlying error).
    pub fn msg(text: impl Into<String>) -> Self {
        Cause {
            text: text.into(),
            error: None,
        }
    }

    /// The underlying error, if there is one (to downcast, e.g. to the driver's error type).
    pub fn error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.error.as_deref()
    }
}

/// The cause's message.
impl Deref for Cause {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(e) => write!(f, "{:?} ({e:?})", self.text),
            None => write!(f, "{:?}", self.text),
        }
    }
}

impl Error for Cause {}

impl From<String> for Cause {
    fn from(text: String) -> Self {
        Cause::msg(text)
    }
}

impl From<&str> for Cause {
    fn from(text: &str) -> Self {
        Cause::msg(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_kept_whole_and_displayed() {
        let e = StoreError::Database(Cause::new(std::io::Error::other("disk on fire")));
        // What a log line (`error = %e`) and a reconciler report show.
        assert_eq!(e.to_string(), "database error: disk on fire");
        assert_eq!(e.detail(), e.to_string());
        let cause = e
            .source()
            .and_then(|s| s.downcast_ref::<Cause>())
            .expect("a cause");
        assert!(cause.error().is_some_and(|d| d.is::<std::io::Error>()));
    }

    #[test]
    fn a_replicated_error_keeps_its_variant_and_cause() {
        let e = StoreError::Unavailable(Cause::with_context("x.db", std::io::Error::other("full")));
        let r = e.replicate();
        assert!(matches!(r, StoreError::Unavailable(_)));
        assert_eq!(r.detail(), "the ledger is unavailable: x.db: full");
        let other = StoreError::NotFound(TaskId(uuid::Uuid::nil())).replicate();
        assert_eq!(
            other.detail(),
            "database error: no task with id 00000000-0000-0000-0000-000000000000"
        );
    }
}
