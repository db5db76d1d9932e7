//! Manual actions (the [`ManualActions`] impl): retry a dead letter, resolve it, cancel a
//! pending task, redrive a succeeded one. Each is checked
//! against the state machine and recorded on the timeline with who asked.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::to_ms;
use crate::row::{id_bytes, parse_status, status_code, task, task_columns};
use backstop_core::manual::{CANCEL, ManualAction as Action, REDRIVE, RESOLVE, RETRY};
use backstop_core::store::{BoxFuture, ManualActions, ManualParams};
use backstop_core::{StoreError, Task, Transition, transition};
use sqlx::{Connection, Row, SqliteConnection};

impl ManualActions for SqliteStore {
    fn retry(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            retry(&mut w, &p).await
        })
    }

    fn resolve(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            resolve(&mut w, &p).await
        })
    }

    fn cancel(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            cancel(&mut w, &p).await
        })
    }

    fn redrive(&self, p: ManualParams) -> BoxFuture<'_, Result<Task, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            redrive(&mut w, &p).await
        })
    }
}

pub(crate) async fn retry(
    conn: &mut SqliteConnection,
    p: &ManualParams,
) -> Result<Task, StoreError> {
    apply(conn, p, &RETRY).await
}

pub(crate) async fn resolve(
    conn: &mut SqliteConnection,
    p: &ManualParams,
) -> Result<Task, StoreError> {
    apply(conn, p, &RESOLVE).await
}

pub(crate) async fn cancel(
    conn: &mut SqliteConnection,
    p: &ManualParams,
) -> Result<Task, StoreError> {
    apply(conn, p, &CANCEL).await
}

pub(crate) async fn redrive(
    conn: &mut SqliteConnection,
    p: &ManualParams,
) -> Result<Task, StoreError> {
    apply(conn, p, &REDRIVE).await
}

async fn apply(
    conn: &mut SqliteConnection,
    p: &ManualParams,
    action: &Action,
) -> Result<Task, StoreError> {
    let now = to_ms(p.now);
    let id = id_bytes(&p.id);
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let row = sqlx::query("SELECT status, max_attempts, attempts FROM backstop_tasks WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err)?
        .ok_or(StoreError::NotFound(p.id))?;
    let status = parse_status(row.get("status"))?;
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
    if action.runs_again() {
        // The row's attempt columns are about to be reused: move the last attempt to the
        // timeline table first.
        sqlx::query(
            "INSERT INTO backstop_events
                (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
             SELECT id, 'attempt', att_ended_at, attempts, att_outcome, att_error, att_http_status,
                    att_ended_at - att_started_at, att_worker
             FROM backstop_tasks WHERE id = ? AND att_outcome IS NOT NULL",
        )
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    }
    sqlx::query(
        "INSERT INTO backstop_events (task_id, type, at, actor, reason) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(id)
    .bind(action.event)
    .bind(now)
    .bind(&p.actor)
    .bind(&reason)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?;
    match action.transition {
        _ if action.runs_again() => {
            let attempts: i64 = row.get("attempts");
            let budget = p
                .max_attempts
                .map(i64::from)
                .unwrap_or_else(|| row.get("max_attempts"));
            sqlx::query(
                // Running again, a grouped task holds its group again (`grp_live`).
                "UPDATE backstop_tasks SET status = ?2, run_at = ?3, updated_at = ?3,
                    grp_live = grp,
                    max_attempts = ?4, reason = NULL, lease_owner = NULL, lease_until = NULL,
                    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL,
                    att_error = NULL, att_http_status = NULL, att_worker = NULL
                 WHERE id = ?1",
            )
            .bind(id)
            .bind(status_code(to))
            .bind(now)
            .bind(attempts + budget)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
        _ => {
            sqlx::query(
                // A canceled task may have been held: its lease goes with it.
                concat!(
                    "UPDATE backstop_tasks SET status = ?2, reason = ?3, updated_at = ?4,
                    lease_owner = NULL, lease_until = NULL, grp_live = ",
                    crate::groups::grp_live_after!("?2", ""),
                    " WHERE id = ?1"
                ),
            )
            .bind(id)
            .bind(status_code(to))
            .bind(&reason)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
    }
    // A resolve or cancel ends the task: its group goes on.
    sqlx::query(sqlx::AssertSqlSafe(crate::groups::PROMOTE_IDS.as_str()))
        .bind(crate::groups::ids_json([&p.id]))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let row = sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM backstop_tasks WHERE id = ?"
    ))
    .bind(id)
    .fetch_one(&mut *tx)
    .await
    .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    task(&row)
}
