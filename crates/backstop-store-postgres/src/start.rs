//! Start: the attempts of held tasks begin, in one statement inside the completion's
//! transaction (see `complete`). The rows are found from the
//! list, one id lookup each, locked in id order (as completions and heartbeats lock them, so
//! that none of these deadlock), and fenced by epoch, the pending status and the hold's owner.

use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::{LeaseRef, StartParams};
use sqlx::PgConnection;
use sqlx::postgres::PgBindIterExt;
use std::collections::HashSet;

/// `$1` ids, `$2` epochs, `$3` the `run_at` each had before it was held, `$4` owner, `$5`
/// lease ends, `$6` now. Returns the ids started.
const START: &str = "
WITH l AS (SELECT DISTINCT ON (id) id, epoch, run_at, lease_until
           FROM UNNEST($1::uuid[], $2::bigint[], $3::timestamptz[], $5::timestamptz[])
               AS l(id, epoch, run_at, lease_until)
           ORDER BY id),
held AS MATERIALIZED (
    SELECT t.seq, l.run_at, l.lease_until FROM l
    CROSS JOIN LATERAL (
        SELECT t.seq, t.epoch, t.status, t.lease_owner FROM {schema}.tasks AS t
        WHERE t.id = l.id
        FOR UPDATE OFFSET 0
    ) AS t
    WHERE t.epoch = l.epoch AND t.status = 'pending' AND t.lease_owner = $4
)
UPDATE {schema}.tasks AS t
SET status = 'running', attempts = t.attempts + 1, lease_until = held.lease_until,
    run_at = held.run_at,
    updated_at = $6, att_started_at = $6, att_worker = $4
FROM held WHERE t.seq = held.seq
RETURNING t.id";

/// Starts the held tasks of `p` on `conn` (the completion's transaction); returns the leases
/// no longer held.
pub(crate) async fn apply(
    db: &Db,
    conn: &mut PgConnection,
    p: &StartParams,
) -> Result<Vec<LeaseRef>, StoreError> {
    let started: HashSet<Id> = sqlx::query_scalar::<_, Id>(db.schema.sql(START))
        .bind(p.tasks.iter().map(|t| Id(t.lease.id)).bind_iter())
        .bind(p.tasks.iter().map(|t| t.lease.epoch).bind_iter())
        .bind(p.tasks.iter().map(|t| Time(t.run_at)).bind_iter())
        .bind(&p.owner)
        .bind(p.tasks.iter().map(|t| Time(t.lease_until)).bind_iter())
        .bind(Time(p.now))
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)?
        .into_iter()
        .collect();
    Ok(p.tasks
        .iter()
        .map(|t| t.lease)
        .filter(|l| !started.contains(&Id(l.id)))
        .collect())
}
