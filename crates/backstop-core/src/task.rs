//! The task: one async business operation, keyed by `(kind, key)`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A task's identity: a UUIDv7, stable for the task's whole life and sent as the idempotency
/// key on every attempt. Its text form sorts by creation time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub uuid::Uuid);

impl TaskId {
    /// A new time-ordered id.
    pub fn new() -> Self {
        TaskId(uuid::Uuid::now_v7())
    }
}

impl Default for TaskId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for TaskId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s).map(TaskId)
    }
}

/// Where a task is in its life. Only [`crate::transition`] decides a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Waiting for `run_at`.
    Pending,
    /// Leased by a worker.
    Running,
    /// Delivered; final.
    Succeeded,
    /// The dead letter: kept until a person or a rule retries or resolves it.
    Failed,
    /// Ended without running (skip, expiry, cancel, manual resolve), with a reason.
    Compensated,
}

impl Status {
    /// Every status, in life order.
    pub const ALL: [Status; 5] = [
        Status::Pending,
        Status::Running,
        Status::Succeeded,
        Status::Failed,
        Status::Compensated,
    ];

    /// The lower-case name used in storage, on the wire and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Compensated => "compensated",
        }
    }

    /// Whether the task has reached an end (it may still be retried by hand).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Status::Succeeded | Status::Failed | Status::Compensated
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown status name.
#[derive(Debug, thiserror::Error)]
#[error("unknown status {0:?} (expected pending, running, succeeded, failed or compensated)")]
pub struct UnknownStatus(pub String);

impl FromStr for Status {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

/// A task as the ledger holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    pub kind: String,
    pub key: String,
    /// The exact bytes given at enqueue time.
    #[serde(skip)]
    pub payload: Vec<u8>,
    pub status: Status,
    pub attempts: u32,
    /// 0 on a task inserted through the outbox without one and not claimed yet: the kind's
    /// limit, written by the first claim.
    pub max_attempts: u32,
    pub run_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<Timestamp>,
    pub epoch: i64,
    pub traceparent: Option<String>,
    pub last_error: Option<String>,
    pub reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Its ordering group, when its kind orders or its enqueuer named one
    /// ([`crate::group`]).
    pub group: Option<String>,
    /// Its place in its group: the order in which the group's enqueues committed.
    pub group_seq: Option<i64>,
    /// Parked behind an open task of its group: `pending`, not due until that task ends.
    /// `run_at` is then the task's own time, which applies once it is unparked.
    pub parked: bool,
}

impl Task {
    /// Held: leased ahead by a dispatcher but not started, so still `pending` (no attempt
    /// counted); due again by itself when the lease lapses.
    pub fn is_held(&self) -> bool {
        self.status == Status::Pending && self.lease_owner.is_some()
    }
}

/// A task to put in the ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct NewTask {
    /// Pre-assigned id; the store keeps it only when the task is new.
    pub id: TaskId,
    pub kind: String,
    pub key: String,
    pub payload: Vec<u8>,
    pub max_attempts: u32,
    pub run_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub traceparent: Option<String>,
    /// How it enters the ledger: to be run, or already a dead letter.
    pub intake: Intake,
    /// Where it came from, as a JSON object (a broker's delivery metadata: queue, message id,
    /// `x-death`, delivery count …), shown on its `created` event. When the task exists
    /// already with the same payload, the store appends a `redelivered` event carrying this
    /// origin instead, so the timeline counts every redelivery; without an origin a repeat
    /// leaves no trace (an API caller's retry).
    pub origin: Option<String>,
    /// Its ordering group ([`crate::group`]): the group's tasks run one at a time, in the order
    /// their enqueues commit. A repeat of an existing task keeps the existing task's group.
    pub group: Option<String>,
}

/// How a new task enters the ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Intake {
    /// `pending`, due at `run_at`: the usual way.
    #[default]
    Run,
    /// Already a dead letter: `failed` with this reason and no attempt, retried or resolved
    /// by hand like any other. A message a bridge could not turn into a task of its kind
    /// (no key, not JSON, too large, unknown kind), or a dead letter taken in from a broker.
    Failed {
        /// Why, as `reason` and `last_error` on the task.
        reason: String,
    },
    /// Already ended without running: `compensated` with this reason and no attempt. A
    /// schedule's instant that was missed, overlapped its previous tick, or fell in a pause.
    Compensated {
        /// Why, as `reason` on the task.
        reason: String,
    },
}

impl Intake {
    /// The dead letter's reason (`Failed`), or `None` for a task to run.
    pub fn failed_reason(&self) -> Option<&str> {
        match self {
            Intake::Failed { reason } => Some(reason),
            Intake::Run | Intake::Compensated { .. } => None,
        }
    }

    /// The status the task enters with.
    pub fn status(&self) -> Status {
        match self {
            Intake::Run => Status::Pending,
            Intake::Failed { .. } => Status::Failed,
            Intake::Compensated { .. } => Status::Compensated,
        }
    }

    /// Its reason: the dead letter's or the compensation's; `None` for a task to run.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Intake::Run => None,
            Intake::Failed { reason } | Intake::Compensated { reason } => Some(reason),
        }
    }
}
