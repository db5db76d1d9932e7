//! The reconciler's repairs (the [`Rescue`] impl): rescue of running tasks whose lease
//! expired (their attempts end as `lease_expired`, the rows locked skipped and left to the
//! next round), and expiry: pending tasks past their business deadline (`expires_at`) are
//! compensated with reason `expired`, never run. One statement picks them (skipping rows
//! another transaction holds: a claim in progress wins), records each on its timeline and
//! moves it.

use crate::lease::{Move, end_attempts, held, owner};
use crate::types::Time;
use crate::{Db, PostgresStore, db_err};
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, ExpireParams, Rescue, RescueParams, Rescued};
use backstop_core::{Status, StoreError, Transition, transition};

/// Running tasks whose lease expired before `$1`, oldest lease first, at most `$2`.
const RESCUE_PICK: &str = "
SELECT seq, id, kind, attempts, max_attempts, lease_owner, att_started_at, grp
FROM {schema}.tasks
WHERE status = 'running' AND lease_until < $1
ORDER BY lease_until
LIMIT $2
FOR UPDATE SKIP LOCKED";

/// Compensates pending tasks past their deadline (`$1` now), earliest first, at most `$2`,
/// with reason `$3`, to status `$4`, and records each on its timeline.
const EXPIRE: &str = concat!(
    "
WITH due AS MATERIALIZED (
    SELECT seq FROM {schema}.tasks
    WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= $1
    ORDER BY expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
recorded AS (
    INSERT INTO {schema}.events (task_id, type, at, reason)
    SELECT t.id, 'expired', $1, $3
    FROM due JOIN {schema}.tasks AS t ON t.seq = due.seq
    ORDER BY t.seq
),
",
    crate::groups::lock_groups!("due"),
    "
UPDATE {schema}.tasks AS t
SET status = $4, reason = $3, lease_owner = NULL, lease_until = NULL, updated_at = $1,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
FROM due WHERE t.seq = due.seq
  -- The groups first, in group order (see `complete`).
  AND (SELECT count(*) FROM groups) >= 0"
);

impl Rescue for PostgresStore {
    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>> {
        Box::pin(async move { rescue(&self.db, &p).await })
    }

    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { expire(&self.db, &p).await })
    }
}

async fn expire(db: &Db, p: &ExpireParams) -> Result<u64, StoreError> {
    if p.limit == 0 {
        return Ok(0);
    }
    let compensated = transition(Status::Pending, Transition::Expire)
        .map_err(|e| StoreError::Database(Cause::new(e)))?;
    let done = sqlx::query(db.schema.sql(EXPIRE))
        .bind(Time(p.now))
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .bind("expired")
        .bind(compensated.as_str())
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected())
}

async fn rescue(db: &Db, p: &RescueParams) -> Result<Vec<Rescued>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let rows = sqlx::query(db.schema.sql(RESCUE_PICK))
        .bind(Time(p.now))
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let picked = rows.iter().map(held).collect::<Result<Vec<_>, _>>()?;
    let mut moves = Vec::with_capacity(picked.len());
    for h in &picked {
        moves.push(Move::ended(
            h,
            |attempts_left| Transition::Rescue { attempts_left },
            "the last lease expired",
            "lease expired",
            format!("lease expired; held by {}", owner(h)),
        )?);
    }
    end_attempts(&mut tx, db, &moves, p.now, "lease_expired").await?;
    tx.commit().await.map_err(db_err)?;
    Ok(moves
        .into_iter()
        .map(|m| Rescued {
            status: m.status,
            ..m.held.rescued.clone()
        })
        .collect())
}
