//! What the reconciler and `backstop doctor` read and write about the ledger as a whole:
//! beats, the backlog per kind, and pages for the conservation audit.

use crate::read::{assemble, event};
use crate::row::{col, opt_time, task, task_columns, time};
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::Event;
use backstop_core::store::{
    AuditParams, BacklogParams, Beat, BeatParams, ForgetBeatsParams, KindBacklog,
};
use backstop_core::{StoreError, TaskId};
use std::collections::HashMap;

const BEAT: &str = "
INSERT INTO {schema}.beats (name, owner, at, detail) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE
SET owner = EXCLUDED.owner, at = EXCLUDED.at, detail = EXCLUDED.detail";

// left(), not LIKE: names may hold `%` or `_`.
const BEATS: &str = "
SELECT name, owner, at, detail FROM {schema}.beats
WHERE left(name, length($1)) = $1 ORDER BY name";

const FORGET: &str = "DELETE FROM {schema}.beats WHERE left(name, length($1)) = $1 AND at < $2";

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
    ", att_started_at, att_ended_at, att_outcome, att_error, att_http_status, att_worker",
    " FROM {schema}.tasks WHERE $1::uuid IS NULL OR id > $1 ORDER BY id LIMIT $2"
);

/// The events of a page's tasks, in one round trip.
const PAGE_EVENTS: &str = "
SELECT task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker, actor, reason
FROM {schema}.events WHERE task_id = ANY($1) ORDER BY task_id, seq";

/// The readiness write probe: a beat row, rolled back.
const PROBE: &str = "
INSERT INTO {schema}.beats (name, owner, at, detail) VALUES ('backstop.write-probe', '', now(), '')
ON CONFLICT (name) DO NOTHING";

/// Takes a connection and writes a row in a transaction that is rolled back: fails as a
/// write would on a server that is away, read-only (a standby) or refusing connections.
pub(crate) async fn check_writable(db: &Db) -> Result<(), StoreError> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    sqlx::query(db.schema.sql(PROBE))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.rollback().await.map_err(db_err)
}

pub(crate) async fn beat(db: &Db, p: &BeatParams) -> Result<(), StoreError> {
    sqlx::query(db.schema.sql(BEAT))
        .bind(&p.name)
        .bind(&p.owner)
        .bind(Time(p.at))
        .bind(&p.detail)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

pub(crate) async fn beats(db: &Db, prefix: &str) -> Result<Vec<Beat>, StoreError> {
    let rows = sqlx::query(db.schema.sql(BEATS))
        .bind(prefix)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter()
        .map(|r| {
            Ok(Beat {
                name: col(r, "name")?,
                owner: col(r, "owner")?,
                at: time(r, "at")?,
                detail: col(r, "detail")?,
            })
        })
        .collect()
}

pub(crate) async fn forget_beats(db: &Db, p: &ForgetBeatsParams) -> Result<u64, StoreError> {
    let done = sqlx::query(db.schema.sql(FORGET))
        .bind(&p.prefix)
        .bind(Time(p.before))
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected())
}

pub(crate) async fn backlog(db: &Db, p: &BacklogParams) -> Result<Vec<KindBacklog>, StoreError> {
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

pub(crate) async fn audit_page(
    db: &Db,
    p: &AuditParams,
) -> Result<backstop_core::store::AuditPage, StoreError> {
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
