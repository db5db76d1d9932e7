//! The `Store` trait: the ledger's only door. Every method takes a parameter struct so that a
//! new field does not break every backend, and none reads a clock: callers pass `now`.

use crate::callback::{
    CallbackRecord, ListCallbacksParams, RecordCallbackParams, RecordedCallback,
};
use crate::entity::{Answer, Entity, EntityDecision};
use crate::event::Event;
use crate::outcome::AttemptOutcome;
use crate::task::{NewTask, Status, Task, TaskId};
use jiff::Timestamp;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, so that `dyn Store` works.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a store can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The same `(kind, key)` exists with a different payload.
    #[error("task {kind}/{key} already exists with a different payload (id {existing})")]
    Conflict {
        kind: String,
        key: String,
        existing: TaskId,
    },
    #[error("no task with id {0}")]
    NotFound(TaskId),
    /// The task is not in a status the action applies to.
    #[error("task {id} is {status}; {action} needs it to be {expected}")]
    WrongStatus {
        id: TaskId,
        status: Status,
        action: &'static str,
        expected: &'static str,
    },
    /// The database could not be opened or migrated.
    #[error("cannot open the database: {0}")]
    Open(String),
    /// The database is from a newer backstop.
    #[error("the database schema is version {found}, newer than this backstop knows ({known})")]
    SchemaTooNew { found: i64, known: i64 },
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

/// Puts tasks in the ledger, all in one transaction.
#[derive(Clone, Debug)]
pub struct EnqueueParams {
    pub tasks: Vec<NewTask>,
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

/// Leases up to `limit` due tasks of one kind, oldest `run_at` first. The first `start` of
/// them start their attempt now (`running`, `attempts` + 1); the rest are only **held**: they
/// stay `pending`, leased to `owner` (the epoch moves on, so the lease is fenced) with `run_at`
/// moved to the lease's end, so that nobody else claims them while the lease holds and they
/// become due again by themselves if it lapses. A held task starts through [`Store::complete`] (`starts`); an
/// attempt exists only once it starts.
#[derive(Clone, Debug)]
pub struct ClaimParams {
    pub kind: String,
    pub limit: usize,
    /// How many of the claimed tasks start their attempt at once (the rest are held).
    pub start: usize,
    pub owner: String,
    pub now: Timestamp,
    pub lease_until: Timestamp,
    /// The kind's attempt budget. A task stored without one (`max_attempts` 0, which is what
    /// an outbox insert leaves) takes it at this claim, on its row and in the result.
    pub max_attempts: u32,
}

/// A leased task: what a handler needs, and the fence for its completion.
#[derive(Clone, Debug)]
pub struct ClaimedTask {
    pub id: TaskId,
    pub kind: String,
    pub key: String,
    pub payload: Vec<u8>,
    /// The attempt number this task runs (1-based): started by the claim when `started`,
    /// otherwise the number starting it (`CompleteParams::starts`) will give it.
    pub attempt: u32,
    pub max_attempts: u32,
    pub epoch: i64,
    pub run_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub traceparent: Option<String>,
    pub created_at: Timestamp,
    /// Whether the claim started the attempt (`running`); `false`: held, still `pending`.
    pub started: bool,
}

/// The lease fence of one claimed task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseRef {
    pub id: TaskId,
    pub epoch: i64,
}

/// How one attempt ended and what the task becomes.
#[derive(Clone, Debug)]
pub struct Completion {
    pub lease: LeaseRef,
    pub attempt: u32,
    /// Pending (retry), Succeeded, Failed or Compensated.
    pub status: Status,
    /// The next run time, for retries.
    pub run_at: Option<Timestamp>,
    pub last_error: Option<String>,
    pub reason: Option<String>,
    pub outcome: AttemptOutcome,
    pub http_status: Option<u16>,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub worker: String,
}

/// Writes a batch of completions, each fenced by its epoch, and starts the attempts of held
/// tasks (`starts`), all in one transaction: a worker's slots are refilled in the same commit
/// that records the outcomes which freed them, so running a task costs no commit of its own.
#[derive(Clone, Debug)]
pub struct CompleteParams {
    pub completions: Vec<Completion>,
    /// Held tasks whose attempts start in this transaction; `None` when there are none.
    pub starts: Option<StartParams>,
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
}

/// One held task to start: its lease, the `run_at` it had when it was claimed (a hold moved
/// `run_at` to the lease's end; starting puts it back), and the end of the lease it runs
/// under (per task, since one transaction may start tasks of several kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartTask {
    pub lease: LeaseRef,
    pub run_at: Timestamp,
    pub lease_until: Timestamp,
}

/// Starts the attempts of held tasks: each still held by `owner` under its epoch becomes
/// `running` with `attempts` + 1, its attempt started at `now`, its lease renewed to its
/// `lease_until`. Durable before the attempt runs, so an attempt is counted once it starts
/// and never before.
#[derive(Clone, Debug)]
pub struct StartParams {
    pub owner: String,
    pub tasks: Vec<StartTask>,
    pub now: Timestamp,
}

/// Extends the leases a worker holds.
#[derive(Clone, Debug)]
pub struct HeartbeatParams {
    pub owner: String,
    pub leases: Vec<LeaseRef>,
    pub lease_until: Timestamp,
    pub now: Timestamp,
}

/// Puts back to pending (or failed, when attempts are spent) running tasks whose lease
/// expired before `now`, at most `limit` of them. Held tasks need no rescue: their `run_at`
/// is their lease's end, so they are due again when it lapses.
#[derive(Clone, Debug)]
pub struct RescueParams {
    pub now: Timestamp,
    pub limit: usize,
}

/// One rescued task.
#[derive(Clone, Debug, PartialEq)]
pub struct Rescued {
    pub id: TaskId,
    pub kind: String,
    pub status: Status,
    pub lease_owner: Option<String>,
}

/// Compensates pending tasks whose `expires_at` is before `now`, at most `limit` of them.
#[derive(Clone, Debug)]
pub struct ExpireParams {
    pub now: Timestamp,
    pub limit: usize,
}

/// Gives back leases unfinished (graceful shutdown): the tasks run again promptly. A held
/// task goes back as it was, with no attempt; a running one has its attempt recorded as
/// `interrupted` and goes back to pending, or to failed when its attempts are spent.
#[derive(Clone, Debug)]
pub struct ReleaseParams {
    pub leases: Vec<LeaseRef>,
    pub worker: String,
    pub now: Timestamp,
}

/// Lists tasks, newest first.
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    pub kind: Option<String>,
    pub key: Option<String>,
    pub status: Option<Status>,
    pub limit: usize,
    /// Only tasks older than this one (cursor pagination).
    pub before: Option<TaskId>,
}

/// Walks the tasks of one kind and status in id order, a page at a time (statement
/// reconciliation's scan of succeeded tasks).
#[derive(Clone, Debug)]
pub struct ScanParams {
    pub kind: String,
    pub status: Status,
    /// Only tasks with an id after this one.
    pub after: Option<TaskId>,
    pub limit: usize,
}

/// Looks tasks of one kind up by business key, many at once.
#[derive(Clone, Debug)]
pub struct KeysParams {
    pub kind: String,
    pub keys: Vec<String>,
}

/// A manual action on one task, recorded with who asked.
#[derive(Clone, Debug)]
pub struct ManualParams {
    pub id: TaskId,
    /// Who asked (a token name, `cli`, a rule).
    pub actor: String,
    /// Required for resolve; optional otherwise.
    pub reason: Option<String>,
    /// For retry: the attempt budget from now on (the kind's limit); `None` keeps the task's.
    pub max_attempts: Option<u32>,
    pub now: Timestamp,
}

/// Counts of tasks per status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub pending: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub compensated: u64,
}

impl StatusCounts {
    /// The count for one status.
    pub fn get(&self, s: Status) -> u64 {
        match s {
            Status::Pending => self.pending,
            Status::Running => self.running,
            Status::Succeeded => self.succeeded,
            Status::Failed => self.failed,
            Status::Compensated => self.compensated,
        }
    }

    /// Every task counted.
    pub fn total(&self) -> u64 {
        Status::ALL.iter().map(|s| self.get(*s)).sum()
    }
}

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
    pub name: String,
    pub owner: String,
    pub at: Timestamp,
    pub detail: String,
}

/// Deletes beats of names starting with `prefix` last seen before `before` (processes gone
/// for good), so the table stays as small as the set of live processes.
#[derive(Clone, Debug)]
pub struct ForgetBeatsParams {
    pub prefix: String,
    pub before: Timestamp,
}

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

/// Tasks with their whole timelines, as [`Store::audit_page`] returns them.
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
    /// tasks), sorted by kind: how every store assembles [`Store::backlog`] from its two reads.
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
    pub limit: usize,
}

/// One statement reconciliation run, as the ledger keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatementRun {
    /// Derived from the kind, the statement's bytes and the window, so that running the same
    /// reconciliation again is the same run (and applies nothing twice).
    pub id: String,
    pub kind: String,
    /// The statement's file name, as given.
    pub statement: String,
    pub started_at: Timestamp,
    /// `None` while it runs (or when it was killed before the end).
    pub finished_at: Option<Timestamp>,
    /// `RECONCILED`, `RECONCILED_WITH_PENDING`, `BREAKS`, `INCOMPLETE`; `None` until finished.
    pub verdict: Option<String>,
    /// Tasks re-driven by `--apply` so far.
    pub applied: u64,
    /// The JSON report (its lists capped), once finished.
    pub report: Option<String>,
}

/// Lists statement runs, newest first.
#[derive(Clone, Debug, Default)]
pub struct StatementRunsParams {
    pub kind: Option<String>,
    pub limit: usize,
}

/// Decides one transition request about an entity, in one transaction that holds the
/// entity's lock (so requests about one entity are decided one at a time), and records the
/// decision in its history whatever it is. An entity not seen before is created in
/// `initial` first. The answer follows [`crate::entity::Guard`].
#[derive(Clone, Debug)]
pub struct TransitionParams {
    /// The machine's name.
    pub machine: String,
    /// The entity's business id.
    pub entity_id: String,
    /// The requested state.
    pub to: String,
    /// The id of the event that asks; each is applied at most once per entity.
    pub event_id: String,
    /// The sender's version of the entity, if it has one.
    pub version: Option<i64>,
    /// The states `to` may follow (the caller reads them from the machine).
    pub allowed_from: Vec<String>,
    /// The machine's initial state, for a new entity.
    pub initial: String,
    pub now: Timestamp,
}

/// How a transition request was decided, and the entity afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionOutcome {
    pub answer: Answer,
    /// The entity after the decision (changed only when applied).
    pub entity: Entity,
    /// The decision as its history records it.
    pub decision: EntityDecision,
}

/// Reads one entity of a machine.
#[derive(Clone, Debug)]
pub struct EntityParams {
    pub machine: String,
    pub id: String,
}

/// An entity with its whole history, oldest decision first; the history holds exactly the
/// entity's `decisions`, even while requests are being decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityHistory {
    pub entity: Entity,
    pub decisions: Vec<EntityDecision>,
}

/// What a store's work watch reports (see [`Store::watch_work`]). Only hints: an engine
/// still polls, so a missed or late signal delays work by at most its poll interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkSignal {
    /// The watch is (again) connected. Signals sent while it was not were lost: look for work
    /// of every kind.
    Connected,
    /// The watch lost its connection (`error` says why); it reconnects by itself.
    Disconnected { error: String },
    /// Tasks of these kinds were created, by this process or any other (every kind when
    /// empty).
    Work { kinds: Vec<String> },
}

/// Receives [`WorkSignal`]s; called on the watch's own task, so it must not block.
pub type WorkSink = Arc<dyn Fn(WorkSignal) + Send + Sync>;

/// The durable ledger. Every backend implements this and passes `backstop-store-tests`.
pub trait Store: Send + Sync + 'static {
    /// Applies pending schema migrations; idempotent.
    fn migrate(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Checks that a write could be committed now, and writes nothing: one transaction that
    /// takes the write path (the write lock, a row in the ledger's tables that needs new
    /// space) and is rolled back. For readiness and for `serve` at start: `Unavailable` when
    /// the ledger cannot take writes (unreachable, full, read-only, locked), another error
    /// when it answers but is not in order (not migrated).
    fn check_writable(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Creates tasks, idempotently by `(kind, key)`. Returns one result per task, in order.
    /// Durable when it returns.
    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>>;

    /// Leases due pending tasks of one kind, oldest `run_at` first, incrementing `epoch`;
    /// the first `start` of them start their attempt (`attempts` + 1), the rest are held.
    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>>;

    /// Records attempt outcomes, each only where its epoch still matches, and starts the
    /// attempts of the held tasks in `p.starts`, in one transaction.
    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>>;

    /// Extends leases, held or running (a held task's `run_at` follows its lease); returns
    /// those that were lost.
    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>>;

    /// Rescues tasks whose lease expired.
    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>>;

    /// Compensates pending tasks past `expires_at` with reason `expired`; returns how many.
    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Gives leases back; returns how many were still held.
    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// One task.
    fn get(&self, id: TaskId) -> BoxFuture<'_, Result<Option<Task>, StoreError>>;

    /// One task by its business identity.
    fn get_by_key<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Task>, StoreError>>;

    /// The whole timeline of a task, oldest first.
    fn timeline(&self, id: TaskId) -> BoxFuture<'_, Result<Vec<Event>, StoreError>>;

    /// Tasks, newest first.
    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>>;

    /// A `failed` or `compensated` task back to `pending`, due now, attempt budget renewed.
    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// A `failed` task to `compensated` with a reason.
    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// A `pending` task to `compensated` with reason `canceled`.
    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// A `succeeded` task back to `pending`, due now, attempt budget renewed (statement
    /// reconciliation found no provider record of it).
    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>>;

    /// Records a statement run (upsert by id).
    fn record_statement_run(&self, run: StatementRun) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Statement runs, newest first.
    fn statement_runs(
        &self,
        p: StatementRunsParams,
    ) -> BoxFuture<'_, Result<Vec<StatementRun>, StoreError>>;

    /// One statement run.
    fn statement_run<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StatementRun>, StoreError>>;

    /// A page of one kind's tasks in one status, in id order.
    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>>;

    /// The tasks of one kind with any of these keys (missing keys are left out), in no
    /// particular order.
    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>>;

    /// Tasks per status, for one kind or all.
    fn counts<'a>(
        &'a self,
        kind: Option<&'a str>,
    ) -> BoxFuture<'a, Result<StatusCounts, StoreError>>;

    /// Takes or renews a leadership lease in one atomic step; returns who holds it afterwards
    /// (the caller when granted).
    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>>;

    /// Gives a leadership lease up; returns whether `owner` held it.
    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Deletes old finished tasks and their events (retention); returns how many tasks went.
    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Records a beat (upsert by name).
    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Beats whose name starts with `prefix`.
    fn beats<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<Beat>, StoreError>>;

    /// Deletes stale beats; returns how many.
    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Unfinished work per kind (kinds with pending or running tasks only).
    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>>;

    /// Tasks in id order after a cursor, each with its whole timeline (as
    /// [`Store::timeline`] gives it).
    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>>;

    /// Decides a transition request about an entity and records the decision.
    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>>;

    /// An entity with its history; `None` when no request about it was ever decided.
    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>>;
    /// Records an inbound callback request. For a verified one, the record and its task are
    /// written in one transaction, durable when this returns: the task is created unless its
    /// `(kind, key)` exists already, which makes the request a duplicate (acknowledged, nothing
    /// new). A rejected one is only recorded.
    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>>;

    /// One source's recorded requests, newest first.
    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>>;

    /// Watches for tasks created by anyone (other processes, the CLI, outbox inserts) and
    /// reports them to `sink`: the future runs the watch, reconnecting by itself, until it is
    /// dropped. `None` (the default) when the store has no such channel: engines then find
    /// work by polling alone.
    fn watch_work(&self, sink: WorkSink) -> Option<BoxFuture<'static, ()>> {
        let _ = sink;
        None
    }
}
