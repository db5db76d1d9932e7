//! Completion: a batch of attempt outcomes in one statement (so one transaction and one round
//! trip), each fenced by its `epoch` and the running status.
//!
//! The held rows are locked first, in id order, so that two batches touching the same tasks
//! (a completion and a heartbeat of one worker, say) queue instead of deadlocking. A finished
//! attempt stays on the task row; a retried one is written to the timeline, because the next
//! attempt reuses the row's attempt columns. A completion whose lease was lost changes
//! nothing and is recorded on its task's timeline as `stale_completion`. When one batch holds
//! the same lease twice, the first one counts and the repeat is stale, as it would be in a
//! later batch.

use crate::row::duration_ms;
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::{CompleteParams, CompleteResult, LeaseRef};
use sqlx::postgres::PgBindIterExt;

/// Returns the stale completions (id and epoch), in the order given.
const COMPLETE: &str = "
WITH c AS (
    SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::integer[], $8::timestamptz[], $9::timestamptz[],
                         $10::text[], $11::timestamptz[], $12::bigint[], $13::bigint[])
        WITH ORDINALITY AS c(id, epoch, status, error, reason, outcome, http_status,
                             started_at, ended_at, worker, run_at, attempt, duration_ms, ord)
),
first AS (
    SELECT DISTINCT ON (id, epoch) * FROM c ORDER BY id, epoch, ord
),
held AS MATERIALIZED (
    SELECT t.seq, f.ord
    FROM {schema}.tasks AS t JOIN first AS f ON t.id = f.id
    WHERE t.epoch = f.epoch AND t.status = 'running'
    ORDER BY t.id
    FOR UPDATE OF t
),
done AS (
    UPDATE {schema}.tasks AS t
    SET status = f.status, run_at = coalesce(f.run_at, t.run_at),
        last_error = f.error, reason = f.reason,
        lease_owner = NULL, lease_until = NULL, updated_at = $14,
        att_started_at = CASE WHEN f.status = 'pending' THEN NULL ELSE f.started_at END,
        att_ended_at = CASE WHEN f.status = 'pending' THEN NULL ELSE f.ended_at END,
        att_outcome = CASE WHEN f.status = 'pending' THEN NULL ELSE f.outcome END,
        att_error = CASE WHEN f.status = 'pending' THEN NULL ELSE f.error END,
        att_http_status = CASE WHEN f.status = 'pending' THEN NULL ELSE f.http_status END,
        att_worker = CASE WHEN f.status = 'pending' THEN NULL ELSE f.worker END
    FROM held AS h JOIN first AS f ON f.ord = h.ord
    WHERE t.seq = h.seq AND t.epoch = f.epoch AND t.status = 'running'
    RETURNING t.id, t.attempts, f.ord
),
retried AS (
    INSERT INTO {schema}.events
        (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
    SELECT f.id, 'attempt', f.ended_at, d.attempts, f.outcome, f.error, f.http_status,
           f.duration_ms, f.worker
    FROM done AS d JOIN first AS f ON f.ord = d.ord
    WHERE f.status = 'pending'
),
stale AS (
    INSERT INTO {schema}.events
        (task_id, type, at, attempt, outcome, error, http_status, worker)
    SELECT c.id, 'stale_completion', $14, c.attempt, c.outcome, c.error, c.http_status, c.worker
    FROM c
    WHERE NOT EXISTS (SELECT 1 FROM done AS d WHERE d.ord = c.ord)
    ORDER BY c.ord
)
SELECT c.id, c.epoch FROM c
WHERE NOT EXISTS (SELECT 1 FROM done AS d WHERE d.ord = c.ord)
ORDER BY c.ord";

pub(crate) async fn complete(db: &Db, p: &CompleteParams) -> Result<CompleteResult, StoreError> {
    if p.completions.is_empty() {
        return Ok(CompleteResult::default());
    }
    let c = &p.completions;
    let stale: Vec<(Id, i64)> = sqlx::query_as(db.schema.sql(COMPLETE))
        .bind(c.iter().map(|c| Id(c.lease.id)).bind_iter())
        .bind(c.iter().map(|c| c.lease.epoch).bind_iter())
        .bind(c.iter().map(|c| c.status.as_str()).bind_iter())
        .bind(c.iter().map(|c| c.last_error.as_deref()).bind_iter())
        .bind(c.iter().map(|c| c.reason.as_deref()).bind_iter())
        .bind(c.iter().map(|c| c.outcome.as_str()).bind_iter())
        .bind(c.iter().map(|c| c.http_status.map(i32::from)).bind_iter())
        .bind(c.iter().map(|c| Time(c.started_at)).bind_iter())
        .bind(c.iter().map(|c| Time(c.ended_at)).bind_iter())
        .bind(c.iter().map(|c| c.worker.as_str()).bind_iter())
        .bind(c.iter().map(|c| c.run_at.map(Time)).bind_iter())
        .bind(c.iter().map(|c| i64::from(c.attempt)).bind_iter())
        .bind(
            c.iter()
                .map(|c| duration_ms(c.started_at, c.ended_at))
                .bind_iter(),
        )
        .bind(Time(p.now))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    if !stale.is_empty() {
        tracing::warn!(count = stale.len(), "rejected stale completions");
    }
    Ok(CompleteResult {
        stale: stale
            .into_iter()
            .map(|(Id(id), epoch)| LeaseRef { id, epoch })
            .collect(),
    })
}
