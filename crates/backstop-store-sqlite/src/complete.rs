//! Completion: a batch of attempt outcomes in one transaction, each fenced by `epoch` and
//! `status = 'running'`. The batch travels as one JSON parameter so the statements stay
//! fixed (prepared once) whatever the batch size.

use crate::db_err;
use crate::row::jiff_ms::to_ms;
use crate::row::parse_id;
use backstop_core::store::{CompleteParams, CompleteResult, LeaseRef};
use backstop_core::{Status, StoreError};
use serde_json::json;
use sqlx::{Connection, Row, SqliteConnection};

/// The completions whose lease is gone.
const STALE: &str = "
SELECT j.value ->> 'id' AS id, j.value ->> 'epoch' AS epoch
FROM json_each(?1) AS j
WHERE NOT EXISTS (
    SELECT 1 FROM backstop_tasks AS t
    WHERE t.id = j.value ->> 'id' AND t.epoch = j.value ->> 'epoch' AND t.status = 'running')";

/// A rejected stale completion, recorded on its task's timeline.
const RECORD_STALE: &str = "
INSERT INTO backstop_events (task_id, type, at, attempt, outcome, error, http_status, worker)
SELECT j.value ->> 'id', 'stale_completion', ?2, j.value ->> 'attempt', j.value ->> 'outcome',
       j.value ->> 'error', j.value ->> 'http_status', j.value ->> 'worker'
FROM json_each(?1) AS j
WHERE NOT EXISTS (
    SELECT 1 FROM backstop_tasks AS t
    WHERE t.id = j.value ->> 'id' AND t.epoch = j.value ->> 'epoch' AND t.status = 'running')";

/// A retried attempt goes to the timeline table now, since the next attempt will reuse the
/// row's attempt columns.
const RECORD_RETRIES: &str = "
INSERT INTO backstop_events
    (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
SELECT t.id, 'attempt', j.value ->> 'ended_at', j.value ->> 'attempt', j.value ->> 'outcome',
       j.value ->> 'error', j.value ->> 'http_status',
       (j.value ->> 'ended_at') - (j.value ->> 'started_at'), j.value ->> 'worker'
FROM json_each(?1) AS j
JOIN backstop_tasks AS t
  ON t.id = j.value ->> 'id' AND t.epoch = j.value ->> 'epoch' AND t.status = 'running'
WHERE j.value ->> 'status' = 'pending'";

const APPLY: &str = "
UPDATE backstop_tasks AS t
SET status = c.status,
    run_at = coalesce(c.run_at, t.run_at),
    last_error = c.error,
    reason = c.reason,
    lease_owner = NULL, lease_until = NULL, updated_at = ?2,
    att_started_at = iif(c.status = 'pending', NULL, c.started_at),
    att_ended_at = iif(c.status = 'pending', NULL, c.ended_at),
    att_outcome = iif(c.status = 'pending', NULL, c.outcome),
    att_error = iif(c.status = 'pending', NULL, c.error),
    att_http_status = iif(c.status = 'pending', NULL, c.http_status),
    att_worker = iif(c.status = 'pending', NULL, c.worker)
FROM (
    SELECT value ->> 'id' AS id, value ->> 'epoch' AS epoch, value ->> 'status' AS status,
           value ->> 'run_at' AS run_at, value ->> 'error' AS error,
           value ->> 'reason' AS reason, value ->> 'outcome' AS outcome,
           value ->> 'http_status' AS http_status, value ->> 'started_at' AS started_at,
           value ->> 'ended_at' AS ended_at, value ->> 'worker' AS worker
    FROM json_each(?1)) AS c
WHERE t.id = c.id AND t.epoch = c.epoch AND t.status = 'running'";

pub(crate) async fn complete(
    conn: &mut SqliteConnection,
    p: &CompleteParams,
) -> Result<CompleteResult, StoreError> {
    if p.completions.is_empty() {
        return Ok(CompleteResult::default());
    }
    let mut any_retry = false;
    let batch: Vec<serde_json::Value> = p
        .completions
        .iter()
        .map(|c| {
            any_retry |= c.status == Status::Pending;
            json!({
                "id": c.lease.id.to_string(),
                "epoch": c.lease.epoch,
                "attempt": c.attempt,
                "status": c.status.as_str(),
                "run_at": c.run_at.map(to_ms),
                "error": c.last_error,
                "reason": c.reason,
                "outcome": c.outcome.as_str(),
                "http_status": c.http_status,
                "started_at": to_ms(c.started_at),
                "ended_at": to_ms(c.ended_at),
                "worker": c.worker,
            })
        })
        .collect();
    let batch = serde_json::Value::Array(batch).to_string();
    let now = to_ms(p.now);

    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let stale_rows = sqlx::query(STALE)
        .bind(&batch)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    let mut stale = Vec::with_capacity(stale_rows.len());
    for r in &stale_rows {
        stale.push(LeaseRef {
            id: parse_id(r.get("id"))?,
            epoch: r.get("epoch"),
        });
    }
    if !stale.is_empty() {
        sqlx::query(RECORD_STALE)
            .bind(&batch)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    if any_retry {
        sqlx::query(RECORD_RETRIES)
            .bind(&batch)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    sqlx::query(APPLY)
        .bind(&batch)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    if !stale.is_empty() {
        tracing::warn!(count = stale.len(), "rejected stale completions");
    }
    Ok(CompleteResult { stale })
}
