//! Retention (the [`Retention`] impl): deletes old finished tasks of one status, and their events. The candidates are
//! picked on a reader connection, so that the scan never holds the writer; the delete then
//! checks each row again under the write lock (a manual retry may have moved it meanwhile).

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::to_ms;
use crate::row::status_code;
use backstop_core::StoreError;
use backstop_core::store::{BoxFuture, PruneParams, Retention};
use sqlx::Connection;

/// Tasks of status `?1` last changed before `?2`, oldest first, at most `?3`.
const PICK: &str = "
SELECT seq FROM backstop_tasks WHERE status = ?1 AND updated_at < ?2 ORDER BY seq LIMIT ?3";

/// The events of the tasks of the `seq` list `?1` that still qualify (status `?2`, changed
/// before `?3`).
const DELETE_EVENTS: &str = "
DELETE FROM backstop_events WHERE task_id IN (
    SELECT id FROM backstop_tasks
    WHERE seq IN (SELECT value FROM json_each(?1)) AND status = ?2 AND updated_at < ?3)";

/// Those tasks.
const DELETE_TASKS: &str = "
DELETE FROM backstop_tasks
WHERE seq IN (SELECT value FROM json_each(?1)) AND status = ?2 AND updated_at < ?3";

impl Retention for SqliteStore {
    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { prune(&self.inner, &p).await })
    }
}

pub(crate) async fn prune(inner: &crate::Inner, p: &PruneParams) -> Result<u64, StoreError> {
    if p.limit == 0 {
        return Ok(0);
    }
    let status = status_code(p.status.status());
    let before = to_ms(p.before);
    let seqs: Vec<i64> = sqlx::query_scalar(PICK)
        .bind(status)
        .bind(before)
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&inner.readers)
        .await
        .map_err(db_err)?;
    if seqs.is_empty() {
        return Ok(0);
    }
    let seqs = serde_json::Value::from(seqs).to_string();
    let mut w = inner.lock_writer().await?;
    let mut tx = w.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    sqlx::query(DELETE_EVENTS)
        .bind(&seqs)
        .bind(status)
        .bind(before)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let deleted = sqlx::query(DELETE_TASKS)
        .bind(&seqs)
        .bind(status)
        .bind(before)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
    tx.commit().await.map_err(db_err)?;
    Ok(deleted)
}
