//! Reading tasks and their timelines.

use super::{BoxFuture, StoreError};
use crate::event::Event;
use crate::task::{Status, Task, TaskId};

/// Lists tasks, newest first.
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// Only tasks of this kind.
    pub kind: Option<String>,
    /// Only tasks with this business key.
    pub key: Option<String>,
    /// Only tasks in this status.
    pub status: Option<Status>,
    /// Only tasks of this ordering group.
    pub group: Option<String>,
    /// Most tasks returned.
    pub limit: usize,
    /// Only tasks older than this one (cursor pagination).
    pub before: Option<TaskId>,
}

/// Walks the tasks of one kind and status in id order, a page at a time (statement
/// reconciliation's scan of succeeded tasks).
#[derive(Clone, Debug)]
pub struct ScanParams {
    /// The tasks' kind.
    pub kind: String,
    /// The tasks' status.
    pub status: Status,
    /// Only tasks with an id after this one.
    pub after: Option<TaskId>,
    /// Most tasks returned.
    pub limit: usize,
}

/// Looks tasks of one kind up by business key, many at once.
#[derive(Clone, Debug)]
pub struct KeysParams {
    /// The tasks' kind.
    pub kind: String,
    /// The business keys looked for.
    pub keys: Vec<String>,
}

/// Reads one task by its id.
#[derive(Clone, Copy, Debug)]
pub struct GetParams {
    /// The task's id.
    pub id: TaskId,
}

/// Reads one task by its business identity, `(kind, key)`.
#[derive(Clone, Debug)]
pub struct GetByKeyParams {
    /// The task's kind.
    pub kind: String,
    /// Its business key.
    pub key: String,
}

/// Finds the task a group waits for: its first open task ([`crate::group`]).
#[derive(Clone, Debug)]
pub struct GroupHeadParams {
    /// The group's kind.
    pub kind: String,
    /// The group.
    pub group: String,
}

/// Reads the whole timeline of one task.
#[derive(Clone, Copy, Debug)]
pub struct TimelineParams {
    /// The task's id.
    pub id: TaskId,
}

/// Counts tasks per status.
#[derive(Clone, Debug, Default)]
pub struct CountsParams {
    /// Only tasks of this kind; every task when `None`.
    pub kind: Option<String>,
}

/// Counts of tasks per status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// `pending` tasks.
    pub pending: u64,
    /// `running` tasks.
    pub running: u64,
    /// `succeeded` tasks.
    pub succeeded: u64,
    /// `failed` tasks.
    pub failed: u64,
    /// `compensated` tasks.
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

/// Reads of tasks: by id, by business identity, lists, scans, counts and timelines.
pub trait Tasks: Send + Sync {
    /// One task.
    fn get(&self, p: GetParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>>;

    /// One task by its business identity.
    fn get_by_key(&self, p: GetByKeyParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>>;

    /// The whole timeline of a task, oldest first.
    fn timeline(&self, p: TimelineParams) -> BoxFuture<'_, Result<Vec<Event>, StoreError>>;

    /// Tasks, newest first.
    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>>;

    /// A page of one kind's tasks in one status, in id order.
    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>>;

    /// The tasks of one kind with any of these keys (missing keys are left out), in no
    /// particular order.
    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>>;

    /// Tasks per status, for one kind or all.
    fn counts(&self, p: CountsParams) -> BoxFuture<'_, Result<StatusCounts, StoreError>>;

    /// The first open task of a group (pending, running, or failed while it holds the
    /// group), lowest `group_seq` first; `None` when every task of the group has ended.
    fn group_head(&self, p: GroupHeadParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>>;
}
