//! Leases: claiming due tasks, holding and starting them, completing their attempts,
//! heartbeats and giving leases back; what a worker does with the ledger.

use super::{BoxFuture, StoreError};
use crate::outcome::AttemptOutcome;
use crate::task::{Status, TaskId};
use jiff::Timestamp;

/// Leases up to `limit` due tasks of one kind, oldest `run_at` first. The first `start` of
/// them start their attempt now (`running`, `attempts` + 1); the rest are only **held**: they
/// stay `pending`, leased to `owner` (the epoch moves on, so the lease is fenced) with `run_at`
/// moved to the lease's end, so that nobody else claims them while the lease holds and they
/// become due again by themselves if it lapses. A held task starts through
/// [`Leases::complete`] (`starts`); an attempt exists only once it starts.
#[derive(Clone, Debug)]
pub struct ClaimParams {
    /// The kind whose tasks are claimed.
    pub kind: String,
    /// Most tasks claimed.
    pub limit: usize,
    /// How many of the claimed tasks start their attempt at once (the rest are held).
    pub start: usize,
    /// Who claims: the lease owner name.
    pub owner: String,
    /// The caller's clock: tasks due at or before it are claimed.
    pub now: Timestamp,
    /// The end of the leases taken.
    pub lease_until: Timestamp,
    /// The kind's attempt budget. A task stored without one (`max_attempts` 0, which is what
    /// an outbox insert leaves) takes it at this claim, on its row and in the result.
    pub max_attempts: u32,
    /// The kind's choice for a failed task of a group ([`crate::group`]), written on every
    /// grouped task it claims: whether that task, once failed, holds its group.
    pub on_group_failure: crate::group::OnFailure,
    /// The kind's concurrency limit per key ([`crate::limit`]): with one, the claim takes only
    /// tasks whose keys have a free slot, at most `start` of them, and starts every one (none
    /// is held); each started task's key is written on its row.
    pub per_key: Option<crate::limit::PerKey>,
}

impl ClaimParams {
    /// A claim of `kind`'s tasks under its own lease, attempt budget, group choice and limits:
    /// up to `limit`, the first `start` of them started.
    pub fn for_kind(
        kind: &crate::kind::KindConfig,
        owner: &str,
        limit: usize,
        start: usize,
        now: Timestamp,
    ) -> Self {
        ClaimParams {
            kind: kind.name.clone(),
            limit,
            start,
            owner: owner.to_owned(),
            now,
            lease_until: crate::clock::add(now, kind.lease),
            max_attempts: kind.max_attempts,
            on_group_failure: kind.on_group_failure(),
            per_key: kind.per_key(),
        }
    }
}

/// A leased task: what a handler needs, and the fence for its completion.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedTask {
    /// The task's id.
    pub id: TaskId,
    /// Its kind.
    pub kind: String,
    /// Its business key.
    pub key: String,
    /// The payload bytes, as enqueued.
    pub payload: Vec<u8>,
    /// The attempt number this task runs (1-based): started by the claim when `started`,
    /// otherwise the number starting it (`CompleteParams::starts`) will give it.
    pub attempt: u32,
    /// Its attempt budget.
    pub max_attempts: u32,
    /// The lease's fence.
    pub epoch: i64,
    /// Its `run_at` when it was claimed.
    pub run_at: Timestamp,
    /// Its business validity.
    pub expires_at: Option<Timestamp>,
    /// The W3C trace context of its enqueuer.
    pub traceparent: Option<String>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// The last cursor an attempt saved ([`super::Checkpoints::checkpoint`]), as JSON text:
    /// where this attempt resumes.
    pub checkpoint: Option<String>,
    /// Whether the claim started the attempt (`running`); `false`: held, still `pending`.
    pub started: bool,
    /// Its ordering group, if it has one.
    pub group: Option<String>,
}

/// The lease fence of one claimed task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseRef {
    /// The task.
    pub id: TaskId,
    /// The epoch its claim gave it.
    pub epoch: i64,
}

/// How one attempt ended and what the task becomes.
#[derive(Clone, Debug)]
pub struct Completion {
    /// The lease the attempt ran under.
    pub lease: LeaseRef,
    /// The attempt's number.
    pub attempt: u32,
    /// Pending (retry), Succeeded, Failed or Compensated.
    pub status: Status,
    /// The next run time, for retries.
    pub run_at: Option<Timestamp>,
    /// Why the attempt failed, if it did.
    pub last_error: Option<String>,
    /// Why the task was compensated or failed.
    pub reason: Option<String>,
    /// The attempt's outcome as recorded.
    pub outcome: AttemptOutcome,
    /// The target's HTTP status, for push targets.
    pub http_status: Option<u16>,
    /// A successful attempt's note from its target, kept as the attempt's `error` on the
    /// timeline (the task's `last_error` stays empty). Ignored when `last_error` is set.
    pub note: Option<String>,
    /// When the attempt started.
    pub started_at: Timestamp,
    /// When it ended.
    pub ended_at: Timestamp,
    /// Who ran it.
    pub worker: String,
}

/// Writes a batch of completions, each fenced by its epoch, and starts the attempts of held
/// tasks (`starts`), all in one transaction: a worker's slots are refilled in the same commit
/// that records the outcomes which freed them, so running a task costs no commit of its own.
#[derive(Clone, Debug)]
pub struct CompleteParams {
    /// The attempts that ended.
    pub completions: Vec<Completion>,
    /// Held tasks whose attempts start in this transaction; `None` when there are none.
    pub starts: Option<StartParams>,
    /// Claims of kinds limited per key ([`ClaimParams::per_key`]) made in this transaction
    /// after the completions: a limited kind holds nothing ahead, so the slots its ended
    /// attempts free are refilled by a claim that counts them freed, in the same commit.
    pub claims: Vec<ClaimParams>,
    /// The caller's clock.
    pub now: Timestamp,
}

/// What happened to each completion and each start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompleteResult {
    /// Completions rejected because the lease was lost (epoch moved on or the task is no
    /// longer running). Each was recorded on its task's timeline.
    pub stale: Vec<LeaseRef>,
    /// Starts refused because the task was no longer held (its hold lapsed and someone else
    /// claimed it, or it was canceled or expired): don't run those.
    pub not_started: Vec<LeaseRef>,
    /// What each of `claims` claimed (and started), in order.
    pub claimed: Vec<Vec<ClaimedTask>>,
}

/// One held task to start: its lease, the `run_at` it had when it was claimed (a hold moved
/// `run_at` to the lease's end; starting puts it back), and the end of the lease it runs
/// under (per task, since one transaction may start tasks of several kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartTask {
    /// The hold's lease.
    pub lease: LeaseRef,
    /// The task's `run_at` when it was claimed.
    pub run_at: Timestamp,
    /// The end of the lease the attempt runs under.
    pub lease_until: Timestamp,
}

/// Starts the attempts of held tasks: each still held by `owner` under its epoch becomes
/// `running` with `attempts` + 1, its attempt started at `now`, its lease renewed to its
/// `lease_until`. Durable before the attempt runs, so an attempt is counted once it starts
/// and never before.
#[derive(Clone, Debug)]
pub struct StartParams {
    /// Who holds the tasks.
    pub owner: String,
    /// The tasks to start.
    pub tasks: Vec<StartTask>,
    /// When their attempts start.
    pub now: Timestamp,
}

/// Extends the leases a worker holds.
#[derive(Clone, Debug)]
pub struct HeartbeatParams {
    /// Who holds them.
    pub owner: String,
    /// The leases.
    pub leases: Vec<LeaseRef>,
    /// Their new end.
    pub lease_until: Timestamp,
    /// The caller's clock.
    pub now: Timestamp,
}

/// Gives back leases unfinished (graceful shutdown): the tasks run again promptly. A held
/// task goes back as it was, with no attempt; a running one has its attempt recorded as
/// `interrupted` and goes back to pending, or to failed when its attempts are spent.
#[derive(Clone, Debug)]
pub struct ReleaseParams {
    /// The leases given back.
    pub leases: Vec<LeaseRef>,
    /// Who held them.
    pub worker: String,
    /// The caller's clock.
    pub now: Timestamp,
}

/// A worker's leases: claim (hold or start), complete (and start held tasks), heartbeat,
/// release. The dispatcher and the pull API use these together.
pub trait Leases: Send + Sync {
    /// Leases due pending tasks of one kind, oldest `run_at` first, incrementing `epoch`;
    /// the first `start` of them start their attempt (`attempts` + 1), the rest are held.
    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>>;

    /// Records attempt outcomes, each only where its epoch still matches, and starts the
    /// attempts of the held tasks in `p.starts`, in one transaction.
    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>>;

    /// Extends leases, held or running (a held task's `run_at` follows its lease); returns
    /// those that were lost.
    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>>;

    /// Gives leases back; returns how many were still held.
    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Whether a limited kind's slots are best refilled by claims inside the writes of its
    /// outcomes (`CompleteParams::claims`) rather than by claims of their own. Every store
    /// takes such claims; this says which way is faster on it. Where one writer serialises
    /// every write (SQLite) a claim of its own costs a commit, and riding saves it; where
    /// claims and completions run side by side on their own connections (a server), riding
    /// makes the one completer wait for each claim's round trips (measured on PostgreSQL:
    /// 0.57 of the unlimited drain riding, 0.68 not).
    fn claims_ride_completions(&self) -> bool {
        false
    }
}
