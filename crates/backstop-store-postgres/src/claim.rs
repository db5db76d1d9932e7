//! Claim: lease due pending tasks of one kind, bumping the fencing `epoch`, in one statement;
//! the first `start` of them start their attempt (`attempts` + 1), the rest are held (see
//! [`ClaimParams`]).
//!
//! The due rows are picked through the partial index of pending tasks with `FOR UPDATE SKIP
//! LOCKED`, so concurrent claimers (in this process or others) each take different rows and
//! never wait for one another. The pick is a `MATERIALIZED` CTE rather than a subquery in
//! `FROM`: that way it runs exactly once whatever plan the join gets (a re-scanned locking
//! subquery could lock more rows than the limit).
//!
//! The update joins the picked rows as an `unnest` of arrays (`picked`) rather than as the
//! CTE itself: the planner estimates the `unnest` of an array it cannot see at a handful of
//! rows, so it looks each row up by primary key. Joined to the CTE, whose estimate is the
//! `LIMIT` (1,000), it preferred hashing a sequential scan of the whole table once statistics
//! called the table small (measured: a claim of 1,000 spent 30 of its 40 ms scanning 100,000
//! rows to update 1,000).

use crate::row::{col, count, opt_time, time};
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::group::OnFailure;
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::PgConnection;

/// `$1` kind, `$2` now, `$3` owner, `$4` lease end, `$5` limit, `$6` the kind's attempt budget
/// (for tasks stored without one: max_attempts 0), `$7` how many start (oldest `run_at`
/// first); the rest are held: still pending, `run_at` moved to the lease's end. `$8` whether
/// the kind skips a failed task of a group, written on each grouped row claimed (whether it
/// holds its group once failed; see 0013_groups). RETURNING gives the `run_at` from before the
/// claim, the attempt number the task runs, the last cursor an attempt saved and the group.
/// Parked tasks are never picked: their `run_at` is in the year 9999.
const CLAIM: &str = "
WITH due AS MATERIALIZED (
    SELECT seq, run_at FROM {schema}.tasks
    WHERE status = 'pending' AND kind = $1 AND run_at <= $2
    ORDER BY run_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
),
ranked AS (SELECT seq, run_at, row_number() OVER (ORDER BY run_at, seq) <= $7 AS go FROM due),
picked AS (
    SELECT * FROM unnest(ARRAY(SELECT seq FROM ranked ORDER BY seq),
                         ARRAY(SELECT run_at FROM ranked ORDER BY seq),
                         ARRAY(SELECT go FROM ranked ORDER BY seq)) AS p(seq, run_at, go)
)
UPDATE {schema}.tasks AS t
SET status = CASE WHEN r.go THEN 'running' ELSE t.status END,
    attempts = t.attempts + CASE WHEN r.go THEN 1 ELSE 0 END,
    epoch = t.epoch + 1,
    lease_owner = $3, lease_until = $4, updated_at = $2,
    run_at = CASE WHEN r.go THEN t.run_at ELSE $4 END,
    att_started_at = CASE WHEN r.go THEN $2 ELSE t.att_started_at END,
    att_worker = CASE WHEN r.go THEN $3 ELSE t.att_worker END,
    max_attempts = CASE t.max_attempts WHEN 0 THEN $6 ELSE t.max_attempts END,
    grp_skip = CASE WHEN t.grp IS NULL THEN t.grp_skip ELSE $8 END
FROM picked AS r
WHERE t.seq = r.seq
RETURNING t.seq, t.id, t.key, t.payload, t.attempts + CASE WHEN r.go THEN 0 ELSE 1 END AS attempt,
          t.max_attempts, t.epoch, r.run_at, t.expires_at, t.traceparent, t.created_at,
          t.checkpoint, r.go AS started, t.grp";

pub(crate) async fn claim(db: &Db, p: &ClaimParams) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    if let Some(limit) = &p.per_key {
        return crate::claim_limited::claim(db, p, limit).await;
    }
    let mut conn = db.pool.acquire().await.map_err(db_err)?;
    unlimited(db, &mut conn, p).await
}

/// Claims per `p` in the open transaction `tx` (a completion's, after its outcomes).
pub(crate) async fn claim_in(
    db: &Db,
    tx: &mut PgConnection,
    p: &ClaimParams,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    match &p.per_key {
        Some(limit) => crate::claim_limited::claim_in(db, tx, p, limit, began).await,
        None => unlimited(db, tx, p).await,
    }
}

/// A claim of a kind without limits per key: one statement.
async fn unlimited(
    db: &Db,
    conn: &mut PgConnection,
    p: &ClaimParams,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let rows = sqlx::query(db.schema.sql(CLAIM))
        .bind(&p.kind)
        .bind(Time(p.now))
        .bind(&p.owner)
        .bind(Time(p.lease_until))
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .bind(i64::from(p.max_attempts))
        .bind(i64::try_from(p.start).unwrap_or(i64::MAX))
        .bind(p.on_group_failure == OnFailure::Skip)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)?;
    claimed_rows(&rows, p)
}

/// The tasks a claim's `RETURNING` rows are (the columns of [`CLAIM`]'s), oldest `run_at` first.
pub(crate) fn claimed_rows(
    rows: &[sqlx::postgres::PgRow],
    p: &ClaimParams,
) -> Result<Vec<ClaimedTask>, StoreError> {
    let mut claimed = Vec::with_capacity(rows.len());
    for r in rows {
        let seq: i64 = col(r, "seq")?;
        let task = ClaimedTask {
            id: col::<Id>(r, "id")?.0,
            kind: p.kind.clone(),
            key: col(r, "key")?,
            payload: col(r, "payload")?,
            attempt: count(r, "attempt")?,
            max_attempts: count(r, "max_attempts")?,
            epoch: col(r, "epoch")?,
            run_at: time(r, "run_at")?,
            expires_at: opt_time(r, "expires_at")?,
            traceparent: col(r, "traceparent")?,
            created_at: time(r, "created_at")?,
            checkpoint: col(r, "checkpoint")?,
            started: col(r, "started")?,
            group: col(r, "grp")?,
        };
        claimed.push((seq, task));
    }
    // RETURNING follows no particular order: oldest run_at first, as promised.
    claimed.sort_by_key(|(seq, t)| (t.run_at, *seq));
    Ok(claimed.into_iter().map(|(_, t)| t).collect())
}
