//! What the reconciler and `backstop doctor` read about the ledger as a whole: the backlog
//! per kind, and pages for the conservation audit (the [`Backlog`] impl).

use crate::read::{assemble, event};
use crate::row::{TASK_COLUMNS, col, id_bytes, opt_time, parse_id, task, text, to_ms};
use crate::tx::db_err;
use crate::{Db, MysqlStore};
use backstop_core::StoreError;
use backstop_core::store::{
    AuditPage, AuditParams, Backlog, BacklogParams, BoxFuture, KindBacklog,
};
use backstop_core::{Event, TaskId};
use sqlx::{Connection, MySql, QueryBuilder};
use std::collections::HashMap;

/// Pending rows per kind, through the `(status, kind, run_at)` index.
const PENDING: &str = "
SELECT kind, COUNT(*) AS n, CAST(SUM(run_at <= ?) AS SIGNED) AS due,
       CAST(SUM(run_at < ?) AS SIGNED) AS overdue, MIN(run_at) AS oldest
FROM {tasks} WHERE status = 0 GROUP BY kind";

const RUNNING: &str = "SELECT kind, COUNT(*) AS n FROM {tasks} WHERE status = 1 GROUP BY kind";

const SAMPLE: &str = "
SELECT id FROM {tasks} WHERE status = 0 AND kind = ? AND run_at < ? ORDER BY run_at LIMIT ?";

impl Backlog for MysqlStore {
    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>> {
        Box::pin(async move { backlog(&self.db, &p).await })
    }

    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>> {
        Box::pin(async move { audit_page(&self.db, &p).await })
    }
}

async fn backlog(db: &Db, p: &BacklogParams) -> Result<Vec<KindBacklog>, StoreError> {
    let overdue_before = to_ms(p.overdue_before);
    let pending = sqlx::query(db.tables.q(PENDING))
        .bind(to_ms(p.now))
        .bind(overdue_before)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    let running = sqlx::query(db.tables.q(RUNNING))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    let pending = pending
        .iter()
        .map(|r| {
            Ok(KindBacklog::pending(
                text(r, "kind")?,
                col::<i64, _>(r, "n")? as u64,
                col::<i64, _>(r, "due")? as u64,
                col::<i64, _>(r, "overdue")? as u64,
                opt_time(r, "oldest")?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    let running = running
        .iter()
        .map(|r| Ok((text(r, "kind")?, col::<i64, _>(r, "n")? as u64)))
        .collect::<Result<_, StoreError>>()?;
    let mut out = KindBacklog::with_running(pending, running);
    for b in out.iter_mut().filter(|b| b.overdue > 0 && p.sample > 0) {
        let ids: Vec<Vec<u8>> = sqlx::query_scalar(db.tables.q(SAMPLE))
            .bind(&b.kind)
            .bind(overdue_before)
            .bind(p.sample as i64)
            .fetch_all(&db.pool)
            .await
            .map_err(db_err)?;
        b.overdue_sample = ids.iter().map(|i| parse_id(i)).collect::<Result<_, _>>()?;
    }
    Ok(out)
}

async fn audit_page(db: &Db, p: &AuditParams) -> Result<AuditPage, StoreError> {
    let after = p.after.as_ref().map(|a| id_bytes(a).to_vec());
    let sql = format!(
        "SELECT {TASK_COLUMNS}, origin, att_started_at, att_ended_at, att_outcome, att_error, \
         att_http_status, att_worker FROM {{tasks}} WHERE ? IS NULL OR id > ? ORDER BY id LIMIT ?"
    );
    // One consistent snapshot for the page and its events: a claim or completion committing
    // between the two reads could otherwise make a healthy task look inconsistent.
    let mut conn = db.pool.acquire().await.map_err(db_err)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    let mut tx = conn
        .begin_with("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await
        .map_err(db_err)?;
    let rows = sqlx::query(db.tables.q(&sql))
        .bind(after.clone())
        .bind(after)
        .bind(p.limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    if rows.is_empty() {
        tx.commit().await.map_err(db_err)?;
        return Ok(Vec::new());
    }
    // The page's events in one round trip.
    let mut qb: QueryBuilder<MySql> = QueryBuilder::new(db.tables.sql(
        "SELECT task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker, \
         actor, reason, origin FROM {events} WHERE task_id IN (",
    ));
    let mut ids = qb.separated(", ");
    for r in &rows {
        ids.push_bind(col::<Vec<u8>, _>(r, "id")?);
    }
    qb.push(") ORDER BY task_id, seq");
    let events = qb.build().fetch_all(&mut *tx).await.map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    let mut table: HashMap<TaskId, Vec<Event>> = HashMap::new();
    for r in &events {
        let id = parse_id(&col::<Vec<u8>, _>(r, "task_id")?)?;
        table.entry(id).or_default().push(event(r)?);
    }
    rows.iter()
        .map(|r| {
            let t = task(r)?;
            let events = assemble(r, table.remove(&t.id).unwrap_or_default())?;
            Ok((t, events))
        })
        .collect()
}
