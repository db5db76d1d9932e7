//! Inbound callbacks: a verified request's record and its task in one transaction; a rejected
//! request's record alone.
//!
//! The task's `(kind, key)` is looked up first: found, the request is a duplicate; not found,
//! the task is inserted. A concurrent callback of the same event that commits first makes the
//! insert fail with a duplicate key; the transaction is then tried again and finds its row.
//!
//! The [`Callbacks`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::row::{col, from_ms, id_bytes, parse_id, status_code, text, to_ms};
use crate::tx::{Fail, Retry, db_err, transaction};
use backstop_core::callback::{UnknownVerdict, changed_payload_reason};
use backstop_core::idempotency::same_payload;
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, Callbacks};
use backstop_core::{
    CallbackCheck, CallbackId, CallbackRecord, CallbackVerdict, ListCallbacksParams,
    RecordCallbackParams, RecordedCallback, StoreError,
};
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlRow;

const EXISTING: &str = "SELECT id, payload FROM {tasks} WHERE kind = ? AND `key` = ?";

/// The task as its intake has it (`status`, `reason`, `last_error`) and in its group, as
/// enqueue writes it.
const INSERT_TASK: &str = "INSERT INTO {tasks} (id, kind, `key`, payload, max_attempts, run_at, \
                           expires_at, traceparent, status, reason, last_error, grp, \
                           created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

const INSERT: &str = "INSERT INTO {callbacks} (id, source, received_at, verdict, reason, \
                      event_id, task_id, headers, body, body_len) \
                      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

const COLUMNS: &str = "SELECT id, source, received_at, verdict, reason, event_id, task_id, \
                       headers, body, body_len FROM {callbacks} WHERE source = ?";

impl Callbacks for MysqlStore {
    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>> {
        Box::pin(async move { record(&self.db, &p).await })
    }

    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>> {
        Box::pin(async move { list(&self.db, &p).await })
    }
}

pub(crate) async fn record(
    db: &Db,
    p: &RecordCallbackParams,
) -> Result<RecordedCallback, StoreError> {
    transaction!(db, Retry::LocksAndDuplicates, |conn| {
        record_once(db, conn, p).await
    })
}

async fn record_once(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &RecordCallbackParams,
) -> Result<RecordedCallback, Fail> {
    let now = to_ms(p.received_at);
    let (verdict, task_id, reason) = match &p.check {
        CallbackCheck::Rejected(reason) => (CallbackVerdict::Rejected, None, Some(reason.clone())),
        CallbackCheck::Verified(t) => {
            let found = sqlx::query(db.tables.q(EXISTING))
                .bind(t.kind.as_bytes())
                .bind(t.key.as_bytes())
                .fetch_optional(&mut *conn)
                .await?;
            match found {
                Some(row) => {
                    let id = parse_id(&col::<Vec<u8>, _>(&row, "id")?)?;
                    let payload: Vec<u8> = col(&row, "payload")?;
                    let reason =
                        (!same_payload(&payload, &t.payload)).then(|| changed_payload_reason(id));
                    (CallbackVerdict::Duplicate, Some(id), reason)
                }
                None => {
                    sqlx::query(db.tables.q(INSERT_TASK))
                        .bind(id_bytes(&t.id))
                        .bind(t.kind.as_str())
                        .bind(t.key.as_str())
                        .bind(t.payload.as_slice())
                        .bind(i64::from(t.max_attempts))
                        .bind(to_ms(t.run_at))
                        .bind(t.expires_at.map(to_ms))
                        .bind(t.traceparent.as_deref())
                        .bind(status_code(t.intake.status()))
                        .bind(t.intake.reason())
                        .bind(t.intake.failed_reason())
                        .bind(t.group.as_deref())
                        .bind(now)
                        .bind(now)
                        .execute(&mut *conn)
                        .await?;
                    (CallbackVerdict::Accepted, Some(t.id), None)
                }
            }
        }
    };
    sqlx::query(db.tables.q(INSERT))
        .bind(p.id.0.as_bytes().as_slice())
        .bind(p.source.as_bytes())
        .bind(now)
        .bind(verdict.as_str())
        .bind(reason.as_deref())
        .bind(p.event_id.as_deref().map(str::as_bytes))
        .bind(task_id.as_ref().map(id_bytes))
        .bind(p.headers.as_str())
        .bind(p.body.as_slice())
        .bind(i64::try_from(p.body_len).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await?;
    Ok(RecordedCallback {
        id: p.id,
        verdict,
        task_id,
        reason,
    })
}

pub(crate) async fn list(
    db: &Db,
    p: &ListCallbacksParams,
) -> Result<Vec<CallbackRecord>, StoreError> {
    let limit = i64::try_from(p.limit).unwrap_or(i64::MAX);
    let rows = match p.before {
        None => {
            sqlx::query(db.tables.q(&format!("{COLUMNS} ORDER BY id DESC LIMIT ?")))
                .bind(p.source.as_bytes())
                .bind(limit)
                .fetch_all(&db.pool)
                .await
        }
        Some(before) => {
            sqlx::query(
                db.tables
                    .q(&format!("{COLUMNS} AND id < ? ORDER BY id DESC LIMIT ?")),
            )
            .bind(p.source.as_bytes())
            .bind(before.0.as_bytes().as_slice())
            .bind(limit)
            .fetch_all(&db.pool)
            .await
        }
    }
    .map_err(db_err)?;
    rows.iter().map(record_row).collect()
}

fn record_row(r: &MySqlRow) -> Result<CallbackRecord, StoreError> {
    let id = parse_id(&col::<Vec<u8>, _>(r, "id")?)?;
    let verdict: String = col(r, "verdict")?;
    let task_id: Option<Vec<u8>> = col(r, "task_id")?;
    let event_id: Option<Vec<u8>> = col(r, "event_id")?;
    let body_len: i64 = col(r, "body_len")?;
    Ok(CallbackRecord {
        id: CallbackId(id.0),
        source: text(r, "source")?,
        received_at: from_ms(col(r, "received_at")?),
        verdict: verdict
            .parse()
            .map_err(|e: UnknownVerdict| StoreError::Database(Cause::new(e)))?,
        reason: col(r, "reason")?,
        event_id: event_id
            .map(|b| {
                String::from_utf8(b)
                    .map_err(|e| StoreError::Database(format!("event_id is not UTF-8: {e}").into()))
            })
            .transpose()?,
        task_id: task_id.as_deref().map(parse_id).transpose()?,
        headers: col(r, "headers")?,
        body: col(r, "body")?,
        body_len: body_len.max(0) as u64,
    })
}
