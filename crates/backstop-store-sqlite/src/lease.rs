//! A worker's leases: the [`Leases`] impl (claim and complete run in `claim.rs` and
//! `complete.rs`), heartbeats and release on shutdown; and the ends of attempts that ended
//! without a report, which rescue shares. Each status change is decided by
//! `backstop_core::transition` per row, then applied in one statement.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::to_ms;
use crate::row::{id_bytes, status_code};
use backstop_core::store::Cause;
use backstop_core::store::{
    BoxFuture, ClaimParams, ClaimedTask, CompleteParams, CompleteResult, HeartbeatParams, LeaseRef,
    Leases, ReleaseParams,
};
use backstop_core::{Status, StoreError, TaskId, Transition, transition};
use serde_json::json;
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, SqliteConnection};
use std::collections::HashSet;

/// Extends the leases still held, fenced like a completion; a held task's `run_at` follows
/// its lease (it is due again when the lease ends).
pub(crate) const HEARTBEAT: &str = "
UPDATE backstop_tasks AS t
SET lease_until = ?2, run_at = iif(t.status = 0, ?2, t.run_at), updated_at = ?3
FROM (SELECT value ->> 'id' AS id, value ->> 'epoch' AS epoch FROM json_each(?1)) AS c
WHERE t.id = unhex(c.id) AND t.epoch = c.epoch AND t.status IN (0, 1) AND t.lease_owner = ?4
RETURNING id";

/// The listed leases of running attempts still held.
pub(crate) const RELEASE_PICK: &str = "
SELECT t.seq, t.attempts, t.max_attempts FROM json_each(?1) AS j JOIN backstop_tasks AS t
ON t.id = unhex(j.value ->> 'id') AND t.epoch = j.value ->> 'epoch' AND t.status = 1";

/// The listed held tasks go back as they were, due at once, with no attempt: `?1` leases,
/// `?2` now.
pub(crate) const RELEASE_HELD: &str = "
UPDATE backstop_tasks AS t
SET lease_owner = NULL, lease_until = NULL, run_at = ?2, updated_at = ?2
FROM (SELECT value ->> 'id' AS id, value ->> 'epoch' AS epoch FROM json_each(?1)) AS c
WHERE t.id = unhex(c.id) AND t.epoch = c.epoch AND t.status = 0 AND t.lease_owner IS NOT NULL";

/// An id as hex, the form in which ids travel inside JSON parameters (`unhex()` in SQL).
pub(crate) fn hex_id(id: &TaskId) -> String {
    id.0.simple().to_string()
}

fn lease_json(leases: &[LeaseRef]) -> String {
    serde_json::Value::Array(
        leases
            .iter()
            .map(|l| json!({"id": hex_id(&l.id), "epoch": l.epoch}))
            .collect(),
    )
    .to_string()
}

impl Leases for SqliteStore {
    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>> {
        Box::pin(async move {
            let began = std::time::Instant::now();
            let mut w = self.inner.lock_writer().await?;
            crate::claim::claim(&mut w, &self.inner.stmts, &p, began).await
        })
    }

    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>> {
        Box::pin(async move {
            let began = std::time::Instant::now();
            let mut w = self.inner.lock_writer().await?;
            crate::complete::complete(&mut w, &self.inner.stmts, &p, began).await
        })
    }

    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            heartbeat(&mut w, &p).await
        })
    }

    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            release(&mut w, &p).await
        })
    }

    /// The one writer commits every claim of its own: riding a completion's saves the commit
    /// (measured: a limited drain 0.86 of the unlimited riding, 0.73 not).
    fn claims_ride_completions(&self) -> bool {
        true
    }
}

async fn heartbeat(
    conn: &mut SqliteConnection,
    p: &HeartbeatParams,
) -> Result<Vec<LeaseRef>, StoreError> {
    if p.leases.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let rows = sqlx::query(HEARTBEAT)
        .bind(lease_json(&p.leases))
        .bind(to_ms(p.lease_until))
        .bind(to_ms(p.now))
        .bind(&p.owner)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    let kept: HashSet<&[u8]> = rows.iter().map(|r| r.get("id")).collect();
    Ok(p.leases
        .iter()
        .filter(|l| !kept.contains(id_bytes(&l.id)))
        .copied()
        .collect())
}

/// Writes one `attempt` event per listed row (an attempt that ended without a report), then
/// moves each row to its listed status. `rows` is a JSON array of `{seq, status}`.
const END_ATTEMPTS: &str = "
INSERT INTO backstop_events (task_id, type, at, attempt, outcome, error, duration_ms, worker)
SELECT t.id, 'attempt', ?2, t.attempts, ?3, ?4 || coalesce(t.lease_owner, 'unknown'),
       ?2 - t.att_started_at, t.lease_owner
FROM json_each(?1) AS j JOIN backstop_tasks AS t ON t.seq = j.value ->> 'seq'";

pub(crate) const MOVE: &str = concat!(
    "
UPDATE backstop_tasks AS t
SET status = c.status, run_at = iif(c.status = 0, ?2, t.run_at),
    grp_live = ",
    crate::groups::grp_live_after!("c.status", "t."),
    ",
    reason = coalesce(c.reason, t.reason), last_error = coalesce(c.error, t.last_error),
    lease_owner = NULL, lease_until = NULL, updated_at = ?2,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
FROM (SELECT value ->> 'seq' AS seq, value ->> 'status' AS status, value ->> 'reason' AS reason,
             value ->> 'error' AS error
      FROM json_each(?1)) AS c
WHERE t.seq = c.seq"
);

/// Where a running row whose attempt ended without a report goes (`to` says, given whether
/// attempts are left): its status and its `{seq, status, reason, error}` move for [`MOVE`].
/// A row with no attempt left fails, with `why` in its reason and `error` as its last error.
pub(crate) fn ended_move(
    r: &SqliteRow,
    to: fn(bool) -> Transition,
    why: &str,
    error: &'static str,
) -> Result<(Status, serde_json::Value), StoreError> {
    let attempts: i64 = r.get("attempts");
    let max: i64 = r.get("max_attempts");
    let status = transition(Status::Running, to(attempts < max))
        .map_err(|e| StoreError::Database(Cause::new(e)))?;
    let failed = status == Status::Failed;
    Ok((
        status,
        json!({
            "seq": r.get::<i64, _>("seq"),
            "status": status_code(status),
            "reason": failed.then(|| format!("attempts exhausted ({attempts} of {max}); {why}")),
            "error": failed.then_some(error),
        }),
    ))
}

/// Records each listed row's running attempt as ended with `outcome` (the error names the
/// lease owner after `error_prefix`), then moves the rows to their listed status.
pub(crate) async fn end_attempts(
    conn: &mut SqliteConnection,
    moves: &str,
    now: i64,
    outcome: &str,
    error_prefix: &str,
) -> Result<(), StoreError> {
    sqlx::query(END_ATTEMPTS)
        .bind(moves)
        .bind(now)
        .bind(outcome)
        .bind(error_prefix)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    sqlx::query(MOVE)
        .bind(moves)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    // A row that failed where its kind skips failures ends its part in its group.
    sqlx::query(sqlx::AssertSqlSafe(crate::groups::PROMOTE_MOVED.as_str()))
        .bind(moves)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    Ok(())
}

async fn release(conn: &mut SqliteConnection, p: &ReleaseParams) -> Result<u64, StoreError> {
    if p.leases.is_empty() {
        return Ok(0);
    }
    let now = to_ms(p.now);
    let leases = lease_json(&p.leases);
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let held = sqlx::query(RELEASE_HELD)
        .bind(&leases)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
    let rows = sqlx::query(RELEASE_PICK)
        .bind(&leases)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    let mut moves = Vec::with_capacity(rows.len());
    for r in &rows {
        let (_, m) = ended_move(
            r,
            |attempts_left| Transition::Release { attempts_left },
            "the last attempt was interrupted at shutdown",
            "interrupted at shutdown",
        )?;
        moves.push(m);
    }
    if !moves.is_empty() {
        let moves = serde_json::Value::Array(moves).to_string();
        end_attempts(
            &mut tx,
            &moves,
            now,
            "interrupted",
            "released at shutdown by ",
        )
        .await?;
    }
    tx.commit().await.map_err(db_err)?;
    Ok(held + rows.len() as u64)
}
