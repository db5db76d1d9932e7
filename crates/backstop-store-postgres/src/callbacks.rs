//! Inbound callbacks: a verified request's record and its task in one transaction (the task
//! insert skips a taken `(kind, key)`, which makes the request a duplicate); a rejected
//! request's record alone.
//!
//! The [`Callbacks`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::row::{col, time};
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::callback::{UnknownVerdict, changed_payload_reason};
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, Callbacks};
use backstop_core::{
    CallbackCheck, CallbackId, CallbackRecord, CallbackVerdict, ListCallbacksParams,
    RecordCallbackParams, RecordedCallback, StoreError, TaskId,
};
use sqlx::postgres::PgRow;

/// The task as its intake has it (`status`, `reason`, `last_error`), and in its group, as
/// enqueue writes it.
const INSERT_TASK: &str = "
INSERT INTO {schema}.tasks
    (id, kind, key, payload, max_attempts, run_at, expires_at, traceparent, created_at, updated_at,
     status, reason, last_error, grp)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13)
ON CONFLICT (kind, key) DO NOTHING
RETURNING id";

const EXISTING: &str = "SELECT id, payload FROM {schema}.tasks WHERE kind = $1 AND key = $2";

const INSERT: &str = "
INSERT INTO {schema}.callbacks
    (id, source, received_at, verdict, reason, event_id, task_id, headers, body, body_len)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

const LIST: &str = "
SELECT id, source, received_at, verdict, reason, event_id, task_id, headers, body, body_len
FROM {schema}.callbacks
WHERE source = $1 AND ($2::uuid IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3";

impl Callbacks for PostgresStore {
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
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let (verdict, task_id, reason) = match &p.check {
        CallbackCheck::Rejected(reason) => (CallbackVerdict::Rejected, None, Some(reason.clone())),
        CallbackCheck::Verified(t) => {
            let created = sqlx::query_scalar::<_, Id>(db.schema.sql(INSERT_TASK))
                .bind(Id(t.id))
                .bind(&t.kind)
                .bind(&t.key)
                .bind(&t.payload)
                .bind(i64::from(t.max_attempts))
                .bind(Time(t.run_at))
                .bind(t.expires_at.map(Time))
                .bind(t.traceparent.as_deref())
                .bind(Time(p.received_at))
                .bind(t.intake.status().as_str())
                .bind(t.intake.reason())
                .bind(t.intake.failed_reason())
                .bind(t.group.as_deref())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_err)?;
            if created.is_some() {
                (CallbackVerdict::Accepted, Some(t.id), None)
            } else {
                // The insert waited for any concurrent one of the same key to commit, and
                // this statement's snapshot is taken after it: the row is there.
                let row = sqlx::query(db.schema.sql(EXISTING))
                    .bind(&t.kind)
                    .bind(&t.key)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_err)?;
                let Id(id) = col(&row, "id")?;
                let payload: &[u8] = col(&row, "payload")?;
                let reason = (!backstop_core::idempotency::same_payload(payload, &t.payload))
                    .then(|| changed_payload_reason(id));
                (CallbackVerdict::Duplicate, Some(id), reason)
            }
        }
    };
    sqlx::query(db.schema.sql(INSERT))
        .bind(Id(TaskId(p.id.0)))
        .bind(&p.source)
        .bind(Time(p.received_at))
        .bind(verdict.as_str())
        .bind(reason.as_deref())
        .bind(p.event_id.as_deref())
        .bind(task_id.map(Id))
        .bind(&p.headers)
        .bind(&p.body)
        .bind(i64::try_from(p.body_len).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
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
    sqlx::query(db.schema.sql(LIST))
        .bind(&p.source)
        .bind(p.before.map(|b| Id(TaskId(b.0))))
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(record_row)
        .collect()
}

fn record_row(r: &PgRow) -> Result<CallbackRecord, StoreError> {
    let Id(id) = col(r, "id")?;
    let verdict: &str = col(r, "verdict")?;
    let body_len: i64 = col(r, "body_len")?;
    Ok(CallbackRecord {
        id: CallbackId(id.0),
        source: col(r, "source")?,
        received_at: time(r, "received_at")?,
        verdict: verdict
            .parse()
            .map_err(|e: UnknownVerdict| StoreError::Database(Cause::new(e)))?,
        reason: col(r, "reason")?,
        event_id: col(r, "event_id")?,
        task_id: col::<Option<Id>>(r, "task_id")?.map(|Id(id)| id),
        headers: col(r, "headers")?,
        body: col(r, "body")?,
        body_len: body_len.max(0) as u64,
    })
}
