//! Enqueue: the whole batch is one `INSERT … SELECT FROM UNNEST(…) ON CONFLICT DO NOTHING`, a
//! single statement and so a single atomic, durable transaction (one round trip when every
//! task is new). The `(kind, key)` pairs that were already taken are then looked up to tell an
//! idempotent repeat from a conflict; those rows never change, so the lookup needs no
//! transaction of its own.
//!
//! The [`Enqueue`] impl is here, next to its SQL.

use crate::PostgresStore;
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::group_commit;
use backstop_core::store::{BoxFuture, Enqueue};
use backstop_core::store::{EnqueueParams, EnqueueResult};
use backstop_core::{NewTask, StoreError, TaskId};
use jiff::Timestamp;
use sqlx::Row;
use sqlx::postgres::PgBindIterExt;
use std::collections::HashSet;

/// Inserts in the order given (the first of two same `(kind, key)` in a batch wins), skipping
/// taken pairs; returns the ids it created.
const INSERT: &str = "
INSERT INTO {schema}.tasks
    (id, kind, key, payload, max_attempts, run_at, expires_at, traceparent, created_at, updated_at)
SELECT n.id, n.kind, n.key, n.payload, n.max_attempts, n.run_at, n.expires_at, n.traceparent,
       n.created_at, n.created_at
FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::bigint[], $6::timestamptz[],
            $7::timestamptz[], $8::text[], $9::timestamptz[])
     WITH ORDINALITY AS n(id, kind, key, payload, max_attempts, run_at, expires_at, traceparent,
                          created_at, ord)
ORDER BY n.ord
ON CONFLICT (kind, key) DO NOTHING
RETURNING id";

/// The tasks holding the given `(kind, key)` pairs, by 1-based position in the lists.
const EXISTING: &str = "
SELECT n.ord, t.id, t.payload
FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS n(kind, key, ord)
JOIN {schema}.tasks AS t ON t.kind = n.kind AND t.key = n.key";

/// Two batches inserting the same new keys in opposite orders can deadlock on the unique
/// index; PostgreSQL then aborts one, which wrote nothing and is simply run again.
const DEADLOCK_RETRIES: usize = 5;

/// Small batches join the group commit (concurrent callers share one statement); an empty
/// or large one is written on its own.
impl Enqueue for PostgresStore {
    fn enqueue(&self, p: EnqueueParams) -> BoxFuture<'_, Result<Vec<EnqueueResult>, StoreError>> {
        Box::pin(async move {
            if p.tasks.is_empty() || p.tasks.len() > group_commit::SMALL {
                enqueue(&self.db, &p).await
            } else {
                self.committer.submit(p).await
            }
        })
    }
}

pub(crate) async fn enqueue(db: &Db, p: &EnqueueParams) -> Result<Vec<EnqueueResult>, StoreError> {
    enqueue_rows(db, &p.tasks, &vec![p.now; p.tasks.len()]).await
}

/// Enqueues `tasks`, each created at its entry of `created_at` (the group commit merges
/// calls made at different moments).
pub(crate) async fn enqueue_rows(
    db: &Db,
    tasks: &[NewTask],
    created_at: &[Timestamp],
) -> Result<Vec<EnqueueResult>, StoreError> {
    if tasks.is_empty() {
        return Ok(Vec::new());
    }
    let created = insert(db, tasks, created_at).await?;
    let mut results: Vec<Option<EnqueueResult>> = tasks
        .iter()
        .map(|t| {
            created
                .contains(&t.id)
                .then_some(EnqueueResult::Created(t.id))
        })
        .collect();
    let taken: Vec<usize> = (0..results.len())
        .filter(|i| results[*i].is_none())
        .collect();
    if !taken.is_empty() {
        let rows = sqlx::query(db.schema.sql(EXISTING))
            .bind(taken.iter().map(|i| tasks[*i].kind.as_str()).bind_iter())
            .bind(taken.iter().map(|i| tasks[*i].key.as_str()).bind_iter())
            .fetch_all(&db.pool)
            .await
            .map_err(db_err)?;
        for row in &rows {
            let ord: i64 = row.try_get("ord").map_err(db_err)?;
            let Id(id) = row.try_get("id").map_err(db_err)?;
            let payload: &[u8] = row.try_get("payload").map_err(db_err)?;
            let i = usize::try_from(ord - 1)
                .ok()
                .and_then(|k| taken.get(k))
                .copied()
                .ok_or_else(|| StoreError::Database(format!("bad position {ord}")))?;
            let t = &tasks[i];
            results[i] = Some(if id == t.id {
                // The same task sent again (a repeated request with the same id).
                EnqueueResult::Created(id)
            } else if backstop_core::idempotency::same_payload(payload, &t.payload) {
                EnqueueResult::Existing(id)
            } else {
                EnqueueResult::Conflict(id)
            });
        }
    }
    results
        .into_iter()
        .zip(tasks)
        .map(|(r, t)| {
            r.ok_or_else(|| {
                StoreError::Database(format!("enqueued task {}/{} has no row", t.kind, t.key))
            })
        })
        .collect()
}

async fn insert(
    db: &Db,
    t: &[NewTask],
    created_at: &[Timestamp],
) -> Result<HashSet<TaskId>, StoreError> {
    let mut tries = 0;
    loop {
        let res = sqlx::query_scalar::<_, Id>(db.schema.sql(INSERT))
            .bind(t.iter().map(|t| Id(t.id)).bind_iter())
            .bind(t.iter().map(|t| t.kind.as_str()).bind_iter())
            .bind(t.iter().map(|t| t.key.as_str()).bind_iter())
            .bind(t.iter().map(|t| t.payload.as_slice()).bind_iter())
            .bind(t.iter().map(|t| i64::from(t.max_attempts)).bind_iter())
            .bind(t.iter().map(|t| Time(t.run_at)).bind_iter())
            .bind(t.iter().map(|t| t.expires_at.map(Time)).bind_iter())
            .bind(t.iter().map(|t| t.traceparent.as_deref()).bind_iter())
            .bind(created_at.iter().map(|at| Time(*at)).bind_iter())
            .fetch_all(&db.pool)
            .await;
        match res {
            Ok(ids) => return Ok(ids.into_iter().map(|Id(id)| id).collect()),
            Err(e) if tries < DEADLOCK_RETRIES && crate::is_deadlock(&e) => {
                tries += 1;
                tracing::debug!(tries, "enqueue deadlocked with another batch; again");
            }
            Err(e) => return Err(db_err(e)),
        }
    }
}
