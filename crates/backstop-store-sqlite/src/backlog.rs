//! What the reconciler and `backstop doctor` read about the ledger as a whole: the backlog
//! per kind, and pages for the conservation audit (the [`Backlog`] impl).

use crate::SqliteStore;
use crate::db_err;
use crate::read::timeline_on;
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::{id_bytes, parse_id, task, task_columns};
use backstop_core::StoreError;
use backstop_core::store::{
    AuditPage, AuditParams, Backlog, BacklogParams, BoxFuture, KindBacklog,
};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;

impl Backlog for SqliteStore {
    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>> {
        Box::pin(async move { backlog(&self.inner.readers, &p).await })
    }

    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>> {
        Box::pin(async move { audit_page(&self.inner.readers, &p).await })
    }
}

async fn backlog(pool: &SqlitePool, p: &BacklogParams) -> Result<Vec<KindBacklog>, StoreError> {
    let now = to_ms(p.now);
    let overdue_before = to_ms(p.overdue_before);
    // Both walk a partial index (due: pending rows by kind and run_at; leased: running rows).
    let pending = sqlx::query(
        "SELECT kind, count(*) AS n, sum(run_at <= ?1) AS due, sum(run_at < ?2) AS overdue,
                min(run_at) AS oldest
         FROM backstop_tasks INDEXED BY backstop_tasks_due WHERE status = 0 GROUP BY kind",
    )
    .bind(now)
    .bind(overdue_before)
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    let running = sqlx::query(
        "SELECT kind, count(*) AS n FROM backstop_tasks INDEXED BY backstop_tasks_leased
         WHERE status = 1 GROUP BY kind",
    )
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    let pending = pending
        .iter()
        .map(|r| {
            KindBacklog::pending(
                r.get("kind"),
                r.get::<i64, _>("n") as u64,
                r.get::<i64, _>("due") as u64,
                r.get::<i64, _>("overdue") as u64,
                r.get::<Option<i64>, _>("oldest").map(from_ms),
            )
        })
        .collect();
    let running = running
        .iter()
        .map(|r| (r.get("kind"), r.get::<i64, _>("n") as u64))
        .collect();
    let mut out = KindBacklog::with_running(pending, running);
    for b in out.iter_mut().filter(|b| b.overdue > 0 && p.sample > 0) {
        let ids: Vec<Vec<u8>> = sqlx::query_scalar(
            "SELECT id FROM backstop_tasks
             WHERE status = 0 AND kind = ?1 AND run_at < ?2 ORDER BY run_at LIMIT ?3",
        )
        .bind(&b.kind)
        .bind(overdue_before)
        .bind(p.sample as i64)
        .fetch_all(pool)
        .await
        .map_err(db_err)?;
        b.overdue_sample = ids.iter().map(|i| parse_id(i)).collect::<Result<_, _>>()?;
    }
    Ok(out)
}

async fn audit_page(pool: &SqlitePool, p: &AuditParams) -> Result<AuditPage, StoreError> {
    let after = p.after.as_ref().map(|a| id_bytes(a).to_vec());
    // One read transaction: the page and every timeline come from one snapshot (WAL), so a
    // claim or completion committing meanwhile cannot make a healthy task look inconsistent.
    let mut tx = pool.begin().await.map_err(db_err)?;
    let rows = sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM backstop_tasks WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2"
    ))
    .bind(after)
    .bind(p.limit as i64)
    .fetch_all(&mut *tx)
    .await
    .map_err(db_err)?;
    let mut page = Vec::with_capacity(rows.len());
    for r in &rows {
        let t = task(r)?;
        let events = timeline_on(&mut tx, t.id).await?;
        page.push((t, events));
    }
    tx.commit().await.map_err(db_err)?;
    Ok(page)
}
