//! Enqueue: the whole batch is one `INSERT … SELECT FROM UNNEST(…) ON CONFLICT DO NOTHING`, a
//! single statement and so a single atomic, durable transaction (one round trip when every
//! task is new). The `(kind, key)` pairs that were already taken are then looked up to tell an
//! idempotent repeat from a conflict; those rows never change, so the lookup needs no
//! transaction of its own. While no recent batch met a taken pair, a batch is first written
//! without `ON CONFLICT` (cheaper), and again with it if a pair was taken after all.
//!
//! A batch in which some task carries an origin (a broker bridge's) is written in a
//! transaction instead: each repeat of it with the same payload appends a `redelivered` event
//! carrying its origin, and that event commits with the enqueue or not at all.
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
use sqlx::postgres::PgBindIterExt;
use sqlx::{PgConnection, Row};
use std::collections::HashSet;

/// The insert of a batch, up to its conflict clause: the intake gives the status (`pending`;
/// `failed` for a dead letter from the start, `Intake::Failed`, its reason also its last error;
/// `compensated`, `Intake::Compensated`). A grouped row takes its place in its group, and is
/// parked behind an open task of it, by the insert trigger of 0013_groups (as an outbox row
/// is), row by row in this order: by kind and group, then as given. Each group's tasks keep
/// the order given; the groups' rows, which the trigger locks until the commit, are locked in
/// group order, as every other writer of many groups locks them (`complete`, `lease`), so that
/// none deadlocks with another. (Of two tasks with the same `(kind, key)` in one batch, the
/// first wins, or the one of the lesser group when they name different groups.)
macro_rules! insert_batch {
    () => {
        "
INSERT INTO {schema}.tasks
    (id, kind, key, payload, max_attempts, run_at, expires_at, traceparent, status, reason,
     last_error, origin, created_at, updated_at, grp)
SELECT n.id, n.kind, n.key, n.payload, n.max_attempts, n.run_at, n.expires_at, n.traceparent,
       n.status, n.reason, CASE WHEN n.status = 'failed' THEN n.reason END,
       n.origin, n.created_at, n.created_at, n.grp
FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::bigint[], $6::timestamptz[],
            $7::timestamptz[], $8::text[], $9::timestamptz[], $10::text[], $11::text[],
            $12::text[], $13::text[])
     WITH ORDINALITY AS n(id, kind, key, payload, max_attempts, run_at, expires_at, traceparent,
                          created_at, reason, origin, status, grp, ord)
ORDER BY n.kind COLLATE \"C\", n.grp COLLATE \"C\", n.ord
"
    };
}

/// Inserts the batch (the first of two same `(kind, key)` in a batch wins), skipping taken
/// pairs; returns the ids it created.
const INSERT: &str = concat!(
    insert_batch!(),
    "ON CONFLICT (kind, key) DO NOTHING\nRETURNING id"
);

/// [`INSERT`] without `ON CONFLICT`, for a batch expected to be all new: the speculative
/// insertion `ON CONFLICT` needs costs about a fifth of an insert's time (measured: 100,000
/// rows in 1.06 s plain, 1.28 s with it). A taken pair fails the whole statement, which wrote
/// nothing then, and the batch is written again with [`INSERT`].
const INSERT_NEW: &str = concat!(insert_batch!(), "RETURNING id");

/// The tasks holding the given `(kind, key)` pairs, by 1-based position in the lists.
const EXISTING: &str = "
SELECT n.ord, t.id, t.payload
FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS n(kind, key, ord)
JOIN {schema}.tasks AS t ON t.kind = n.kind AND t.key = n.key";

/// One `redelivered` event per repeat with an origin, in the batch's order.
const REDELIVERED: &str = "
INSERT INTO {schema}.events (task_id, type, at, origin)
SELECT n.task_id, 'redelivered', n.at, n.origin
FROM UNNEST($1::uuid[], $2::timestamptz[], $3::text[]) WITH ORDINALITY AS n(task_id, at, origin, ord)
ORDER BY n.ord";

/// Two batches inserting the same new keys in opposite orders can deadlock on the unique
/// index; PostgreSQL then aborts one, which wrote nothing and is simply run again.
const DEADLOCK_RETRIES: usize = 5;

/// Why a write stopped: a database error (a deadlock is worth another try) or an answer.
enum Fail {
    Sql(sqlx::Error),
    Store(StoreError),
}

impl From<sqlx::Error> for Fail {
    fn from(e: sqlx::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

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
    let redeliveries = tasks.iter().any(|t| t.origin.is_some());
    let mut tries = 0;
    loop {
        let result = if redeliveries {
            in_transaction(db, tasks, created_at).await
        } else {
            match db.pool.acquire().await {
                Ok(mut conn) => write(db, &mut conn, tasks, created_at, Alone::Yes).await,
                Err(e) => Err(e.into()),
            }
        };
        match result {
            Ok(results) => return Ok(results),
            Err(Fail::Sql(e)) if tries < DEADLOCK_RETRIES && crate::is_deadlock(&e) => {
                tries += 1;
                tracing::debug!(tries, "enqueue deadlocked with another batch; again");
            }
            Err(Fail::Sql(e)) => return Err(db_err(e)),
            Err(Fail::Store(e)) => return Err(e),
        }
    }
}

/// The tasks and the `redelivered` events of their repeats, in one transaction. The lookup
/// after the insert sees every row the insert skipped: the insert waited for any concurrent
/// one of the same key to commit, and each statement of a READ COMMITTED transaction takes a
/// new snapshot.
async fn in_transaction(
    db: &Db,
    tasks: &[NewTask],
    created_at: &[Timestamp],
) -> Result<Vec<EnqueueResult>, Fail> {
    let mut tx = db.pool.begin().await?;
    let written = async {
        let results = write(db, &mut tx, tasks, created_at, Alone::No).await?;
        redeliver(db, &mut tx, tasks, created_at, &results).await?;
        Ok::<_, Fail>(results)
    }
    .await;
    match written {
        Ok(results) => {
            tx.commit().await?;
            Ok(results)
        }
        Err(e) => {
            // At once, rather than when the connection is next used: its row locks would
            // hold up other enqueues of these keys until then.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// Appends a `redelivered` event for each task told `Existing` that came with an origin.
async fn redeliver(
    db: &Db,
    conn: &mut PgConnection,
    tasks: &[NewTask],
    created_at: &[Timestamp],
    results: &[EnqueueResult],
) -> Result<(), Fail> {
    let events: Vec<(TaskId, Timestamp, &str)> = tasks
        .iter()
        .zip(created_at)
        .zip(results)
        .filter_map(|((t, at), r)| match (r, &t.origin) {
            (EnqueueResult::Existing(id), Some(origin)) => Some((*id, *at, origin.as_str())),
            _ => None,
        })
        .collect();
    if events.is_empty() {
        return Ok(());
    }
    sqlx::query(db.schema.sql(REDELIVERED))
        .bind(events.iter().map(|e| Id(e.0)).bind_iter())
        .bind(events.iter().map(|e| Time(e.1)).bind_iter())
        .bind(events.iter().map(|e| e.2).bind_iter())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Inserts `tasks` and tells each one's fate.
async fn write(
    db: &Db,
    conn: &mut PgConnection,
    tasks: &[NewTask],
    created_at: &[Timestamp],
    alone: Alone,
) -> Result<Vec<EnqueueResult>, Fail> {
    let created = insert(db, conn, tasks, created_at, alone).await?;
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
            .fetch_all(&mut *conn)
            .await?;
        for row in &rows {
            let ord: i64 = row.try_get("ord")?;
            let Id(id) = row.try_get("id")?;
            let payload: &[u8] = row.try_get("payload")?;
            let i = usize::try_from(ord - 1)
                .ok()
                .and_then(|k| taken.get(k))
                .copied()
                .ok_or_else(|| StoreError::Database(format!("bad position {ord}").into()))?;
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
    Ok(results
        .into_iter()
        .zip(tasks)
        .map(|(r, t)| {
            r.ok_or_else(|| {
                StoreError::Database(
                    format!("enqueued task {}/{} has no row", t.kind, t.key).into(),
                )
            })
        })
        .collect::<Result<_, _>>()?)
}

/// Whether a write is a statement of its own, which may fail and be written again, or part of
/// a transaction, which a failed statement would abort.
#[derive(Clone, Copy, PartialEq)]
enum Alone {
    Yes,
    No,
}

/// Inserts `t`, returning the ids created: as all new first when the batch is alone and no
/// recent batch met a taken pair, otherwise (or when that fails on one) with `ON CONFLICT`.
async fn insert(
    db: &Db,
    conn: &mut PgConnection,
    t: &[NewTask],
    created_at: &[Timestamp],
    alone: Alone,
) -> Result<HashSet<TaskId>, sqlx::Error> {
    if alone == Alone::Yes && db.optimism.hopeful() {
        match insert_with(db, conn, t, created_at, INSERT_NEW).await {
            Err(e) if is_unique_violation(&e) => db.optimism.disappointed(),
            done => return done,
        }
    }
    let created = insert_with(db, conn, t, created_at, INSERT).await?;
    if created.len() == t.len() {
        db.optimism.one_more_batch();
    }
    Ok(created)
}

/// Whether `e` is a unique violation (SQLSTATE 23505).
fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "23505")
}

async fn insert_with(
    db: &Db,
    conn: &mut PgConnection,
    t: &[NewTask],
    created_at: &[Timestamp],
    sql: &str,
) -> Result<HashSet<TaskId>, sqlx::Error> {
    let ids = sqlx::query_scalar::<_, Id>(db.schema.sql(sql))
        .bind(t.iter().map(|t| Id(t.id)).bind_iter())
        .bind(t.iter().map(|t| t.kind.as_str()).bind_iter())
        .bind(t.iter().map(|t| t.key.as_str()).bind_iter())
        .bind(t.iter().map(|t| t.payload.as_slice()).bind_iter())
        .bind(t.iter().map(|t| i64::from(t.max_attempts)).bind_iter())
        .bind(t.iter().map(|t| Time(t.run_at)).bind_iter())
        .bind(t.iter().map(|t| t.expires_at.map(Time)).bind_iter())
        .bind(t.iter().map(|t| t.traceparent.as_deref()).bind_iter())
        .bind(created_at.iter().map(|at| Time(*at)).bind_iter())
        .bind(t.iter().map(|t| t.intake.reason()).bind_iter())
        .bind(t.iter().map(|t| t.origin.as_deref()).bind_iter())
        .bind(t.iter().map(|t| t.intake.status().as_str()).bind_iter())
        .bind(t.iter().map(|t| t.group.as_deref()).bind_iter())
        .fetch_all(&mut *conn)
        .await?;
    Ok(ids.into_iter().map(|Id(id)| id).collect())
}
