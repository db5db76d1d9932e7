//! Manual actions: retry a dead letter, resolve it, cancel a pending task. Each is checked
//! against the state machine (under the row's lock) and recorded on the timeline with who
//! asked.
//!
//! The [`ManualActions`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::groups::{Ending, GroupLocks, member};
use crate::row::{TASK_COLUMNS, col, id_bytes, parse_status, status_code, task, to_ms};
use crate::tx::{Fail, Retry, transaction};
use backstop_core::manual::{CANCEL, ManualAction as Action, REDRIVE, RESOLVE, RETRY};
use backstop_core::store::ManualParams;
use backstop_core::store::{BoxFuture, ManualActions};
use backstop_core::{StoreError, Task, Transition, transition};
use sqlx::MySqlConnection;

/// A `failed` or `compensated` task back to `pending`, due now, attempt budget renewed.
impl ManualActions for MysqlStore {
    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { retry(&self.db, &p).await })
    }

    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { resolve(&self.db, &p).await })
    }

    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { cancel(&self.db, &p).await })
    }

    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move { redrive(&self.db, &p).await })
    }
}

pub(crate) async fn retry(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &RETRY).await
}

/// A `failed` task to `compensated` with a reason.
pub(crate) async fn resolve(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &RESOLVE).await
}

/// A `pending` task to `compensated` with reason `canceled`.
pub(crate) async fn cancel(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &CANCEL).await
}

pub(crate) async fn redrive(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &REDRIVE).await
}

/// The row's last attempt, moved to the timeline before a retry reuses the row's attempt
/// columns (the row is locked, so this read sees it as it is).
const RECORD_LAST_ATTEMPT: &str = "
INSERT INTO {events} (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
SELECT id, 'attempt', att_ended_at, attempts, att_outcome, att_error, att_http_status,
       att_ended_at - att_started_at, att_worker
FROM {tasks} WHERE id = ? AND att_outcome IS NOT NULL";

/// Binds: status, now, now, max attempts, id. A task run again is never parked: it runs at
/// once, and its group does not wait for it.
const RENEW: &str = "
UPDATE {tasks} SET status = ?, run_at = ?, parked_run_at = NULL, updated_at = ?,
    max_attempts = ?, reason = NULL,
    lease_owner = NULL, lease_until = NULL,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
WHERE id = ?";

async fn apply(db: &Db, p: &ManualParams, action: &Action) -> Result<Task, StoreError> {
    let mut groups = GroupLocks::default();
    transaction!(db, Retry::Locks, |conn| {
        groups.begin(db, conn).await?;
        apply_locked(db, conn, p, action, &mut groups).await
    })
}

/// The action, in a transaction that locks the task's row first.
async fn apply_locked(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ManualParams,
    action: &Action,
    groups: &mut GroupLocks,
) -> Result<Task, Fail> {
    let t = &db.tables;
    let now = to_ms(p.now);
    let id = id_bytes(&p.id);
    let row = sqlx::query(t.q(
        "SELECT status, max_attempts, attempts, kind, grp, grp_skip FROM {tasks} WHERE id = ? \
         FOR UPDATE",
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound(p.id))?;
    let status = parse_status(col(&row, "status")?)?;
    let to = transition(status, action.transition).map_err(|_| StoreError::WrongStatus {
        id: p.id,
        status,
        action: action.name,
        expected: action.expected,
    })?;
    let reason = match action.transition {
        Transition::Cancel => Some(p.reason.clone().unwrap_or_else(|| "canceled".into())),
        _ => p.reason.clone(),
    };
    // A resolve or cancel ends the task for its group: the group is locked before the row
    // changes and promoted after (see `groups`).
    let mut ending = Ending::default();
    ending.note(member(&row)?.as_ref(), to);
    if !ending.is_empty() {
        groups.take(db, conn, &ending).await?;
    }
    if action.runs_again() {
        sqlx::query(t.q(RECORD_LAST_ATTEMPT))
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(
        t.q("INSERT INTO {events} (task_id, type, at, actor, reason) VALUES (?, ?, ?, ?, ?)"),
    )
    .bind(id)
    .bind(action.event)
    .bind(now)
    .bind(p.actor.as_str())
    .bind(reason.as_deref())
    .execute(&mut *conn)
    .await?;
    if action.runs_again() {
        let attempts: i64 = col(&row, "attempts")?;
        let budget = match p.max_attempts {
            Some(m) => i64::from(m),
            None => col(&row, "max_attempts")?,
        };
        sqlx::query(t.q(RENEW))
            .bind(status_code(to))
            .bind(now)
            .bind(now)
            .bind(attempts + budget)
            .bind(id)
            .execute(&mut *conn)
            .await?;
    } else {
        // A canceled task may have been held: its lease goes with it. One that was parked is
        // parked no more.
        sqlx::query(
            t.q("UPDATE {tasks} SET status = ?, reason = ?, updated_at = ?,
                lease_owner = NULL, lease_until = NULL,
                run_at = COALESCE(parked_run_at, run_at), parked_run_at = NULL WHERE id = ?"),
        )
        .bind(status_code(to))
        .bind(reason.as_deref())
        .bind(now)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    }
    if !ending.is_empty() {
        ending.promote(db, conn).await?;
    }
    let sql = format!("SELECT {TASK_COLUMNS} FROM {{tasks}} WHERE id = ?");
    let row = sqlx::query(t.q(&sql))
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(task(&row)?)
}
