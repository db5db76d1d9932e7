//! Checkpoints and suspensions (the [`Checkpoints`] impl): each in one transaction that locks
//! the task row by id, decides on the locked row whether the lease still holds (its epoch is
//! the row's and the task is running), and then either writes the row or records the rejection
//! on the task's timeline.
//!
//! The row is locked by its unique `id` alone and the fence checked on what was read, as
//! completions do (see `complete.rs`): a status condition in the predicate could let the
//! optimizer walk the `leased` index and lock other running rows. It also keeps the answer
//! independent of whether an `UPDATE` that changes nothing (the same cursor saved twice)
//! counts as affecting its row.

use crate::Db;
use crate::MysqlStore;
use crate::row::{col, id_bytes, status_code, to_ms};
use crate::tx::{Fail, Retry, transaction};
use backstop_core::store::{
    BoxFuture, CheckpointParams, Checkpointed, Checkpoints, LeaseRef, SuspendParams,
};
use backstop_core::{Status, StoreError};
use sqlx::MySqlConnection;

/// The task row, locked until the commit. Binds: id.
const LOCK: &str = "SELECT seq, epoch, status FROM {tasks} WHERE id = ? FOR UPDATE";

/// Binds: cursor, seq.
const SAVE: &str = "UPDATE {tasks} SET checkpoint = ? WHERE seq = ?";

/// The common case in one autocommitted statement: the lease holds. `status + 0` keeps the
/// status out of index choice, so the row is found by its unique `id` alone. The connection
/// reports matched rows (sqlx asks for `CLIENT_FOUND_ROWS`), so the same cursor saved twice
/// still counts. Binds: cursor, id, epoch, running.
const SAVE_HELD: &str =
    "UPDATE {tasks} SET checkpoint = ? WHERE id = ? AND epoch = ? AND status + 0 = ?";

/// The suspended attempt on the timeline, in place of an `attempt` event. Binds: id, now,
/// attempt, duration, worker.
const RECORD_SUSPENDED: &str = "
INSERT INTO {events} (task_id, type, at, attempt, duration_ms, worker, reason)
VALUES (?, 'suspended', ?, ?, ?, ?, 'stopped with its checkpoint; the attempt is not counted')";

/// Back to pending (status 0), due now, the attempt given back, the cursor replaced only when
/// a last one is given; the lease and the attempt's row columns cleared as a retry clears
/// them. Binds: now, a last cursor or NULL, now, seq.
const SUSPEND: &str = "
UPDATE {tasks}
SET status = 0, attempts = attempts - 1, run_at = ?, checkpoint = COALESCE(?, checkpoint),
    lease_owner = NULL, lease_until = NULL, updated_at = ?,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
WHERE seq = ?";

/// A write from a lease that was lost, on its task's timeline. Binds: id, type, now, attempt,
/// worker, reason.
const RECORD_REJECTED: &str = "
INSERT INTO {events} (task_id, type, at, attempt, worker, reason) VALUES (?, ?, ?, ?, ?, ?)";

impl Checkpoints for MysqlStore {
    fn checkpoint(&self, p: CheckpointParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        Box::pin(async move {
            let db = &self.db;
            let saved = sqlx::query(db.tables.q(SAVE_HELD))
                .bind(p.cursor.as_str())
                .bind(id_bytes(&p.lease.id))
                .bind(p.lease.epoch)
                .bind(status_code(Status::Running))
                .execute(&db.pool)
                .await
                .map_err(crate::tx::db_err)?
                .rows_affected();
            if saved == 1 {
                return Ok(Checkpointed::Saved);
            }
            // Lost, or raced: decided on the locked row, and a rejection recorded.
            let out = transaction!(db, Retry::Locks, |conn| save(db, conn, &p).await)?;
            Ok(logged(out, &p.lease, "checkpoint_rejected"))
        })
    }

    fn suspend(&self, p: SuspendParams) -> BoxFuture<'_, Result<Checkpointed, StoreError>> {
        Box::pin(async move {
            let db = &self.db;
            let out = transaction!(db, Retry::Locks, |conn| suspend(db, conn, &p).await)?;
            Ok(logged(out, &p.lease, "stale_completion"))
        })
    }
}

/// What the locked row says of a lease.
enum Found {
    /// The lease holds: the row's `seq`.
    Held(i64),
    /// The task exists under another epoch or is no longer running.
    Lost,
    /// No such task.
    Missing,
}

/// Locks the row of `lease`'s task and says whether the lease holds.
async fn lock(db: &Db, conn: &mut MySqlConnection, lease: &LeaseRef) -> Result<Found, Fail> {
    let row = sqlx::query(db.tables.q(LOCK))
        .bind(id_bytes(&lease.id))
        .fetch_optional(&mut *conn)
        .await?;
    let Some(r) = row else {
        return Ok(Found::Missing);
    };
    let running = col::<i8, _>(&r, "status")? == status_code(Status::Running);
    Ok(if running && col::<i64, _>(&r, "epoch")? == lease.epoch {
        Found::Held(col(&r, "seq")?)
    } else {
        Found::Lost
    })
}

async fn save(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &CheckpointParams,
) -> Result<Checkpointed, Fail> {
    match lock(db, conn, &p.lease).await? {
        Found::Held(seq) => {
            sqlx::query(db.tables.q(SAVE))
                .bind(p.cursor.as_str())
                .bind(seq)
                .execute(&mut *conn)
                .await?;
            Ok(Checkpointed::Saved)
        }
        Found::Lost => {
            let why = "checkpoint_rejected";
            reject(db, conn, &p.lease, why, to_ms(p.now), p.attempt, &p.worker).await?;
            Ok(Checkpointed::Rejected)
        }
        Found::Missing => Ok(Checkpointed::Rejected),
    }
}

async fn suspend(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &SuspendParams,
) -> Result<Checkpointed, Fail> {
    let now = to_ms(p.now);
    match lock(db, conn, &p.lease).await? {
        Found::Held(seq) => {
            sqlx::query(db.tables.q(RECORD_SUSPENDED))
                .bind(id_bytes(&p.lease.id))
                .bind(now)
                .bind(i64::from(p.attempt))
                .bind((now - to_ms(p.started_at)).max(0))
                .bind(p.worker.as_str())
                .execute(&mut *conn)
                .await?;
            sqlx::query(db.tables.q(SUSPEND))
                .bind(now)
                .bind(p.cursor.as_deref())
                .bind(now)
                .bind(seq)
                .execute(&mut *conn)
                .await?;
            Ok(Checkpointed::Saved)
        }
        Found::Lost => {
            let why = "stale_completion";
            reject(db, conn, &p.lease, why, now, p.attempt, &p.worker).await?;
            Ok(Checkpointed::Rejected)
        }
        Found::Missing => Ok(Checkpointed::Rejected),
    }
}

/// Records a rejected write of a lost lease as an event of type `kind`.
async fn reject(
    db: &Db,
    conn: &mut MySqlConnection,
    lease: &LeaseRef,
    kind: &str,
    now: i64,
    attempt: u32,
    worker: &str,
) -> Result<(), Fail> {
    sqlx::query(db.tables.q(RECORD_REJECTED))
        .bind(id_bytes(&lease.id))
        .bind(kind)
        .bind(now)
        .bind(i64::from(attempt))
        .bind(worker)
        .bind(format!(
            "the lease (epoch {}) was lost: the task was claimed again or is no longer running",
            lease.epoch
        ))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Logs a rejection once its transaction committed (not on each try of it).
fn logged(out: Checkpointed, lease: &LeaseRef, kind: &str) -> Checkpointed {
    if out == Checkpointed::Rejected {
        tracing::warn!(task = %lease.id, kind, "rejected a write from a lost lease");
    }
    out
}
