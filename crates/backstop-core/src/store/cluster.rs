//! How processes that share one database see and elect one another: leadership leases and
//! beats.

use super::{BoxFuture, StoreError};
use jiff::Timestamp;

/// Takes or keeps the named leadership lease for `owner` until `until`: granted when nobody
/// holds it, when the holder's lease ended at or before `now`, or when `owner` already holds
/// it (a renewal, even a late one). Leadership elects the one process of many on a database
/// that runs the singleton duties (lease rescue, expiry, retention).
#[derive(Clone, Debug)]
pub struct LeadershipParams {
    /// Which leadership (one per set of duties).
    pub name: String,
    /// Who asks: the process's lease owner name.
    pub owner: String,
    /// The caller's clock: a lease that ended at or before it is free to take.
    pub now: Timestamp,
    /// The end of the lease when granted.
    pub until: Timestamp,
}

/// Who holds a leadership lease, as an acquire left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// The holder's lease owner name.
    pub owner: String,
    /// The end of the holder's lease.
    pub until: Timestamp,
    /// When the holder took it (kept by renewals).
    pub since: Timestamp,
}

impl Leadership {
    /// Whether `owner` holds it.
    pub fn held_by(&self, owner: &str) -> bool {
        self.owner == owner
    }
}

/// Gives up the named leadership lease if `owner` holds it, so that another process takes it
/// at once instead of after the lease runs out.
#[derive(Clone, Debug)]
pub struct ResignParams {
    /// Which leadership.
    pub name: String,
    /// Who gives it up; nothing happens unless it holds it.
    pub owner: String,
}

/// Records that `owner` is alive under `name` at `at`, with a free-form `detail` (JSON by
/// convention): processes beat `node:<owner>` with the kinds they serve, the reconciler beats
/// `reconciler` after each pass. Beats are how one process sees the others.
#[derive(Clone, Debug)]
pub struct BeatParams {
    /// What beats (`node:<owner>`, `reconciler`).
    pub name: String,
    /// Who beat it.
    pub owner: String,
    /// When.
    pub at: Timestamp,
    /// What the beat says.
    pub detail: String,
}

/// One recorded beat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beat {
    /// What beats.
    pub name: String,
    /// Who beat it last.
    pub owner: String,
    /// When.
    pub at: Timestamp,
    /// What the beat says.
    pub detail: String,
}

/// Deletes beats of names starting with `prefix` last seen before `before` (processes gone
/// for good), so the table stays as small as the set of live processes.
#[derive(Clone, Debug)]
pub struct ForgetBeatsParams {
    /// Which beats (`node:`).
    pub prefix: String,
    /// Only beats last seen before this.
    pub before: Timestamp,
}

/// Leadership leases and beats: how one process of many on a database takes the singleton
/// duties, and how each sees the others.
pub trait Cluster: Send + Sync {
    /// Takes or renews a leadership lease in one atomic step; returns who holds it afterwards
    /// (the caller when granted).
    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>>;

    /// Gives a leadership lease up; returns whether `owner` held it.
    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Records a beat (upsert by name).
    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Beats whose name starts with `prefix`.
    fn beats<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<Beat>, StoreError>>;

    /// Deletes stale beats; returns how many.
    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>>;
}
