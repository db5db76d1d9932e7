//! Reads: tasks, listings, counts and the timeline (a group's head is read in `groups`).
//!
//! The [`Tasks`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::row::{col, count, duration_ms, opt_time, status, task, task_columns, time};
use crate::types::Id;
use crate::{Db, db_err};
use backstop_core::store::{
    BoxFuture, CountsParams, GetByKeyParams, GetParams, GroupHeadParams, Tasks, TimelineParams,
};
use backstop_core::store::{KeysParams, ListParams, ScanParams, StatusCounts};
use backstop_core::{AttemptOutcome, Event, EventType, Status, StoreError, Task, TaskId};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, QueryBuilder};

const GET: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM {schema}.tasks WHERE id = $1"
);

const GET_BY_KEY: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM {schema}.tasks WHERE kind = $1 AND key = $2"
);

const COUNTS_ALL: &str = "SELECT status, count(*) AS n FROM {schema}.tasks GROUP BY status";

const COUNTS_KIND: &str =
    "SELECT status, count(*) AS n FROM {schema}.tasks WHERE kind = $1 GROUP BY status";

/// The task row's part of the timeline: its creation and its latest attempt.
const TIMELINE_TASK: &str = "
SELECT created_at, origin, attempts, att_started_at, att_ended_at, att_outcome, att_error,
       att_http_status, att_worker
FROM {schema}.tasks WHERE id = $1";

const TIMELINE_EVENTS: &str = "
SELECT type, at, attempt, outcome, error, http_status, duration_ms, worker, actor, reason,
       origin
FROM {schema}.events WHERE task_id = $1 ORDER BY seq";

const BY_KEYS: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM {schema}.tasks WHERE kind = $1 AND key = ANY($2)"
);

const SCAN: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM {schema}.tasks WHERE ($1::uuid IS NULL OR id > $1) AND kind = $2 AND status = $3
      ORDER BY id LIMIT $4"
);

impl Tasks for PostgresStore {
    fn get(&self, p: GetParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(get(&self.db, p.id))
    }

    fn get_by_key(&self, p: GetByKeyParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(async move { get_by_key(&self.db, &p.kind, &p.key).await })
    }

    fn timeline(&self, p: TimelineParams) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        Box::pin(timeline(&self.db, p.id))
    }

    fn list(&self, p: ListParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { list(&self.db, &p).await })
    }

    fn scan(&self, p: ScanParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { scan(&self.db, &p).await })
    }

    fn tasks_by_keys(&self, p: KeysParams) -> BoxFuture<'_, Result<Vec<Task>, StoreError>> {
        Box::pin(async move { tasks_by_keys(&self.db, &p).await })
    }

    fn counts(&self, p: CountsParams) -> BoxFuture<'_, Result<StatusCounts, StoreError>> {
        Box::pin(async move { counts(&self.db, p.kind.as_deref()).await })
    }

    fn group_head(&self, p: GroupHeadParams) -> BoxFuture<'_, Result<Option<Task>, StoreError>> {
        Box::pin(async move { crate::groups::head(&self.db, &p).await })
    }
}

pub(crate) async fn scan(db: &Db, p: &ScanParams) -> Result<Vec<Task>, StoreError> {
    sqlx::query(db.schema.sql(SCAN))
        .bind(p.after.map(Id))
        .bind(&p.kind)
        .bind(p.status.as_str())
        .bind(p.limit as i64)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(task)
        .collect()
}

pub(crate) async fn tasks_by_keys(db: &Db, p: &KeysParams) -> Result<Vec<Task>, StoreError> {
    sqlx::query(db.schema.sql(BY_KEYS))
        .bind(&p.kind)
        .bind(&p.keys)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(task)
        .collect()
}

pub(crate) async fn get(db: &Db, id: TaskId) -> Result<Option<Task>, StoreError> {
    sqlx::query(db.schema.sql(GET))
        .bind(Id(id))
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(task)
        .transpose()
}

pub(crate) async fn get_by_key(db: &Db, kind: &str, key: &str) -> Result<Option<Task>, StoreError> {
    sqlx::query(db.schema.sql(GET_BY_KEY))
        .bind(kind)
        .bind(key)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(task)
        .transpose()
}

pub(crate) async fn list(db: &Db, p: &ListParams) -> Result<Vec<Task>, StoreError> {
    // Only the filters given are in the statement, so that each shape gets its own plan.
    let head = db.schema.sql(concat!(
        "SELECT ",
        task_columns!(),
        " FROM {schema}.tasks WHERE true"
    ));
    let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(head.0);
    if let Some(kind) = &p.kind {
        qb.push(" AND kind = ").push_bind(kind);
    }
    if let Some(key) = &p.key {
        qb.push(" AND key = ").push_bind(key);
    }
    if let Some(status) = p.status {
        qb.push(" AND status = ").push_bind(status.as_str());
    }
    if let Some(group) = &p.group {
        qb.push(" AND grp = ").push_bind(group);
    }
    if let Some(before) = p.before {
        qb.push(
            db.schema
                .sql(" AND seq < (SELECT seq FROM {schema}.tasks WHERE id = ")
                .0,
        )
        .push_bind(Id(before))
        .push(")");
    }
    qb.push(" ORDER BY seq DESC LIMIT ")
        .push_bind(i64::try_from(p.limit).unwrap_or(i64::MAX));
    qb.build()
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(task)
        .collect()
}

pub(crate) async fn counts(db: &Db, kind: Option<&str>) -> Result<StatusCounts, StoreError> {
    let rows = match kind {
        Some(kind) => {
            sqlx::query(db.schema.sql(COUNTS_KIND))
                .bind(kind)
                .fetch_all(&db.pool)
                .await
        }
        None => {
            sqlx::query(db.schema.sql(COUNTS_ALL))
                .fetch_all(&db.pool)
                .await
        }
    }
    .map_err(db_err)?;
    let mut c = StatusCounts::default();
    for r in &rows {
        let n = u64::try_from(col::<i64>(r, "n")?).unwrap_or(0);
        match status(r, "status")? {
            Status::Pending => c.pending = n,
            Status::Running => c.running = n,
            Status::Succeeded => c.succeeded = n,
            Status::Failed => c.failed = n,
            Status::Compensated => c.compensated = n,
        }
    }
    Ok(c)
}

pub(crate) async fn timeline(db: &Db, id: TaskId) -> Result<Vec<Event>, StoreError> {
    let Some(t) = sqlx::query(db.schema.sql(TIMELINE_TASK))
        .bind(Id(id))
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
    else {
        return Err(StoreError::NotFound(id));
    };
    let rows = sqlx::query(db.schema.sql(TIMELINE_EVENTS))
        .bind(Id(id))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    let events = rows.iter().map(event).collect::<Result<Vec<_>, _>>()?;
    assemble(&t, events)
}

/// A whole timeline from a task row holding `created_at`, `origin`, `attempts` and the
/// `att_*` columns, and the task's rows of the events table in order.
pub(crate) fn assemble(t: &PgRow, table: Vec<Event>) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::with_capacity(table.len() + 2);
    let mut created = Event::new(EventType::Created, time(t, "created_at")?);
    created.origin = origin(t)?;
    events.push(created);
    events.extend(table);
    // The latest attempt lives on the task row: finished (outcome set) or in progress.
    if let Some(started) = opt_time(t, "att_started_at")? {
        let ended = opt_time(t, "att_ended_at")?;
        let outcome: Option<String> = col(t, "att_outcome")?;
        let mut e = Event::new(EventType::Attempt, ended.unwrap_or(started));
        e.attempt = Some(count(t, "attempts")?);
        e.outcome = outcome.as_deref().and_then(AttemptOutcome::parse);
        e.error = col(t, "att_error")?;
        e.http_status = http_status(col(t, "att_http_status")?);
        e.duration_ms = ended.map(|end| duration_ms(started, end) as u64);
        e.worker = col(t, "att_worker")?;
        events.push(e);
    }
    // Stable: equal times keep the order above (creation first, then the table's order).
    events.sort_by_key(|e| e.at);
    Ok(events)
}

fn http_status(s: Option<i32>) -> Option<u16> {
    s.and_then(|s| u16::try_from(s).ok())
}

pub(crate) fn event(r: &PgRow) -> Result<Event, StoreError> {
    let kind: &str = col(r, "type")?;
    let kind = EventType::parse(kind)
        .ok_or_else(|| StoreError::Database(format!("unknown event type {kind:?}").into()))?;
    let mut e = Event::new(kind, time(r, "at")?);
    e.attempt = col::<Option<i64>>(r, "attempt")?.and_then(|a| u32::try_from(a).ok());
    e.outcome = col::<Option<&str>>(r, "outcome")?.and_then(AttemptOutcome::parse);
    e.error = col(r, "error")?;
    e.http_status = http_status(col(r, "http_status")?);
    e.duration_ms = col::<Option<i64>>(r, "duration_ms")?.map(|d| d.max(0) as u64);
    e.worker = col(r, "worker")?;
    e.actor = col(r, "actor")?;
    e.reason = col(r, "reason")?;
    e.origin = origin(r)?;
    Ok(e)
}

/// A row's `origin` column as an event shows it (`None` when NULL).
fn origin(r: &PgRow) -> Result<Option<serde_json::Value>, StoreError> {
    Ok(col::<Option<&str>>(r, "origin")?.map(Event::origin_from_text))
}
