//! Expiry: pending tasks past their business deadline (`expires_at`) are compensated with
//! reason `expired`, never run. One statement picks them (skipping rows another transaction
//! holds: a claim in progress wins), records each on its timeline and moves it.

use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::store::ExpireParams;
use backstop_core::{Status, StoreError, Transition, transition};

/// Compensates pending tasks past their deadline (`$1` now), earliest first, at most `$2`,
/// with reason `$3`, to status `$4`, and records each on its timeline.
const EXPIRE: &str = "
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
)
UPDATE {schema}.tasks AS t
SET status = $4, reason = $3, lease_owner = NULL, lease_until = NULL, updated_at = $1,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
FROM due WHERE t.seq = due.seq";

pub(crate) async fn expire(db: &Db, p: &ExpireParams) -> Result<u64, StoreError> {
    if p.limit == 0 {
        return Ok(0);
    }
    let compensated = transition(Status::Pending, Transition::Expire)
        .map_err(|e| StoreError::Database(e.to_string()))?;
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
