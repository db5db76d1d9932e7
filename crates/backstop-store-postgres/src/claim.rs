//! Claim: lease due pending tasks of one kind, bumping `attempts` and the fencing `epoch`, in
//! one statement.
//!
//! The due rows are picked through the partial index of pending tasks with `FOR UPDATE SKIP
//! LOCKED`, so concurrent claimers (in this process or others) each take different rows and
//! never wait for one another. The pick is a `MATERIALIZED` CTE rather than a subquery in
//! `FROM`: that way it runs exactly once whatever plan the join gets (a re-scanned locking
//! subquery could lock more rows than the limit).

use crate::row::{col, count, opt_time, time};
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::{ClaimParams, ClaimedTask};

/// `$1` kind, `$2` now, `$3` owner, `$4` lease end, `$5` limit, `$6` the kind's attempt budget
/// (for tasks stored without one: max_attempts 0).
const CLAIM: &str = "
WITH due AS MATERIALIZED (
    SELECT seq FROM {schema}.tasks
    WHERE status = 'pending' AND kind = $1 AND run_at <= $2
    ORDER BY run_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.tasks AS t
SET status = 'running', attempts = t.attempts + 1, epoch = t.epoch + 1,
    lease_owner = $3, lease_until = $4, updated_at = $2,
    att_started_at = $2, att_worker = $3,
    max_attempts = CASE t.max_attempts WHEN 0 THEN $6 ELSE t.max_attempts END
FROM due
WHERE t.seq = due.seq
RETURNING t.seq, t.id, t.key, t.payload, t.attempts, t.max_attempts, t.epoch, t.run_at,
          t.expires_at, t.traceparent, t.created_at";

pub(crate) async fn claim(db: &Db, p: &ClaimParams) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(db.schema.sql(CLAIM))
        .bind(&p.kind)
        .bind(Time(p.now))
        .bind(&p.owner)
        .bind(Time(p.lease_until))
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .bind(i64::from(p.max_attempts))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    let mut claimed = Vec::with_capacity(rows.len());
    for r in &rows {
        let seq: i64 = col(r, "seq")?;
        let task = ClaimedTask {
            id: col::<Id>(r, "id")?.0,
            kind: p.kind.clone(),
            key: col(r, "key")?,
            payload: col(r, "payload")?,
            attempt: count(r, "attempts")?,
            max_attempts: count(r, "max_attempts")?,
            epoch: col(r, "epoch")?,
            run_at: time(r, "run_at")?,
            expires_at: opt_time(r, "expires_at")?,
            traceparent: col(r, "traceparent")?,
            created_at: time(r, "created_at")?,
        };
        claimed.push((seq, task));
    }
    // RETURNING follows no particular order: oldest run_at first, as promised.
    claimed.sort_by_key(|(seq, t)| (t.run_at, *seq));
    Ok(claimed.into_iter().map(|(_, t)| t).collect())
}
