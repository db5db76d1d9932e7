//! Checkpoints and suspensions (the [`Checkpoints`] impl): each one fenced UPDATE of the task
//! row; when it changes nothing, the rejection goes on the task's timeline instead.

use crate::SqliteStore;
use crate::db_err;
use crate::row::id_bytes;
use crate::row::jiff_ms::to_ms;
use backstop_core::StoreError;
use backstop_core::store::{
    BoxFuture, CheckpointParams, Checkpointed, Checkpoints, LeaseRef, SuspendParams,
};
use sqlx::{Connection, SqliteConnection};

/// `?1` id, `?2` epoch, `?3` cursor. Status 1 is running.
const SAVE: &str = "
UPDATE backstop_tasks SET checkpoint = ?3
WHERE id = ?1 AND epoch = ?2 AND status = 1";

/// The suspended attempt on the timeline, written only while the lease holds: `?1` id, `?2`
/// epoch, `?3` now, `?4` attempt, `?5` duration, `?6` worker.
const RECORD_SUSPENDED: &str = "
INSERT INTO backstop_events (task_id, type, at, attempt, duration_ms, worker, reason)
SELECT id, 'suspended', ?3, ?4, ?5, ?6, 'stopped with its checkpoint; the attempt is not counted'
FROM backstop_tasks WHERE id = ?1 AND epoch = ?2 AND status = 1";

/// Back to pending (status 0), due now, the attempt given back: `?1` id, `?2` epoch, `?3` now,
/// `?4` a last cursor or NULL.
const SUSPEND: &str = "
UPDATE backstop_tasks
SET status = 0, attempts = attempts - 1, run_at = ?3, checkpoint = coalesce(?4, checkpoint),
    lease_owner = NULL, lease_until = NULL, updated_at = ?3,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
WHERE id = ?1 AND epoch = ?2 AND status = 1";

/// A write from a lease that was lost, on the timeline of its task (when the task exists).
const RECORD_REJECTED: &str = "
INSERT INTO backstop_events (task_id, type, at, attempt, worker, reason)
SELECT id, ?2, ?3, ?4, ?5, ?6 FROM backstop_tasks WHERE id = ?1";

impl Checkpoints for SqliteStore {
    fn checkpoint(&self, p: CheckpointParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            save(&mut w, &p).await
        })
    }

    fn suspend(&self, p: SuspendParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            suspend(&mut w, &p).await
        })
    }
}

async fn save(
    conn: &mut SqliteConnection,
    p: &CheckpointParams,
) -> Result<Checkpointed, StoreError> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let saved = sqlx::query(SAVE)
        .bind(id_bytes(&p.lease.id))
        .bind(p.lease.epoch)
        .bind(&p.cursor)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
    let out = if saved == 1 {
        Checkpointed::Saved
    } else {
        let why = "checkpoint_rejected";
        reject(&mut tx, &p.lease, why, p.now, p.attempt, &p.worker).await?;
        Checkpointed::Rejected
    };
    tx.commit().await.map_err(db_err)?;
    Ok(out)
}

async fn suspend(
    conn: &mut SqliteConnection,
    p: &SuspendParams,
) -> Result<Checkpointed, StoreError> {
    let now = to_ms(p.now);
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let recorded = sqlx::query(RECORD_SUSPENDED)
        .bind(id_bytes(&p.lease.id))
        .bind(p.lease.epoch)
        .bind(now)
        .bind(i64::from(p.attempt))
        .bind((now - to_ms(p.started_at)).max(0))
        .bind(&p.worker)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
    let out = if recorded == 1 {
        sqlx::query(SUSPEND)
            .bind(id_bytes(&p.lease.id))
            .bind(p.lease.epoch)
            .bind(now)
            .bind(p.cursor.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        Checkpointed::Saved
    } else {
        let why = "stale_completion";
        reject(&mut tx, &p.lease, why, p.now, p.attempt, &p.worker).await?;
        Checkpointed::Rejected
    };
    tx.commit().await.map_err(db_err)?;
    Ok(out)
}

/// Records a rejected write of a lost lease as an event of type `kind`.
async fn reject(
    tx: &mut SqliteConnection,
    lease: &LeaseRef,
    kind: &str,
    now: jiff::Timestamp,
    attempt: u32,
    worker: &str,
) -> Result<(), StoreError> {
    sqlx::query(RECORD_REJECTED)
        .bind(id_bytes(&lease.id))
        .bind(kind)
        .bind(to_ms(now))
        .bind(i64::from(attempt))
        .bind(worker)
        .bind(format!(
            "the lease (epoch {}) was lost: the task was claimed again or is no longer running",
            lease.epoch
        ))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tracing::warn!(task = %lease.id, kind, "rejected a write from a lost lease");
    Ok(())
}
