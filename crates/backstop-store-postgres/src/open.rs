//! The open tasks (`tasks_open`, migration 10): one narrow row per task that is pending,
//! running or failed, which claims, rescue, expiry and the dead-letter list read instead of
//! partial indexes on `tasks`, so that the ledger row's claim and completion are HOT updates.
//!
//! The hot paths (claim, start, completion, heartbeat, release, rescue, expiry) keep the open
//! row in the statement that changes the ledger row; inserts reach it through the
//! `tasks_open_created` trigger. The rarer manual actions call [`sync`] after their change, in
//! their transaction, with the ledger row still locked. [`MISMATCHES`] is what tests check the
//! invariant with.

use crate::types::Id;
use crate::{Db, db_err};
use backstop_core::{StoreError, TaskId};
use sqlx::PgConnection;

/// Makes the open rows of the tasks `$1` (ids) agree with their ledger rows: present with the
/// same columns while pending, running or failed, absent otherwise.
const SYNC: &str = "
WITH t AS (
    SELECT seq, kind, status, run_at, lease_until, expires_at FROM {schema}.tasks
    WHERE id = ANY($1::uuid[])
),
closed AS (
    DELETE FROM {schema}.tasks_open AS o USING t
    WHERE o.seq = t.seq AND t.status NOT IN ('pending', 'running', 'failed')
)
INSERT INTO {schema}.tasks_open (seq, kind, status, run_at, lease_until, expires_at)
SELECT seq, kind, status, run_at, lease_until, expires_at FROM t
WHERE status IN ('pending', 'running', 'failed')
ON CONFLICT (seq) DO UPDATE
SET kind = EXCLUDED.kind, status = EXCLUDED.status, run_at = EXCLUDED.run_at,
    lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at";

/// How many tasks break the invariant: open ones without their open row or with other values,
/// open rows of ended or deleted tasks.
pub(crate) const MISMATCHES: &str = "
SELECT count(*) FROM {schema}.tasks AS t
FULL JOIN {schema}.tasks_open AS o ON o.seq = t.seq
WHERE (t.status IN ('pending', 'running', 'failed')) IS DISTINCT FROM (o.seq IS NOT NULL)
   OR (o.seq IS NOT NULL AND (o.kind, o.status, o.run_at, o.lease_until, o.expires_at)
       IS DISTINCT FROM (t.kind, t.status, t.run_at, t.lease_until, t.expires_at))";

/// Brings the open rows of `ids` in line with their ledger rows, on `conn` (the transaction
/// that changed them, which holds their locks).
pub(crate) async fn sync(
    db: &Db,
    conn: &mut PgConnection,
    ids: &[TaskId],
) -> Result<(), StoreError> {
    sqlx::query(db.schema.sql(SYNC))
        .bind(ids.iter().copied().map(Id).collect::<Vec<_>>())
        .execute(conn)
        .await
        .map_err(db_err)?;
    Ok(())
}
