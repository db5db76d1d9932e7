//! Reads (the [`Tasks`] impl): tasks, listings, counts and the timeline. They run on the reader pool, beside the
//! writer (WAL).

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::from_ms;
use crate::row::{id_bytes, parse_status, raw_task, status_code, task, task_columns};
use backstop_core::store::{
    BoxFuture, CountsParams, GetByKeyParams, GetParams, GroupHeadParams, KeysParams, ListParams,
    ScanParams, StatusCounts, Tasks, TimelineParams,
};
use backstop_core::{AttemptOutcome, Event, EventType, Status, StoreError, Task, TaskId};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

impl Tasks for SqliteStore {
    fn get(&self, p: GetParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(get(&self.inner.readers, p.id))
    }

    fn get_by_key(&self, p: GetByKeyParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(async move { get_by_key(&self.inner.readers, &p.kind, &p.key).await })
    }

    fn timeline(&self, p: TimelineParams) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        Box::pin(timeline(&self.inner.readers, p.id))
    }

    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { list(&self.inner.readers, &p).await })
    }

    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { scan(&self.inner.readers, &p).await })
    }

    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { tasks_by_keys(&self.inner.readers, &p).await })
    }

    fn counts(&self, p: CountsParams) -> BoxFuture<'_, Result<StatusCounts, StoreError>> {
        Box::pin(async move { counts(&self.inner.readers, p.kind.as_deref()).await })
    }

    fn group_head(&self, p: GroupHeadParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(async move { group_head(&self.inner.readers, &p).await })
    }
}

pub(crate) async fn get(pool: &SqlitePool, id: TaskId) -> Result<Option<Task>, StoreError> {
    sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM backstop_tasks WHERE id = ?"
    ))
    .bind(id_bytes(&id))
    .fetch_optional(pool)
    .await
    .map_err(db_err)?
    .as_ref()
    .map(task)
    .transpose()
}

pub(crate) async fn get_by_key(
    pool: &SqlitePool,
    kind: &str,
    key: &str,
) -> Result<Option<Task>, StoreError> {
    sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM backstop_tasks WHERE kind = ? AND key = ?"
    ))
    .bind(kind)
    .bind(key)
    .fetch_optional(pool)
    .await
    .map_err(db_err)?
    .as_ref()
    .map(task)
    .transpose()
}

pub(crate) async fn tasks_by_keys(
    pool: &SqlitePool,
    p: &KeysParams,
) -> Result<Vec<Task>, StoreError> {
    let keys = serde_json::to_string(&p.keys).expect("strings");
    let mut conn = pool.acquire().await.map_err(db_err)?;
    // Raw calls: thousands of rows per call, which sqlx would pass over one at a time.
    crate::raw::read(&mut conn, |db| {
        let mut out = Vec::with_capacity(p.keys.len());
        db.prepare(concat!(
            "SELECT ",
            task_columns!(),
            " FROM backstop_tasks WHERE kind = ?1 AND key IN (SELECT value FROM json_each(?2))"
        ))?
        .query(&[p.kind.as_str().into(), keys.as_str().into()], |r| {
            out.push(raw_task(r)?);
            Ok(())
        })?;
        Ok(out)
    })
    .await
}

pub(crate) async fn scan(pool: &SqlitePool, p: &ScanParams) -> Result<Vec<Task>, StoreError> {
    let after = p.after.as_ref().map(|a| id_bytes(a).to_vec());
    let limit = i64::try_from(p.limit).unwrap_or(i64::MAX);
    let mut conn = pool.acquire().await.map_err(db_err)?;
    crate::raw::read(&mut conn, |db| {
        let mut out = Vec::with_capacity(p.limit.min(100_000));
        // `+kind`, `+status`: walk the id index in order and filter, rather than collect the
        // kind through (kind, key) and sort it.
        db.prepare(concat!(
            "SELECT ",
            task_columns!(),
            " FROM backstop_tasks WHERE (?1 IS NULL OR id > ?1) AND +kind = ?2 AND +status = ?3
              ORDER BY id LIMIT ?4"
        ))?
        .query(
            &[
                after.as_deref().into(),
                p.kind.as_str().into(),
                status_code(p.status).into(),
                limit.into(),
            ],
            |r| {
                out.push(raw_task(r)?);
                Ok(())
            },
        )?;
        Ok(out)
    })
    .await
}

pub(crate) async fn list(pool: &SqlitePool, p: &ListParams) -> Result<Vec<Task>, StoreError> {
    let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(concat!(
        "SELECT ",
        task_columns!(),
        " FROM backstop_tasks WHERE 1 = 1"
    ));
    if let Some(kind) = &p.kind {
        qb.push(" AND kind = ").push_bind(kind);
    }
    if let Some(key) = &p.key {
        qb.push(" AND key = ").push_bind(key);
    }
    if let Some(status) = p.status {
        qb.push(" AND status = ").push_bind(status_code(status));
    }
    if let Some(group) = &p.group {
        qb.push(" AND grp = ").push_bind(group);
    }
    if let Some(before) = p.before {
        qb.push(" AND seq < (SELECT seq FROM backstop_tasks WHERE id = ")
            .push_bind(before.0.as_bytes().to_vec())
            .push(")");
    }
    qb.push(" ORDER BY seq DESC LIMIT ")
        .push_bind(p.limit as i64);
    qb.build()
        .fetch_all(pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(task)
        .collect()
}

/// The first open task of a group, through the index of open grouped tasks (by `grp_live`,
/// as every lookup of a group's open tasks, see `groups::holds_its_group!`).
pub(crate) async fn group_head(
    pool: &SqlitePool,
    p: &GroupHeadParams,
) -> Result<Option<Task>, StoreError> {
    sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM backstop_tasks AS o WHERE o.kind = ?1 AND o.grp_live = ?2 AND ",
        crate::groups::holds_its_group!(),
        " ORDER BY o.grp_seq LIMIT 1"
    ))
    .bind(&p.kind)
    .bind(&p.group)
    .fetch_optional(pool)
    .await
    .map_err(db_err)?
    .as_ref()
    .map(task)
    .transpose()
}

pub(crate) async fn counts(
    pool: &SqlitePool,
    kind: Option<&str>,
) -> Result<StatusCounts, StoreError> {
    let rows = sqlx::query(
        "SELECT status, count(*) AS n FROM backstop_tasks
         WHERE ?1 IS NULL OR kind = ?1 GROUP BY status",
    )
    .bind(kind)
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    let mut c = StatusCounts::default();
    for r in rows {
        let n = r.get::<i64, _>("n") as u64;
        match parse_status(r.get("status"))? {
            Status::Pending => c.pending = n,
            Status::Running => c.running = n,
            Status::Succeeded => c.succeeded = n,
            Status::Failed => c.failed = n,
            Status::Compensated => c.compensated = n,
        }
    }
    Ok(c)
}

pub(crate) async fn timeline(pool: &SqlitePool, id: TaskId) -> Result<Vec<Event>, StoreError> {
    let mut conn = pool.acquire().await.map_err(db_err)?;
    timeline_on(&mut conn, id).await
}

/// The timeline, read on `conn` (inside the caller's read transaction, when it has one: the
/// task row and its events then come from one snapshot).
pub(crate) async fn timeline_on(
    conn: &mut SqliteConnection,
    id: TaskId,
) -> Result<Vec<Event>, StoreError> {
    let id_blob = id_bytes(&id);
    let Some(t) = sqlx::query(
        "SELECT created_at, origin, attempts, att_started_at, att_ended_at, att_outcome,
                att_error, att_http_status, att_worker
         FROM backstop_tasks WHERE id = ?",
    )
    .bind(id_blob)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_err)?
    else {
        return Err(StoreError::NotFound(id));
    };
    let mut created = Event::new(EventType::Created, from_ms(t.get("created_at")));
    created.origin = origin(&t);
    let mut events = vec![created];
    let rows = sqlx::query(
        "SELECT type, at, attempt, outcome, error, http_status, duration_ms, worker, actor, reason,
                origin
         FROM backstop_events WHERE task_id = ? ORDER BY seq",
    )
    .bind(id_blob)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err)?;
    for r in &rows {
        events.push(event(r)?);
    }
    // The latest attempt lives on the task row: finished (outcome set) or in progress.
    if let Some(started) = t.get::<Option<i64>, _>("att_started_at") {
        let ended = t.get::<Option<i64>, _>("att_ended_at");
        let outcome = t.get::<Option<String>, _>("att_outcome");
        let mut e = Event::new(EventType::Attempt, from_ms(ended.unwrap_or(started)));
        e.attempt = Some(t.get::<i64, _>("attempts") as u32);
        e.outcome = outcome.as_deref().and_then(AttemptOutcome::parse);
        e.error = t.get("att_error");
        e.http_status = t.get::<Option<i64>, _>("att_http_status").map(|s| s as u16);
        e.duration_ms = ended.map(|end| (end - started).max(0) as u64);
        e.worker = t.get("att_worker");
        events.push(e);
    }
    // Stable: equal times keep the order above (creation first, then the table's order).
    events.sort_by_key(|e| e.at);
    Ok(events)
}

fn event(r: &SqliteRow) -> Result<Event, StoreError> {
    let kind: String = r.get("type");
    let kind = EventType::parse(&kind)
        .ok_or_else(|| StoreError::Database(format!("unknown event type {kind:?}").into()))?;
    let mut e = Event::new(kind, from_ms(r.get("at")));
    e.attempt = r.get::<Option<i64>, _>("attempt").map(|a| a as u32);
    e.outcome = r
        .get::<Option<String>, _>("outcome")
        .as_deref()
        .and_then(AttemptOutcome::parse);
    e.error = r.get("error");
    e.http_status = r.get::<Option<i64>, _>("http_status").map(|s| s as u16);
    e.duration_ms = r
        .get::<Option<i64>, _>("duration_ms")
        .map(|d| d.max(0) as u64);
    e.worker = r.get("worker");
    e.actor = r.get("actor");
    e.reason = r.get("reason");
    e.origin = origin(r);
    Ok(e)
}

/// A row's `origin` column as an event shows it (`None` when NULL).
fn origin(r: &SqliteRow) -> Option<serde_json::Value> {
    r.get::<Option<&str>, _>("origin")
        .map(Event::origin_from_text)
}
