//! Retention: deletes old finished tasks of one status, and their events. Candidates are
//! picked by a plain read (no locks while scanning), then locked by primary key and checked
//! again (a manual retry may have moved one meanwhile) before they and their events go.
//!
//! The [`Retention`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::row::{col, status_code, to_ms};
use crate::shapes::{padded, padded_lists, repeat};
use crate::tx::{Fail, Retry, transaction};
use backstop_core::StoreError;
use backstop_core::store::PruneParams;
use backstop_core::store::{BoxFuture, Retention};
use sqlx::MySqlConnection;

/// Tasks of a status last changed before a time, oldest first. Binds: status, before, limit.
const PICK: &str = "
SELECT seq FROM {tasks} WHERE status = ? AND updated_at < ? ORDER BY seq LIMIT ?";

/// The listed tasks that still qualify, locked. Binds: status, before, then the `seq` list.
const LOCK: &str = "
SELECT seq, id FROM {tasks} WHERE status = ? AND updated_at < ? AND seq IN ";

impl Retention for MysqlStore {
    fn prune(&self, p: PruneParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { prune(&self.db, &p).await })
    }
}

pub(crate) async fn prune(db: &Db, p: &PruneParams) -> Result<u64, StoreError> {
    if p.limit == 0 {
        return Ok(0);
    }
    transaction!(db, Retry::Locks, |conn| prune_some(db, conn, p).await)
}

async fn prune_some(db: &Db, conn: &mut MySqlConnection, p: &PruneParams) -> Result<u64, Fail> {
    let status = status_code(p.status.status());
    let before = to_ms(p.before);
    let picked: Vec<i64> = sqlx::query_scalar(db.tables.q(PICK))
        .bind(status)
        .bind(before)
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
    let mut deleted = 0;
    for list in padded_lists(&picked) {
        let marks = repeat("?", ", ", list.len());
        let mut q = sqlx::query(
            db.tables
                .q(&format!("{LOCK}({marks}) FOR UPDATE SKIP LOCKED")),
        )
        .bind(status)
        .bind(before);
        for seq in &list {
            q = q.bind(seq);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        if rows.is_empty() {
            continue;
        }
        let mut seqs = Vec::with_capacity(rows.len());
        let mut ids = Vec::with_capacity(rows.len());
        for r in &rows {
            seqs.push(col::<i64, _>(r, "seq")?);
            ids.push(col::<Vec<u8>, _>(r, "id")?);
        }
        // Padded like the pick, by repeating the last one, so the statements keep few shapes.
        let n = padded(rows.len());
        seqs.resize(n, seqs[seqs.len() - 1]);
        ids.resize(n, ids[ids.len() - 1].clone());
        let marks = repeat("?", ", ", n);
        let mut q = sqlx::query(db.tables.q(&format!(
            "DELETE FROM {{events}} WHERE task_id IN ({marks})"
        )));
        for id in &ids {
            q = q.bind(id);
        }
        q.execute(&mut *conn).await?;
        let mut q = sqlx::query(
            db.tables
                .q(&format!("DELETE FROM {{tasks}} WHERE seq IN ({marks})")),
        );
        for seq in &seqs {
            q = q.bind(seq);
        }
        deleted += q.execute(&mut *conn).await?.rows_affected();
    }
    Ok(deleted)
}
