//! Checkpoints and suspensions (the [`Checkpoints`] impl): each one statement that locks the
//! task row by id, writes only while the lease's epoch is the row's and the task is running,
//! and otherwise records the rejection on the task's timeline (when the task exists).
//!
//! The row is found by id alone, in a `MATERIALIZED` CTE, and epoch and status are checked on
//! the row it locked, as in `complete.rs`: with the status in the lookup, stale statistics
//! could let the planner walk the partial index of running tasks instead of the id's. The
//! locked row is its latest committed version, so a concurrent claim or rescue is either seen
//! or waited for, and the write and its event agree.

use crate::row::duration_ms;
use crate::types::{Id, Time};
use crate::{Db, PostgresStore, db_err};
use backstop_core::StoreError;
use backstop_core::store::{
    BoxFuture, CheckpointParams, Checkpointed, Checkpoints, LeaseRef, SuspendParams,
};

/// Saves the cursor while the lease holds, or records a `checkpoint_rejected` event: `$1` id,
/// `$2` epoch, `$3` cursor, `$4` now, `$5` attempt, `$6` worker, `$7` the rejection's reason.
/// Returns how many rows were saved (0 or 1).
const SAVE: &str = "
WITH found AS MATERIALIZED (
    SELECT seq, epoch, status FROM {schema}.tasks WHERE id = $1 FOR UPDATE
),
held AS MATERIALIZED (SELECT seq FROM found WHERE epoch = $2 AND status = 'running'),
saved AS (
    UPDATE {schema}.tasks AS t SET checkpoint = $3
    FROM held WHERE t.seq = held.seq
    RETURNING t.seq
),
rejected AS (
    INSERT INTO {schema}.events (task_id, type, at, attempt, worker, reason)
    SELECT $1, 'checkpoint_rejected', $4, $5, $6, $7
    FROM found WHERE NOT EXISTS (SELECT 1 FROM held)
)
SELECT count(*) FROM saved";

/// Gives the attempt back while the lease holds: back to pending, due now, `attempts` one
/// less, the cursor replaced only when a last one is given, the lease and the attempt's row
/// columns cleared as a retry clears them, and a `suspended` event in place of the attempt.
/// Otherwise records a `stale_completion` event. `$1` id, `$2` epoch, `$3` now, `$4` a last
/// cursor or NULL, `$5` attempt, `$6` duration, `$7` worker, `$8` the rejection's reason.
/// Returns how many rows were suspended (0 or 1).
const SUSPEND: &str = "
WITH found AS MATERIALIZED (
    SELECT seq, epoch, status FROM {schema}.tasks WHERE id = $1 FOR UPDATE
),
held AS MATERIALIZED (SELECT seq FROM found WHERE epoch = $2 AND status = 'running'),
suspended AS (
    UPDATE {schema}.tasks AS t
    SET status = 'pending', attempts = t.attempts - 1, run_at = $3,
        checkpoint = coalesce($4, t.checkpoint),
        lease_owner = NULL, lease_until = NULL, updated_at = $3,
        att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
        att_http_status = NULL, att_worker = NULL
    FROM held WHERE t.seq = held.seq
    RETURNING t.seq
),
recorded AS (
    INSERT INTO {schema}.events (task_id, type, at, attempt, duration_ms, worker, reason)
    SELECT $1, 'suspended', $3, $5, $6, $7,
           'stopped with its checkpoint; the attempt is not counted'
    FROM suspended
),
rejected AS (
    INSERT INTO {schema}.events (task_id, type, at, attempt, worker, reason)
    SELECT $1, 'stale_completion', $3, $5, $7, $8
    FROM found WHERE NOT EXISTS (SELECT 1 FROM held)
)
SELECT count(*) FROM suspended";

impl Checkpoints for PostgresStore {
    fn checkpoint(&self, p: CheckpointParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        Box::pin(async move { save(&self.db, &p).await })
    }

    fn suspend(&self, p: SuspendParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        Box::pin(async move { suspend(&self.db, &p).await })
    }
}

async fn save(db: &Db, p: &CheckpointParams) -> Result<Checkpointed, StoreError> {
    let saved: i64 = sqlx::query_scalar(db.schema.sql(SAVE))
        .bind(Id(p.lease.id))
        .bind(p.lease.epoch)
        .bind(&p.cursor)
        .bind(Time(p.now))
        .bind(i64::from(p.attempt))
        .bind(&p.worker)
        .bind(lost(&p.lease))
        .fetch_one(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(answer(saved, &p.lease, "checkpoint_rejected"))
}

async fn suspend(db: &Db, p: &SuspendParams) -> Result<Checkpointed, StoreError> {
    let suspended: i64 = sqlx::query_scalar(db.schema.sql(SUSPEND))
        .bind(Id(p.lease.id))
        .bind(p.lease.epoch)
        .bind(Time(p.now))
        .bind(p.cursor.as_deref())
        .bind(i64::from(p.attempt))
        .bind(duration_ms(p.started_at, p.now))
        .bind(&p.worker)
        .bind(lost(&p.lease))
        .fetch_one(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(answer(suspended, &p.lease, "stale_completion"))
}

/// The reason recorded on a write of a lost lease.
fn lost(lease: &LeaseRef) -> String {
    format!(
        "the lease (epoch {}) was lost: the task was claimed again or is no longer running",
        lease.epoch
    )
}

/// `Saved` when the statement wrote the row; otherwise the rejection (already recorded as an
/// event of type `kind`) is logged.
fn answer(written: i64, lease: &LeaseRef, kind: &str) -> Checkpointed {
    if written == 1 {
        Checkpointed::Saved
    } else {
        tracing::warn!(task = %lease.id, kind, "rejected a write from a lost lease");
        Checkpointed::Rejected
    }
}
