//! Retention: deletes old finished tasks of one status, and their events, in one statement.
//! Rows another transaction holds (a manual retry in progress) are skipped; a locked row is
//! checked again on its newest version, so one that was retried meanwhile is kept.
//!
//! The [`Retention`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::PruneParams;
use backstop_core::store::{BoxFuture, Retention};

/// Deletes the tasks of status `$1` last changed before `$2`, oldest first, at most `$3`,
/// and their events.
const PRUNE: &str = "
WITH doomed AS MATERIALIZED (
    SELECT seq, id FROM {schema}.tasks
    WHERE status = $1 AND updated_at < $2
    ORDER BY seq
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
timelines AS (
    DELETE FROM {schema}.events AS e USING doomed WHERE e.task_id = doomed.id
)
DELETE FROM {schema}.tasks AS t USING doomed WHERE t.seq = doomed.seq";

impl Retention for PostgresStore {
    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { prune(&self.db, &p).await })
    }
}

pub(crate) async fn prune(db: &Db, p: &PruneParams) -> Result<u64, StoreError> {
    if p.limit == 0 {
        return Ok(0);
    }
    let done = sqlx::query(db.schema.sql(PRUNE))
        .bind(p.status.status().as_str())
        .bind(Time(p.before))
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected())
}
