//! Manual actions: retry a dead letter, resolve it, cancel a pending task. Each locks its row,
//! is checked against the state machine and is recorded on the timeline with who asked, in one
//! transaction.
//!
//! The [`ManualActions`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::row::{col, count, duration_ms, opt_time, status, task, task_columns};
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::manual::{CANCEL, ManualAction as Action, REDRIVE, RESOLVE, RETRY};
use backstop_core::store::ManualParams;
use backstop_core::store::{BoxFuture, ManualActions};
use backstop_core::{StoreError, Task, Transition, transition};

const LOCK: &str = "
SELECT status, attempts, max_attempts, att_started_at, att_ended_at, att_outcome, att_error,
       att_http_status, att_worker
FROM {schema}.tasks WHERE id = $1
FOR UPDATE";

/// The last attempt, moved off the row before a retry reuses its attempt columns.
const MOVE_ATTEMPT: &str = "
INSERT INTO {schema}.events
    (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
VALUES ($1, 'attempt', $2, $3, $4, $5, $6, $7, $8)";

const RECORD: &str = "
INSERT INTO {schema}.events (task_id, type, at, actor, reason) VALUES ($1, $2, $3, $4, $5)";

const RETRY_SQL: &str = concat!(
    "UPDATE {schema}.tasks SET status = $2, run_at = $3, updated_at = $3, max_attempts = $4,
        reason = NULL, lease_owner = NULL, lease_until = NULL,
        att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
        att_http_status = NULL, att_worker = NULL
     WHERE id = $1
     RETURNING ",
    task_columns!()
);

const END_SQL: &str = concat!(
    // A canceled task may have been held: its lease goes with it.
    "UPDATE {schema}.tasks SET status = $2, reason = $3, updated_at = $4,
        lease_owner = NULL, lease_until = NULL WHERE id = $1
     RETURNING ",
    task_columns!()
);

impl ManualActions for PostgresStore {
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

pub(crate) async fn resolve(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &RESOLVE).await
}

pub(crate) async fn cancel(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &CANCEL).await
}

pub(crate) async fn redrive(db: &Db, p: &ManualParams) -> Result<Task, StoreError> {
    apply(db, p, &REDRIVE).await
}

/// Runs one action in a transaction. An action the state machine refuses is rolled back here,
/// at once: a dropped transaction is only rolled back when its connection is next used, and
/// until then the row lock it took would make claims skip the task.
async fn apply(db: &Db, p: &ManualParams, action: &Action) -> Result<Task, StoreError> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    match apply_in(&mut tx, db, p, action).await {
        Ok(row) => {
            tx.commit().await.map_err(db_err)?;
            task(&row)
        }
        Err(e) => {
            tx.rollback().await.map_err(db_err)?;
            Err(e)
        }
    }
}

async fn apply_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    db: &Db,
    p: &ManualParams,
    action: &Action,
) -> Result<sqlx::postgres::PgRow, StoreError> {
    let id = Id(p.id);
    let now = Time(p.now);
    let row = sqlx::query(db.schema.sql(LOCK))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_err)?
        .ok_or(StoreError::NotFound(p.id))?;
    let from = status(&row, "status")?;
    let to = transition(from, action.transition).map_err(|_| StoreError::WrongStatus {
        id: p.id,
        status: from,
        action: action.name,
        expected: action.expected,
    })?;
    let reason = match action.transition {
        Transition::Cancel => Some(p.reason.clone().unwrap_or_else(|| "canceled".into())),
        _ => p.reason.clone(),
    };
    let attempts = count(&row, "attempts")?;
    let outcome: Option<String> = col(&row, "att_outcome")?;
    if action.runs_again()
        && let Some(outcome) = outcome
    {
        let started = opt_time(&row, "att_started_at")?;
        let ended = opt_time(&row, "att_ended_at")?;
        sqlx::query(db.schema.sql(MOVE_ATTEMPT))
            .bind(id)
            .bind(ended.or(started).map(Time).unwrap_or(now))
            .bind(i64::from(attempts))
            .bind(outcome)
            .bind(col::<Option<String>>(&row, "att_error")?)
            .bind(col::<Option<i32>>(&row, "att_http_status")?)
            .bind(started.zip(ended).map(|(s, e)| duration_ms(s, e)))
            .bind(col::<Option<String>>(&row, "att_worker")?)
            .execute(&mut **tx)
            .await
            .map_err(db_err)?;
    }
    sqlx::query(db.schema.sql(RECORD))
        .bind(id)
        .bind(action.event)
        .bind(now)
        .bind(&p.actor)
        .bind(&reason)
        .execute(&mut **tx)
        .await
        .map_err(db_err)?;
    if action.runs_again() {
        let budget = p
            .max_attempts
            .map_or_else(|| count(&row, "max_attempts"), Ok)?;
        sqlx::query(db.schema.sql(RETRY_SQL))
            .bind(id)
            .bind(to.as_str())
            .bind(now)
            .bind((i64::from(attempts) + i64::from(budget)).min(i64::from(u32::MAX)))
            .fetch_one(&mut **tx)
            .await
    } else {
        sqlx::query(db.schema.sql(END_SQL))
            .bind(id)
            .bind(to.as_str())
            .bind(&reason)
            .bind(now)
            .fetch_one(&mut **tx)
            .await
    }
    .map_err(db_err)
}
