//! The `Store` trait: the ledger's only door, as the union of one narrow trait per concern.
//! Every method takes a parameter struct so that a new field does not break every backend,
//! and none reads a clock: callers pass `now`.
//!
//! Each concern's file holds its parameter and result types and its trait:
//!
//! | file | trait | methods |
//! |---|---|---|
//! | `migrate` | [`Migrations`] | migrate, check_writable |
//! | `enqueue` | [`Enqueue`] | enqueue |
//! | `read` | [`Tasks`] | get, get_by_key, timeline, list, scan, tasks_by_keys, counts, group_head |
//! | `lease` | [`Leases`] | claim, complete (and starts), heartbeat, release |
//! | `checkpoint` | [`Checkpoints`] | checkpoint, suspend |
//! | `rescue` | [`Rescue`] | rescue, expire |
//! | `manual` | [`ManualActions`] | retry, resolve, cancel, redrive |
//! | `cluster` | [`Cluster`] | acquire/resign leadership, beat, beats, forget_beats |
//! | `backlog` | [`Backlog`] | backlog, audit_page |
//! | `retention` | [`Retention`] | prune |
//! | `statement_runs` | [`Statements`] | record_statement_run, statement_runs, statement_run |
//! | `entities` | [`Entities`] | transition_entity, entity |
//! | `callbacks` | [`Callbacks`] | record_callback, list_callbacks |
//! | `schedules` | [`Schedules`] | schedules, advance_schedule, advance_schedules, pause_schedule, define_schedule, database_now |
//! | `pauses` | [`Pauses`] | pauses, pause, resume, pause_history |
//! | `limits` | [`LimitOverrides`] | limit_overrides, set_limit_override, clear_limit_override, limit_override_history |
//! | `watch` | [`WorkWatch`] | watch_work |
//!
//! A service that needs one concern can take that trait (`Arc<dyn Store>` upcasts to
//! `Arc<dyn Leases>`); everything else takes `dyn Store`, whose methods are callable without
//! importing the narrow traits. Calling them on a concrete store type needs the trait in
//! scope (`use backstop_core::store::*`).

#![warn(missing_docs)]

mod backlog;
mod callbacks;
mod checkpoint;
mod cluster;
mod enqueue;
mod entities;
mod error;
mod lease;
mod limits;
mod manual;
mod migrate;
mod pauses;
mod read;
mod rescue;
mod retention;
mod schedules;
mod statement_runs;
mod watch;

pub use backlog::{AuditPage, AuditParams, Backlog, BacklogParams, KindBacklog};
pub use callbacks::Callbacks;
pub use checkpoint::{CheckpointParams, Checkpointed, Checkpoints, SuspendParams};
pub use cluster::{
    Beat, BeatParams, BeatsParams, Cluster, ForgetBeatsParams, Leadership, LeadershipParams,
    ResignParams,
};
pub use enqueue::{Enqueue, EnqueueParams, EnqueueResult};
pub use entities::{Entities, EntityHistory, EntityParams, TransitionOutcome, TransitionParams};
pub use error::{Cause, StoreError};
pub use lease::{
    ClaimParams, ClaimedTask, CompleteParams, CompleteResult, Completion, HeartbeatParams,
    LeaseRef, Leases, ReleaseParams, StartParams, StartTask,
};
pub use limits::{
    ClearLimitOverrideParams, LimitOverride, LimitOverrideHistoryParams, LimitOverrides,
    LimitOverridesParams, OverrideAction, OverrideChange, SetLimitOverrideParams,
};
pub use manual::{ManualActions, ManualParams};
pub use migrate::Migrations;
pub use pauses::{PauseHistoryParams, PauseParams, Pauses, PausesParams, ResumeParams};
pub use read::{
    CountsParams, GetByKeyParams, GetParams, GroupHeadParams, KeysParams, ListParams, ScanParams,
    StatusCounts, Tasks, TimelineParams,
};
pub use rescue::{ExpireParams, Rescue, RescueParams, Rescued};
pub use retention::{Prunable, PruneParams, Retention};
pub use schedules::{
    AdvanceScheduleParams, DefineScheduleParams, PauseScheduleParams, ScheduleRecord, Schedules,
    SchedulesParams,
};
pub use statement_runs::{
    RecordStatementRunParams, StatementRun, StatementRunParams, StatementRunsParams, Statements,
};
pub use watch::{WorkSignal, WorkSink, WorkWatch};

use std::future::Future;
use std::pin::Pin;

/// A boxed future, so that `dyn Store` works.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The durable ledger: every concern's trait at once. Every backend implements the narrow
/// traits (each next to its SQL), gets this one by the blanket impl, and passes
/// `backstop-store-tests`.
pub trait Store:
    Migrations
    + Enqueue
    + Tasks
    + Leases
    + Checkpoints
    + Rescue
    + ManualActions
    + Cluster
    + Backlog
    + Retention
    + Statements
    + Entities
    + Callbacks
    + Schedules
    + Pauses
    + LimitOverrides
    + WorkWatch
    + Send
    + Sync
    + 'static
{
}

impl<T> Store for T where
    T: Migrations
        + Enqueue
        + Tasks
        + Leases
        + Checkpoints
        + Rescue
        + ManualActions
        + Cluster
        + Backlog
        + Retention
        + Statements
        + Entities
        + Callbacks
        + Schedules
        + Pauses
        + LimitOverrides
        + WorkWatch
        + Send
        + Sync
        + 'static
{
}
