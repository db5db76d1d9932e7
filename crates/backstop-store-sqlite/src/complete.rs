//! Completion: a batch of attempt outcomes in one transaction, each fenced by `epoch` and
//! `status = 'running'`.
//!
//! The common case (every lease still held) is one multi-row UPDATE per chunk. When a chunk
//! updates fewer rows than it has, some leases were lost: the chunk is rolled back to its
//! savepoint and redone row by row, recording each stale completion on its task's timeline.

use crate::chunks::{fixed, placeholders};
use crate::db_err;
use crate::row::jiff_ms::to_ms;
use backstop_core::store::{CompleteParams, CompleteResult, Completion};
use backstop_core::{Status, StoreError};
use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;
use sqlx::{AssertSqlSafe, Connection, Sqlite, SqliteConnection};

const COLS: usize = 11;

fn apply_sql(rows: usize) -> String {
    format!(
        "WITH c (id, epoch, status, run_at, error, reason, outcome, http_status, started_at, \
                 ended_at, worker) AS (VALUES {})
         UPDATE backstop_tasks AS t
         SET status = c.status,
             run_at = coalesce(c.run_at, t.run_at),
             last_error = c.error,
             reason = c.reason,
             lease_owner = NULL, lease_until = NULL, updated_at = ?,
             att_started_at = iif(c.status = 'pending', NULL, c.started_at),
             att_ended_at = iif(c.status = 'pending', NULL, c.ended_at),
             att_outcome = iif(c.status = 'pending', NULL, c.outcome),
             att_error = iif(c.status = 'pending', NULL, c.error),
             att_http_status = iif(c.status = 'pending', NULL, c.http_status),
             att_worker = iif(c.status = 'pending', NULL, c.worker)
         FROM c
         WHERE t.id = c.id AND t.epoch = c.epoch AND t.status = 'running'",
        placeholders(rows, COLS)
    )
}

/// A retried attempt goes to the timeline table now: the next attempt reuses the row's
/// attempt columns.
fn record_retries_sql(rows: usize) -> String {
    format!(
        "WITH c (id, epoch, status, run_at, error, reason, outcome, http_status, started_at, \
                 ended_at, worker) AS (VALUES {})
         INSERT INTO backstop_events
             (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
         SELECT t.id, 'attempt', c.ended_at, t.attempts, c.outcome, c.error, c.http_status,
                c.ended_at - c.started_at, c.worker
         FROM c JOIN backstop_tasks AS t
           ON t.id = c.id AND t.epoch = c.epoch AND t.status = 'running'
         WHERE c.status = 'pending'",
        placeholders(rows, COLS)
    )
}

fn bind_all<'q>(
    mut q: Query<'q, Sqlite, SqliteArguments>,
    chunk: &'q [Completion],
) -> Query<'q, Sqlite, SqliteArguments> {
    for c in chunk {
        q = q
            .bind(c.lease.id.to_string())
            .bind(c.lease.epoch)
            .bind(c.status.as_str())
            .bind(c.run_at.map(to_ms))
            .bind(c.last_error.as_deref())
            .bind(c.reason.as_deref())
            .bind(c.outcome.as_str())
            .bind(c.http_status.map(i64::from))
            .bind(to_ms(c.started_at))
            .bind(to_ms(c.ended_at))
            .bind(c.worker.as_str());
    }
    q
}

pub(crate) async fn complete(
    conn: &mut SqliteConnection,
    p: &CompleteParams,
) -> Result<CompleteResult, StoreError> {
    let now = to_ms(p.now);
    let mut stale = Vec::new();
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    for chunk in fixed(&p.completions) {
        let mut sp = tx.begin().await.map_err(db_err)?;
        if chunk.iter().any(|c| c.status == Status::Pending) {
            let sql = record_retries_sql(chunk.len());
            bind_all(sqlx::query(AssertSqlSafe(sql)), chunk)
                .execute(&mut *sp)
                .await
                .map_err(db_err)?;
        }
        let sql = apply_sql(chunk.len());
        let applied = bind_all(sqlx::query(AssertSqlSafe(sql)), chunk)
            .bind(now)
            .execute(&mut *sp)
            .await
            .map_err(db_err)?
            .rows_affected();
        if applied as usize == chunk.len() {
            sp.commit().await.map_err(db_err)?;
            continue;
        }
        sp.rollback().await.map_err(db_err)?;
        for c in chunk {
            if !one(&mut tx, c, now).await? {
                stale.push(c.lease);
            }
        }
    }
    tx.commit().await.map_err(db_err)?;
    if !stale.is_empty() {
        tracing::warn!(count = stale.len(), "rejected stale completions");
    }
    Ok(CompleteResult { stale })
}

/// One completion; false (and a `stale_completion` event) when its lease is gone.
async fn one(conn: &mut SqliteConnection, c: &Completion, now: i64) -> Result<bool, StoreError> {
    let one = std::slice::from_ref(c);
    if c.status == Status::Pending {
        bind_all(sqlx::query(AssertSqlSafe(record_retries_sql(1))), one)
            .execute(&mut *conn)
            .await
            .map_err(db_err)?;
    }
    let applied = bind_all(sqlx::query(AssertSqlSafe(apply_sql(1))), one)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?
        .rows_affected();
    if applied == 1 {
        return Ok(true);
    }
    sqlx::query(
        "INSERT INTO backstop_events (task_id, type, at, attempt, outcome, error, http_status, worker)
         VALUES (?, 'stale_completion', ?, ?, ?, ?, ?, ?)",
    )
    .bind(c.lease.id.to_string())
    .bind(now)
    .bind(i64::from(c.attempt))
    .bind(c.outcome.as_str())
    .bind(c.last_error.as_deref())
    .bind(c.http_status.map(i64::from))
    .bind(c.worker.as_str())
    .execute(&mut *conn)
    .await
    .map_err(db_err)?;
    Ok(false)
}
