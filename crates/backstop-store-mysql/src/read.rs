//! Reads: tasks, listings, counts and the timeline. Plain (non-locking) reads of the latest
//! committed rows.
//!
//! The [`Tasks`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::row::{TASK_COLUMNS, col, from_ms, id_bytes, parse_status, status_code, task};
use crate::tx::db_err;
use backstop_core::store::{
    BoxFuture, CountsParams, GetByKeyParams, GetParams, GroupHeadParams, Tasks, TimelineParams,
};
use backstop_core::store::{KeysParams, ListParams, ScanParams, StatusCounts};
use backstop_core::{AttemptOutcome, Event, EventType, Status, StoreError, Task, TaskId};
use sqlx::mysql::MySqlRow;
use sqlx::{MySql, QueryBuilder};

/// A page of one kind's tasks in one status, in id order.
impl Tasks for MysqlStore {
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
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM {{tasks}} WHERE (? IS NULL OR id > ?) AND kind = ? \
         AND status = ? ORDER BY id LIMIT ?"
    );
    let after = p.after.as_ref().map(|a| id_bytes(a).to_vec());
    sqlx::query(db.tables.q(&sql))
        .bind(after.clone())
        .bind(after)
        .bind(&p.kind)
        .bind(status_code(p.status))
        .bind(p.limit as i64)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(task)
        .collect()
}

/// Tasks of one kind by key, in one round trip.
pub(crate) async fn tasks_by_keys(db: &Db, p: &KeysParams) -> Result<Vec<Task>, StoreError> {
    if p.keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb: QueryBuilder<MySql> = QueryBuilder::new(db.tables.sql(&format!(
        "SELECT {TASK_COLUMNS} FROM {{tasks}} WHERE kind = "
    )));
    qb.push_bind(&p.kind).push(" AND `key` IN (");
    let mut keys = qb.separated(", ");
    for k in &p.keys {
        keys.push_bind(k);
    }
    qb.push(")");
    qb.build()
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(task)
        .collect()
}

/// One task.
pub(crate) async fn get(db: &Db, id: TaskId) -> Result<Option<Task>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM {{tasks}} WHERE id = ?");
    sqlx::query(db.tables.q(&sql))
        .bind(id_bytes(&id))
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(task)
        .transpose()
}

/// One task by its business identity.
pub(crate) async fn get_by_key(db: &Db, kind: &str, key: &str) -> Result<Option<Task>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM {{tasks}} WHERE kind = ? AND `key` = ?");
    sqlx::query(db.tables.q(&sql))
        .bind(kind)
        .bind(key)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(task)
        .transpose()
}

/// Tasks, newest first (by insertion order).
pub(crate) async fn list(db: &Db, p: &ListParams) -> Result<Vec<Task>, StoreError> {
    let mut qb: QueryBuilder<MySql> = QueryBuilder::new(
        db.tables
            .sql(&format!("SELECT {TASK_COLUMNS} FROM {{tasks}} WHERE 1 = 1")),
    );
    if let Some(kind) = &p.kind {
        qb.push(" AND kind = ").push_bind(kind.as_str());
    }
    if let Some(key) = &p.key {
        qb.push(" AND `key` = ").push_bind(key.as_str());
    }
    if let Some(status) = p.status {
        qb.push(" AND status = ").push_bind(status_code(status));
    }
    if let Some(group) = &p.group {
        qb.push(" AND grp = ").push_bind(group.as_str());
    }
    if let Some(before) = p.before {
        qb.push(
            db.tables
                .sql(" AND seq < (SELECT seq FROM {tasks} WHERE id = "),
        )
        .push_bind(before.0.as_bytes().to_vec())
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

/// Tasks per status, for one kind or all.
pub(crate) async fn counts(db: &Db, kind: Option<&str>) -> Result<StatusCounts, StoreError> {
    let rows = match kind {
        Some(kind) => {
            sqlx::query(
                db.tables
                    .q("SELECT status, COUNT(*) AS n FROM {tasks} WHERE kind = ? GROUP BY status"),
            )
            .bind(kind)
            .fetch_all(&db.pool)
            .await
        }
        None => {
            sqlx::query(
                db.tables
                    .q("SELECT status, COUNT(*) AS n FROM {tasks} GROUP BY status"),
            )
            .fetch_all(&db.pool)
            .await
        }
    }
    .map_err(db_err)?;
    let mut c = StatusCounts::default();
    for r in rows {
        let n = col::<i64, _>(&r, "n")? as u64;
        match parse_status(col(&r, "status")?)? {
            Status::Pending => c.pending = n,
            Status::Running => c.running = n,
            Status::Succeeded => c.succeeded = n,
            Status::Failed => c.failed = n,
            Status::Compensated => c.compensated = n,
        }
    }
    Ok(c)
}

/// The whole timeline of a task, oldest first: creation, the events table, and the latest
/// attempt that lives on the task row.
pub(crate) async fn timeline(db: &Db, id: TaskId) -> Result<Vec<Event>, StoreError> {
    let id_blob = id_bytes(&id);
    let Some(t) = sqlx::query(db.tables.q(
        "SELECT created_at, origin, attempts, att_started_at, att_ended_at, att_outcome,
                att_error, att_http_status, att_worker
         FROM {tasks} WHERE id = ?",
    ))
    .bind(id_blob)
    .fetch_optional(&db.pool)
    .await
    .map_err(db_err)?
    else {
        return Err(StoreError::NotFound(id));
    };
    let rows = sqlx::query(db.tables.q(
        "SELECT type, at, attempt, outcome, error, http_status, duration_ms, worker, actor, reason,
                origin
         FROM {events} WHERE task_id = ? ORDER BY seq",
    ))
    .bind(id_blob)
    .fetch_all(&db.pool)
    .await
    .map_err(db_err)?;
    let events = rows.iter().map(event).collect::<Result<Vec<_>, _>>()?;
    assemble(&t, events)
}

/// A whole timeline from a task row holding `created_at`, `origin`, `attempts` and the
/// `att_*` columns, and the task's rows of the events table in order.
pub(crate) fn assemble(t: &MySqlRow, table: Vec<Event>) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::with_capacity(table.len() + 2);
    let mut created = Event::new(EventType::Created, from_ms(col(t, "created_at")?));
    created.origin = origin(t)?;
    events.push(created);
    events.extend(table);
    // The latest attempt lives on the task row: finished (outcome set) or in progress.
    if let Some(started) = col::<Option<i64>, _>(t, "att_started_at")? {
        let ended = col::<Option<i64>, _>(t, "att_ended_at")?;
        let outcome = col::<Option<String>, _>(t, "att_outcome")?;
        let mut e = Event::new(EventType::Attempt, from_ms(ended.unwrap_or(started)));
        e.attempt = Some(col::<i64, _>(t, "attempts")? as u32);
        e.outcome = outcome.as_deref().and_then(AttemptOutcome::parse);
        e.error = col(t, "att_error")?;
        e.http_status = col::<Option<i64>, _>(t, "att_http_status")?.map(|s| s as u16);
        e.duration_ms = ended.map(|end| (end - started).max(0) as u64);
        e.worker = col(t, "att_worker")?;
        events.push(e);
    }
    // Stable: equal times keep the order above (creation first, then the table's order).
    events.sort_by_key(|e| e.at);
    Ok(events)
}

pub(crate) fn event(r: &MySqlRow) -> Result<Event, StoreError> {
    let kind: String = col(r, "type")?;
    let kind = EventType::parse(&kind)
        .ok_or_else(|| StoreError::Database(format!("unknown event type {kind:?}").into()))?;
    let mut e = Event::new(kind, from_ms(col(r, "at")?));
    e.attempt = col::<Option<i64>, _>(r, "attempt")?.map(|a| a as u32);
    e.outcome = col::<Option<String>, _>(r, "outcome")?
        .as_deref()
        .and_then(AttemptOutcome::parse);
    e.error = col(r, "error")?;
    e.http_status = col::<Option<i64>, _>(r, "http_status")?.map(|s| s as u16);
    e.duration_ms = col::<Option<i64>, _>(r, "duration_ms")?.map(|d| d.max(0) as u64);
    e.worker = col(r, "worker")?;
    e.actor = col(r, "actor")?;
    e.reason = col(r, "reason")?;
    e.origin = origin(r)?;
    Ok(e)
}

/// A row's `origin` column as an event shows it (`None` when NULL).
fn origin(r: &MySqlRow) -> Result<Option<serde_json::Value>, StoreError> {
    Ok(col::<Option<String>, _>(r, "origin")?
        .as_deref()
        .map(Event::origin_from_text))
}
