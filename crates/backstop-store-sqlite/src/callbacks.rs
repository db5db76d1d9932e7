//! Inbound callbacks (the [`Callbacks`] impl): each request's record, and for a verified one its task, written in the
//! writer's group commit (see `enqueue`), so that many concurrent callbacks share one fsync.

use crate::SqliteStore;
use crate::db_err;
use crate::enqueue::{EXISTING, INSERT_SQL, SHAPES, existing_one, row};
use crate::raw::{Db, Stmt, Value};
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::{id_bytes, parse_id};
use backstop_core::callback::changed_payload_reason;
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, Callbacks, EnqueueResult};
use backstop_core::{
    CallbackCheck, CallbackId, CallbackRecord, CallbackVerdict, ListCallbacksParams,
    RecordCallbackParams, RecordedCallback, StoreError,
};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{QueryBuilder, Row, Sqlite};

const INSERT: &str = "INSERT INTO backstop_callbacks (id, source, received_at, verdict, reason, \
                      event_id, task_id, headers, body, body_len) \
                      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

impl Callbacks for SqliteStore {
    fn record_callback(
        &self,
        p: RecordCallbackParams,
    ) -> BoxFuture<'_, Result<RecordedCallback, StoreError>> {
        Box::pin(self.inner.committer.record_callback(p))
    }

    fn list_callbacks(
        &self,
        p: ListCallbacksParams,
    ) -> BoxFuture<'_, Result<Vec<CallbackRecord>, StoreError>> {
        Box::pin(async move { list(&self.inner.readers, &p).await })
    }
}

/// Records each callback in order, creating the task of each verified one unless its
/// `(kind, key)` exists (an earlier callback of the same group counts). Runs inside the
/// group's transaction.
pub(crate) fn record(
    db: &Db<'_>,
    callbacks: &[&RecordCallbackParams],
) -> Result<Vec<RecordedCallback>, StoreError> {
    if callbacks.is_empty() {
        return Ok(Vec::new());
    }
    let mut insert = db.prepare(INSERT)?;
    let mut insert_task: Option<Stmt<'_>> = None;
    let mut existing: Option<Stmt<'_>> = None;
    let mut out = Vec::with_capacity(callbacks.len());
    for p in callbacks {
        let now = to_ms(p.received_at);
        let (verdict, task_id, reason) = match &p.check {
            CallbackCheck::Rejected(reason) => {
                (CallbackVerdict::Rejected, None, Some(reason.clone()))
            }
            CallbackCheck::Verified(t) => {
                let ins = match &mut insert_task {
                    Some(s) => s,
                    slot => slot.insert(db.prepare(&INSERT_SQL[SHAPES.len() - 1])?),
                };
                // Unplaced: `groups::place_unplaced` places a grouped one right after, in this transaction.
                let values = row(t, now, None);
                if ins.execute(&values)? == 1 {
                    (CallbackVerdict::Accepted, Some(t.id), None)
                } else {
                    let existing = match &mut existing {
                        Some(s) => s,
                        slot => slot.insert(db.prepare(EXISTING)?),
                    };
                    match existing_one(existing, t)? {
                        EnqueueResult::Created(id) => (CallbackVerdict::Accepted, Some(id), None),
                        EnqueueResult::Existing(id) => (CallbackVerdict::Duplicate, Some(id), None),
                        EnqueueResult::Conflict(id) => (
                            CallbackVerdict::Duplicate,
                            Some(id),
                            Some(changed_payload_reason(id)),
                        ),
                    }
                }
            }
        };
        let recorded = RecordedCallback {
            id: p.id,
            verdict,
            task_id,
            reason,
        };
        write_record(&mut insert, p, now, &recorded)?;
        out.push(recorded);
    }
    Ok(out)
}

fn write_record(
    insert: &mut Stmt<'_>,
    p: &RecordCallbackParams,
    now: i64,
    r: &RecordedCallback,
) -> Result<(), StoreError> {
    insert.execute(&[
        p.id.0.as_bytes().as_slice().into(),
        p.source.as_str().into(),
        Value::Int(now),
        r.verdict.as_str().into(),
        r.reason.as_deref().into(),
        p.event_id.as_deref().into(),
        r.task_id.as_ref().map(id_bytes).into(),
        p.headers.as_str().into(),
        p.body.as_slice().into(),
        Value::Int(i64::try_from(p.body_len).unwrap_or(i64::MAX)),
    ])?;
    Ok(())
}

pub(crate) async fn list(
    pool: &SqlitePool,
    p: &ListCallbacksParams,
) -> Result<Vec<CallbackRecord>, StoreError> {
    let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
        "SELECT id, source, received_at, verdict, reason, event_id, task_id, headers, body, \
         body_len FROM backstop_callbacks WHERE source = ",
    );
    qb.push_bind(&p.source);
    if let Some(before) = p.before {
        qb.push(" AND id < ")
            .push_bind(before.0.as_bytes().to_vec());
    }
    qb.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::try_from(p.limit).unwrap_or(i64::MAX));
    qb.build()
        .fetch_all(pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(record_row)
        .collect()
}

fn record_row(r: &SqliteRow) -> Result<CallbackRecord, StoreError> {
    let id: Vec<u8> = r.get("id");
    let verdict: String = r.get("verdict");
    let task_id: Option<Vec<u8>> = r.get("task_id");
    Ok(CallbackRecord {
        id: CallbackId(parse_id(&id)?.0),
        source: r.get("source"),
        received_at: from_ms(r.get("received_at")),
        verdict: verdict
            .parse()
            .map_err(|e: backstop_core::callback::UnknownVerdict| {
                StoreError::Database(Cause::new(e))
            })?,
        reason: r.get("reason"),
        event_id: r.get("event_id"),
        task_id: task_id.as_deref().map(parse_id).transpose()?,
        headers: r.get("headers"),
        body: r.get("body"),
        body_len: r.get::<i64, _>("body_len").max(0) as u64,
    })
}
