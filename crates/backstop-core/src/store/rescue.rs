//! Rescue and expiry: the reconciler's repairs of leases that lapsed and tasks whose
//! business validity ran out.

use super::{BoxFuture, StoreError};
use crate::task::{Status, TaskId};
use jiff::Timestamp;

/// Puts back to pending (or failed, when attempts are spent) running tasks whose lease
/// expired before `now`, at most `limit` of them. Held tasks need no rescue: their `run_at`
/// is their lease's end, so they are due again when it lapses.
#[derive(Clone, Debug)]
pub struct RescueParams {
    /// The caller's clock: leases that ended before it have expired.
    pub now: Timestamp,
    /// Most tasks rescued by one call.
    pub limit: usize,
}

/// One rescued task.
#[derive(Clone, Debug, PartialEq)]
pub struct Rescued {
    /// The task.
    pub id: TaskId,
    /// Its kind.
    pub kind: String,
    /// What it became (`pending` or `failed`).
    pub status: Status,
    /// Who held the lease that expired.
    pub lease_owner: Option<String>,
    /// Its ordering group: a rescue that makes a dead letter may hold it.
    pub group: Option<String>,
}

/// Compensates pending tasks whose `expires_at` is before `now`, at most `limit` of them.
#[derive(Clone, Debug)]
pub struct ExpireParams {
    /// The caller's clock.
    pub now: Timestamp,
    /// Most tasks compensated by one call.
    pub limit: usize,
}

/// The reconciler's repairs: rescue of expired leases, compensation of expired tasks.
pub trait Rescue: Send + Sync {
    /// Rescues tasks whose lease expired.
    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>>;

    /// Compensates pending tasks past `expires_at` with reason `expired`; returns how many.
    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>>;
}
