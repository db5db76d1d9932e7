//! Checkpoints: a long attempt saves a cursor while it runs, so that the next attempt resumes
//! where it stopped; and a stopping worker gives such a task back without spending an attempt.
//!
//! Both writes are fenced like a completion: they count only while the lease's epoch is the
//! task's and the task is running. A write from a zombie (an attempt whose lease expired and
//! whose task was claimed again) changes nothing and leaves a `checkpoint_rejected` (or
//! `stale_completion`, for a suspension) event on the task's timeline.

use super::lease::LeaseRef;
use super::{BoxFuture, StoreError};
use jiff::Timestamp;

/// Saves a running task's cursor.
#[derive(Clone, Debug)]
pub struct CheckpointParams {
    /// The lease the attempt runs under.
    pub lease: LeaseRef,
    /// The attempt's number, recorded on a rejection.
    pub attempt: u32,
    /// Who runs it (recorded on a rejection).
    pub worker: String,
    /// The cursor, as JSON text (any JSON value); the next attempt receives it as given.
    pub cursor: String,
    /// The caller's clock.
    pub now: Timestamp,
}

/// What became of a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpointed {
    /// Durable: the next attempt receives this cursor.
    Saved,
    /// The lease was lost (its epoch moved on, or the task is no longer running): nothing was
    /// written but a `checkpoint_rejected` event on the task's timeline.
    Rejected,
}

/// Gives a running task back unfinished without spending its attempt (a resumable task
/// stopping at shutdown): it goes back to pending, due at `now`, with `attempts` one less, its
/// cursor kept (replaced by `cursor` when given), and a `suspended` event in place of an
/// attempt on its timeline.
#[derive(Clone, Debug)]
pub struct SuspendParams {
    /// The lease the attempt runs under.
    pub lease: LeaseRef,
    /// The attempt's number.
    pub attempt: u32,
    /// Who ran it.
    pub worker: String,
    /// A last cursor to save with the suspension, as JSON text.
    pub cursor: Option<String>,
    /// When the attempt started (for the event's duration).
    pub started_at: Timestamp,
    /// The caller's clock.
    pub now: Timestamp,
}

/// Checkpoints and suspensions of running tasks.
pub trait Checkpoints: Send + Sync {
    /// Saves the cursor of the attempt `p.lease` fences; durable when it returns.
    fn checkpoint(&self, p: CheckpointParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>>;

    /// Suspends the attempt `p.lease` fences. `Rejected` when the lease was lost (recorded as
    /// a `stale_completion` event).
    fn suspend(&self, p: SuspendParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>>;
}
