//! What the reconciler and `backstop doctor` read about the ledger as a whole: the backlog
//! per kind, and pages for the conservation audit (the [`Backlog`] impl).

use crate::read::{assemble, event};
use crate::row::{col, opt_time, task, task_columns};
use crate::types::{Id, Time};
use crate::{Db, PostgresStore, db_err};
use backstop_core::Event;
use backstop_core::store::{
    AuditPage, AuditParams, Backlog, BacklogParams, BoxFuture, KindBacklog,
};
use backstop_core::{StoreError, TaskId};
use std::collections::HashMap;

/// Pending rows per kind, through the partial index of pending tasks.
const PENDING: &str = "
SELECT kind, count(*) AS n, count(*) FILTER (WHERE run_at <= $1) AS due,
       count(*) FILTER (WHERE run_at < $2) AS overdue, min(run_at) AS oldest
FROM {schema}.tasks WHERE status = 'pending' GROUP BY kind";

const RUNNING: &str =
    "SELECT kind, count(*) AS n FROM {schema}.tasks WHERE status = 'running' GROUP BY kind";

const SAMPLE: &str = "
SELECT id FROM {schema}.tasks
WHERE status = 'pending' AND kind = $1 AND run_at < $2 ORDER BY run_at LIMIT $3";

const PAGE: &str = concat!(
    "SELECT ",
    task_columns!(),
    ", origin, att_started_at, att_ended_at, att_outcome, att_error, att_http_status, att_worker",
    " FROM {schema}.tasks WHERE $1::uuid IS NULL OR id > $1 ORDER BY id LIMIT $2"
);

/// The events of a page's tasks, in one round trip.
const PAGE_EVENTS: &str = "
SELECT task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker, actor, reason,
       origin
FROM {schema}.events WHERE task_id = ANY($1) ORDER BY task_id, seq";

impl Backlog for PostgresStore {
    fn backlog(&self, p: BacklogParams) -> BoxFuture<'_, Result<Vec<KindBacklog>, StoreError>> {
        Box::pin(async move { backlog(&self.db, &p).await })
    }

    fn audit_page(&self, p: AuditParams) -> BoxFuture<'_, Result<AuditPage, StoreError>> {
        Box::pin(async move { audit_page(&self.db, &p).await })
    }
}

async fn backlog(db: &Db, p: &BacklogParams) -> Result<Vec<KindBacklog>, StoreError> {
    let pending = sqlx::query(db.schema.sql(PENDING))
        .bind(Time(p.now))
        .bind(Time(p.overdue_before))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    let running = sqlx::query(db.schema.sql(RUNNING))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    let pending = pending
        .iter()
        .map(|r| {
            Ok(KindBacklog::pending(
                col(r, "kind")?,
                col::<i64>(r, "n")? as u64,
                col::<i64>(r, "due")? as u64,
                col::<i64>(r, "overdue")? as u64,
                opt_time(r, "oldest")?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    let running = running
        .iter()
        .map(|r| Ok((col(r, "kind")?, col::<i64>(r, "n")? as u64)))
        .collect::<Result<_, StoreError>>()?;
    let mut out = KindBacklog::with_running(pending, running);
    for b in out.iter_mut().filter(|b| b.overdue > 0 && p.sample > 0) {
        let rows = sqlx::query(db.schema.sql(SAMPLE))
            .bind(&b.kind)
            .bind(Time(p.overdue_before))
            .bind(p.sample as i64)
            .fetch_all(&db.pool)
            .await
            .map_err(db_err)?;
        b.overdue_sample = rows
            .iter()
            .map(|r| col::<Id>(r, "id").map(|i| i.0))
            .collect::<Result<Vec<TaskId>, _>>()?;
    }
    Ok(out)
}

async fn audit_page(db: &Db, p: &AuditParams) -> Result<AuditPage, StoreError> {
    // One snapshot for the page and its events: in READ COMMITTED each statement would see
    // the commits made in between, and a healthy task could look inconsistent.
    let mut tx = db
        .pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(db_err)?;
    let rows = sqlx::query(db.schema.sql(PAGE))
        .bind(p.after.map(Id))
        .bind(p.limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    let ids: Vec<Id> = rows
        .iter()
        .map(|r| col::<Id>(r, "id"))
        .collect::<Result<_, _>>()?;
    let mut table: HashMap<TaskId, Vec<Event>> = HashMap::new();
    let events = sqlx::query(db.schema.sql(PAGE_EVENTS))
        .bind(ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    for r in &events {
        let id = col::<Id>(r, "task_id")?.0;
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
