//! Retention: deleting old finished tasks with their timelines.

use super::{BoxFuture, StoreError};
use crate::task::Status;
use jiff::Timestamp;

/// A finished status that retention may delete. `failed` is deliberately not one: dead
/// letters stay until a person or a rule retries or resolves them, whatever the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prunable {
    /// `succeeded` tasks.
    Succeeded,
    /// `compensated` tasks.
    Compensated,
}

impl Prunable {
    /// Every status retention may delete.
    pub const ALL: [Prunable; 2] = [Prunable::Succeeded, Prunable::Compensated];

    /// The task status it names.
    pub fn status(self) -> Status {
        match self {
            Prunable::Succeeded => Status::Succeeded,
            Prunable::Compensated => Status::Compensated,
        }
    }
}

/// Deletes up to `limit` tasks of one finished status whose `updated_at` is before `before`,
/// with their timelines (retention).
#[derive(Clone, Debug)]
pub struct PruneParams {
    /// Which finished tasks.
    pub status: Prunable,
    /// Only tasks whose `updated_at` (when they finished) is before this.
    pub before: Timestamp,
    /// Most tasks deleted by one call.
    pub limit: usize,
}

/// Deletes finished history by policy; never dead letters.
pub trait Retention: Send + Sync {
    /// Deletes old finished tasks and their events (retention); returns how many tasks went.
    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>>;
}
