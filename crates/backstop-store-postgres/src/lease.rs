//! A worker's leases: the [`Leases`] impl (claim and complete run in `claim.rs` and
//! `complete.rs`), heartbeats and release on shutdown; and the ends of attempts that ended
//! without a report, which rescue shares. Each status change is decided by
//! `backstop_core::transition`, then applied in one statement.
//!
//! Rows held by a worker (heartbeat, release) are locked in id order, as completions lock
//! them, so that these never deadlock with one another; rescue skips rows that are locked and
//! leaves them to its next round.

use crate::row::{col, count, duration_ms, opt_time};
use crate::types::{Id, Time};
use crate::{Db, PostgresStore, db_err};
use backstop_core::store::Cause;
use backstop_core::store::{
    BoxFuture, ClaimParams, ClaimedTask, CompleteParams, CompleteResult, HeartbeatParams, LeaseRef,
    Leases, ReleaseParams, Rescued,
};
use backstop_core::{Status, StoreError, Transition, transition};
use jiff::Timestamp;
use sqlx::PgConnection;
use sqlx::postgres::{PgBindIterExt, PgRow};
use std::collections::HashSet;

impl Leases for PostgresStore {
    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>> {
        Box::pin(async move { crate::claim::claim(&self.db, &p).await })
    }

    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>> {
        Box::pin(async move { crate::complete::complete(&self.db, &p).await })
    }

    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>> {
        Box::pin(async move { heartbeat(&self.db, &p).await })
    }

    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { release(&self.db, &p).await })
    }
}

/// Extends the listed leases still held by `$5`: `$1` ids, `$2` epochs, `$3` lease end,
/// `$4` now; a held task's `run_at` follows its lease. Returns the ids extended. The rows are found from the list, one id lookup each,
/// in id order (see `complete.rs` for why the join must go this way).
const HEARTBEAT: &str = "
WITH l AS (SELECT DISTINCT id, epoch FROM UNNEST($1::uuid[], $2::bigint[]) AS l(id, epoch)
           ORDER BY id),
held AS MATERIALIZED (
    SELECT t.seq FROM l
    CROSS JOIN LATERAL (
        SELECT t.seq, t.epoch, t.status, t.lease_owner FROM {schema}.tasks AS t
        WHERE t.id = l.id
        FOR UPDATE OFFSET 0
    ) AS t
    WHERE t.epoch = l.epoch AND t.status IN ('pending', 'running') AND t.lease_owner = $5
)
UPDATE {schema}.tasks AS t
SET lease_until = $3, updated_at = $4,
    run_at = CASE WHEN t.status = 'pending' THEN $3 ELSE t.run_at END
FROM held WHERE t.seq = held.seq
RETURNING t.id";

/// The listed leases (`$1` ids, `$2` epochs) still held, whoever holds them.
const RELEASE_PICK: &str = "
SELECT t.seq, t.id, t.kind, t.attempts, t.max_attempts, t.lease_owner, t.att_started_at, t.grp
FROM (SELECT DISTINCT id, epoch FROM UNNEST($1::uuid[], $2::bigint[]) AS l(id, epoch)
      ORDER BY id) AS l
CROSS JOIN LATERAL (
    SELECT seq, id, kind, attempts, max_attempts, lease_owner, att_started_at, grp, epoch, status
    FROM {schema}.tasks AS t
    WHERE t.id = l.id
    FOR UPDATE OFFSET 0
) AS t
WHERE t.epoch = l.epoch AND t.status = 'running'";

/// The listed held tasks (`$1` ids, `$2` epochs) go back as they were, due at `$3`, with no
/// attempt.
const RELEASE_HELD: &str = "
WITH l AS (SELECT DISTINCT id, epoch FROM UNNEST($1::uuid[], $2::bigint[]) AS l(id, epoch)
           ORDER BY id),
held AS MATERIALIZED (
    SELECT t.seq FROM l
    CROSS JOIN LATERAL (
        SELECT t.seq, t.epoch, t.status, t.lease_owner FROM {schema}.tasks AS t
        WHERE t.id = l.id
        FOR UPDATE OFFSET 0
    ) AS t
    WHERE t.epoch = l.epoch AND t.status = 'pending' AND t.lease_owner IS NOT NULL
)
UPDATE {schema}.tasks AS t
SET lease_owner = NULL, lease_until = NULL, run_at = $3, updated_at = $3
FROM held WHERE t.seq = held.seq";

/// Ends the running attempt of each listed row and moves the row to its listed status:
/// `$1` seqs, `$2` statuses, `$3` reasons and `$4` errors (kept when null), `$5` durations,
/// `$6` event errors; `$7` now, `$8` the attempt outcome.
const END_ATTEMPTS: &str = concat!(
    "
WITH m AS (
    SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                         $6::text[])
        AS m(seq, status, reason, error, duration_ms, event_error)
),
ended AS (
    INSERT INTO {schema}.events
        (task_id, type, at, attempt, outcome, error, duration_ms, worker)
    SELECT t.id, 'attempt', $7, t.attempts, $8, m.event_error, m.duration_ms, t.lease_owner
    FROM m JOIN {schema}.tasks AS t ON t.seq = m.seq
    ORDER BY t.seq
),
",
    crate::groups::lock_groups!("m"),
    "
UPDATE {schema}.tasks AS t
SET status = m.status, run_at = CASE WHEN m.status = 'pending' THEN $7 ELSE t.run_at END,
    reason = coalesce(m.reason, t.reason), last_error = coalesce(m.error, t.last_error),
    lease_owner = NULL, lease_until = NULL, updated_at = $7,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
FROM m WHERE t.seq = m.seq
  -- The groups first, in group order (see `complete`).
  AND (SELECT count(*) FROM groups) >= 0"
);

async fn heartbeat(db: &Db, p: &HeartbeatParams) -> Result<Vec<LeaseRef>, StoreError> {
    if p.leases.is_empty() {
        return Ok(Vec::new());
    }
    let kept: HashSet<Id> = sqlx::query_scalar::<_, Id>(db.schema.sql(HEARTBEAT))
        .bind(p.leases.iter().map(|l| Id(l.id)).bind_iter())
        .bind(p.leases.iter().map(|l| l.epoch).bind_iter())
        .bind(Time(p.lease_until))
        .bind(Time(p.now))
        .bind(&p.owner)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .into_iter()
        .collect();
    Ok(p.leases
        .iter()
        .filter(|l| !kept.contains(&Id(l.id)))
        .copied()
        .collect())
}

/// A running row picked to end its attempt without a report.
pub(crate) struct Held {
    pub(crate) seq: i64,
    pub(crate) rescued: Rescued,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    pub(crate) started: Option<Timestamp>,
}

pub(crate) fn held(r: &PgRow) -> Result<Held, StoreError> {
    Ok(Held {
        seq: col(r, "seq")?,
        rescued: Rescued {
            id: col::<Id>(r, "id")?.0,
            kind: col(r, "kind")?,
            // Decided by the caller.
            status: Status::Running,
            lease_owner: col(r, "lease_owner")?,
            group: col(r, "grp")?,
        },
        attempts: count(r, "attempts")?,
        max_attempts: count(r, "max_attempts")?,
        started: opt_time(r, "att_started_at")?,
    })
}

/// One row's move for [`END_ATTEMPTS`].
pub(crate) struct Move<'a> {
    pub(crate) held: &'a Held,
    pub(crate) status: Status,
    pub(crate) reason: Option<String>,
    pub(crate) error: Option<&'static str>,
    pub(crate) event_error: String,
}

impl<'a> Move<'a> {
    /// Where `held` goes now that its attempt ended without a report (`to` says, given
    /// whether attempts are left): a row with no attempt left fails, with `why` in its reason
    /// and `error` as its last error.
    pub(crate) fn ended(
        held: &'a Held,
        to: fn(bool) -> Transition,
        why: &str,
        error: &'static str,
        event_error: String,
    ) -> Result<Self, StoreError> {
        let status = transition(Status::Running, to(held.attempts < held.max_attempts))
            .map_err(|e| StoreError::Database(Cause::new(e)))?;
        let failed = status == Status::Failed;
        Ok(Move {
            held,
            status,
            reason: failed.then(|| {
                format!(
                    "attempts exhausted ({} of {}); {why}",
                    held.attempts, held.max_attempts
                )
            }),
            error: failed.then_some(error),
            event_error,
        })
    }
}

pub(crate) async fn end_attempts(
    conn: &mut PgConnection,
    db: &Db,
    moves: &[Move<'_>],
    now: Timestamp,
    outcome: &str,
) -> Result<(), StoreError> {
    sqlx::query(db.schema.sql(END_ATTEMPTS))
        .bind(moves.iter().map(|m| m.held.seq).bind_iter())
        .bind(moves.iter().map(|m| m.status.as_str()).bind_iter())
        .bind(moves.iter().map(|m| m.reason.as_deref()).bind_iter())
        .bind(moves.iter().map(|m| m.error).bind_iter())
        .bind(
            moves
                .iter()
                .map(|m| m.held.started.map(|s| duration_ms(s, now)))
                .bind_iter(),
        )
        .bind(moves.iter().map(|m| m.event_error.as_str()).bind_iter())
        .bind(Time(now))
        .bind(outcome)
        .execute(conn)
        .await
        .map_err(db_err)?;
    Ok(())
}

pub(crate) fn owner(h: &Held) -> &str {
    h.rescued.lease_owner.as_deref().unwrap_or("unknown")
}

async fn release(db: &Db, p: &ReleaseParams) -> Result<u64, StoreError> {
    if p.leases.is_empty() {
        return Ok(0);
    }
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let released_held = sqlx::query(db.schema.sql(RELEASE_HELD))
        .bind(p.leases.iter().map(|l| Id(l.id)).bind_iter())
        .bind(p.leases.iter().map(|l| l.epoch).bind_iter())
        .bind(Time(p.now))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
    let rows = sqlx::query(db.schema.sql(RELEASE_PICK))
        .bind(p.leases.iter().map(|l| Id(l.id)).bind_iter())
        .bind(p.leases.iter().map(|l| l.epoch).bind_iter())
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    // The same lease listed twice is one row.
    let mut seen = HashSet::new();
    let picked = rows
        .iter()
        .map(held)
        .filter(|h| h.as_ref().map_or(true, |h| seen.insert(h.seq)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut moves = Vec::with_capacity(picked.len());
    for h in &picked {
        moves.push(Move::ended(
            h,
            |attempts_left| Transition::Release { attempts_left },
            "the last attempt was interrupted at shutdown",
            "interrupted at shutdown",
            format!("released at shutdown by {}", owner(h)),
        )?);
    }
    if !moves.is_empty() {
        end_attempts(&mut tx, db, &moves, p.now, "interrupted").await?;
    }
    tx.commit().await.map_err(db_err)?;
    Ok(released_held + picked.len() as u64)
}
