//! Enqueue: a batch in one transaction, idempotent by `(kind, key)`, results in order.
//!
//! A batch of new keys is written without looking first (see [`insert_all_new`]): one
//! `INSERT` alone when it fits one statement, otherwise its statements in one transaction,
//! rolled back whole when a key turns out taken — after which the next batches look first for
//! a while ([`Optimism`](backstop_core::optimism::Optimism)). Looking first means one lookup of
//! which `(kind, key)` already exist (one `OR` chain over the unique index per list of pairs),
//! deciding each task's fate in order — an earlier task of the same batch counts as existing —
//! and inserting only the new ones, many rows per `INSERT`. A concurrent enqueue of the same
//! `(kind, key)` that commits first makes the `INSERT` fail with a duplicate key; the
//! transaction is then tried again and finds the winner's row. (`INSERT IGNORE` would also turn
//! a too-long value into a silent truncation, and `ON DUPLICATE KEY UPDATE` cannot tell a new
//! row from an existing one when the driver asks for found rows, as sqlx does.)
//!
//! The [`Enqueue`] impl is here, next to its SQL.

use crate::Db;
use crate::MysqlStore;
use crate::row::{col, id_bytes, parse_id, status_code, text, to_ms};
use crate::shapes::{chunks, padded_lists, repeat};
use crate::tx::{DUPLICATE, Fail, Retry, db_err, error_number, transaction, worth_another_try};
use backstop_core::group_commit;
use backstop_core::idempotency::same_payload;
use backstop_core::store::{BoxFuture, Enqueue};
use backstop_core::store::{EnqueueParams, EnqueueResult};
use backstop_core::{NewTask, StoreError, TaskId};
use jiff::Timestamp;
use sqlx::MySqlConnection;
use std::borrow::Cow;
use std::collections::HashMap;

/// Rows per `INSERT`, largest first.
const SHAPES: &[usize] = &[128, 32, 8, 2, 1];

/// Payload bytes per `INSERT` before a smaller shape is used: well below the server's
/// `max_allowed_packet` (16 MiB on MariaDB, 64 MiB on MySQL by default).
const MAX_STATEMENT_BYTES: usize = 4 << 20;

/// A task with a reason is a dead letter from the start (`Intake::Failed`): `failed`, with the
/// reason as its last error too. A grouped task (`grp`) takes its place in its group, and is
/// parked when it has to wait, in the table's insert trigger (see `groups`), as an outbox row
/// does.
const INSERT: &str = "INSERT INTO {tasks} (id, kind, `key`, payload, max_attempts, run_at, \
                      expires_at, traceparent, status, reason, last_error, origin, grp, \
                      created_at, updated_at) VALUES ";
const ROW: &str = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// One `redelivered` event: a repeat with an origin (a broker's redelivery).
const REDELIVERED: &str = "INSERT INTO {events} (task_id, type, at, origin) VALUES ";
const EVENT_ROW: &str = "(?, 'redelivered', ?, ?)";

const EXISTING: &str = "SELECT id, kind, `key`, payload FROM {tasks} WHERE ";
const PAIR: &str = "(kind = ? AND `key` = ?)";

/// What the batch knows of one `(kind, key)`: the task's id and payload.
type Known<'a> = HashMap<(String, String), (TaskId, Cow<'a, [u8]>)>;

/// A task to insert, with its creation time (epoch milliseconds).
#[derive(Clone, Copy)]
struct Row<'a> {
    task: &'a NewTask,
    created_at: i64,
}

/// Small batches join the group commit (concurrent callers share one statement); an empty
/// or large one is written on its own.
impl Enqueue for MysqlStore {
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
    let rows: Vec<Row<'_>> = tasks
        .iter()
        .zip(created_at)
        .map(|(task, at)| Row {
            task,
            created_at: to_ms(*at),
        })
        .collect();
    if let Some(results) = insert_all_new(db, &rows).await? {
        return Ok(results);
    }
    transaction!(db, Retry::LocksAndDuplicates, |conn| {
        enqueue_once(db, conn, &rows).await
    })
}

/// The common case: a batch of new keys, inserted without looking first. A batch that fits one
/// `INSERT` (a single task, say) is that statement alone, outside any transaction — one
/// statement is atomic by itself; a larger one, while no recent batch met a taken key (see
/// [`Optimism`](backstop_core::optimism::Optimism)), is its statements in one transaction,
/// rolled back whole when a key turns out taken. `None` when a key already exists (or the
/// batch repeats a pair, or the statement lost a lock race, or recent batches met taken
/// keys): the caller looks before inserting, in a transaction.
async fn insert_all_new(
    db: &Db,
    rows: &[Row<'_>],
) -> Result<Option<Vec<EnqueueResult>>, StoreError> {
    let mut pairs: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.task.kind.as_str(), r.task.key.as_str()))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    if pairs.len() != rows.len() {
        return Ok(None);
    }
    let one_statement = matches!(by_size(rows).as_slice(), [g] if chunks(g, SHAPES).len() == 1);
    let inserted = if one_statement {
        let mut conn = db.pool.acquire().await.map_err(db_err)?;
        insert(db, &mut conn, rows).await
    } else if db.optimism.hopeful() {
        let mut tx = db.pool.begin().await.map_err(db_err)?;
        match insert(db, &mut tx, rows).await {
            Ok(()) => tx.commit().await.map_err(Fail::Sql),
            Err(e) => {
                // At once: its row locks would hold up other enqueues of these keys.
                tx.rollback().await.map_err(db_err)?;
                if matches!(&e, Fail::Sql(e) if error_number(e) == Some(DUPLICATE)) {
                    db.optimism.disappointed();
                }
                Err(e)
            }
        }
    } else {
        return Ok(None);
    };
    match inserted {
        Ok(()) => Ok(Some(
            rows.iter()
                .map(|r| EnqueueResult::Created(r.task.id))
                .collect(),
        )),
        Err(Fail::Sql(e)) if worth_another_try(&e, Retry::LocksAndDuplicates) => Ok(None),
        Err(Fail::Sql(e)) => Err(db_err(e)),
        Err(Fail::Store(e)) => Err(e),
        // Not met here: an insert locks groups in its trigger.
        Err(Fail::Relock(_)) => Ok(None),
    }
}

async fn enqueue_once<'a>(
    db: &Db,
    conn: &mut MySqlConnection,
    rows: &[Row<'a>],
) -> Result<Vec<EnqueueResult>, Fail> {
    let mut known = existing(db, conn, rows).await?;
    let mut results = Vec::with_capacity(rows.len());
    let mut new = Vec::new();
    let mut redelivered = Vec::new();
    for row in rows {
        let t = row.task;
        let pair = (t.kind.clone(), t.key.clone());
        results.push(match known.get(&pair) {
            Some((id, _)) if *id == t.id => EnqueueResult::Created(*id),
            Some((id, payload)) if same_payload(payload, &t.payload) => {
                if let Some(origin) = &t.origin {
                    redelivered.push((*id, row.created_at, origin.as_str()));
                }
                EnqueueResult::Existing(*id)
            }
            Some((id, _)) => EnqueueResult::Conflict(*id),
            None => {
                known.insert(pair, (t.id, Cow::Borrowed(&t.payload)));
                new.push(*row);
                EnqueueResult::Created(t.id)
            }
        });
    }
    if new.len() == rows.len() {
        db.optimism.one_more_batch();
    }
    insert(db, conn, &new).await?;
    redeliver(db, conn, &redelivered).await?;
    Ok(results)
}

/// Appends the `redelivered` events (task, at, origin), in order, in the enqueue's
/// transaction.
async fn redeliver(
    db: &Db,
    conn: &mut MySqlConnection,
    events: &[(TaskId, i64, &str)],
) -> Result<(), Fail> {
    for chunk in chunks(events, SHAPES) {
        let sql = format!("{REDELIVERED}{}", repeat(EVENT_ROW, ", ", chunk.len()));
        let mut q = sqlx::query(db.tables.q(&sql));
        for (id, at, origin) in chunk {
            q = q.bind(id_bytes(id)).bind(*at).bind(*origin);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// The rows that already hold the batch's `(kind, key)` pairs.
async fn existing<'a>(
    db: &Db,
    conn: &mut MySqlConnection,
    rows: &[Row<'_>],
) -> Result<Known<'a>, Fail> {
    let mut pairs: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.task.kind.as_str(), r.task.key.as_str()))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut known = Known::new();
    for list in padded_lists(&pairs) {
        let sql = format!("{EXISTING}{}", repeat(PAIR, " OR ", list.len()));
        let mut q = sqlx::query(db.tables.q(&sql));
        for (kind, key) in list {
            q = q.bind(kind).bind(key);
        }
        for r in q.fetch_all(&mut *conn).await? {
            let id = parse_id(&col::<Vec<u8>, _>(&r, "id")?)?;
            let payload: Vec<u8> = col(&r, "payload")?;
            known.insert(
                (text(&r, "kind")?, text(&r, "key")?),
                (id, Cow::Owned(payload)),
            );
        }
    }
    Ok(known)
}

/// Inserts the new tasks, many rows per statement.
async fn insert(db: &Db, conn: &mut MySqlConnection, new: &[Row<'_>]) -> Result<(), Fail> {
    let new = in_lock_order(new);
    for group in by_size(&new) {
        for chunk in chunks(group, SHAPES) {
            let sql = format!("{INSERT}{}", repeat(ROW, ", ", chunk.len()));
            let mut q = sqlx::query(db.tables.q(&sql));
            for &Row {
                task: t,
                created_at,
            } in chunk
            {
                q = q
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
                    .bind(t.origin.as_deref())
                    .bind(t.group.as_deref())
                    .bind(created_at)
                    .bind(created_at);
            }
            q.execute(&mut *conn).await?;
        }
    }
    Ok(())
}

/// The rows in the order their inserts lock ordering groups (the insert trigger locks each
/// grouped row's group until the commit): a batch that names two groups or more has them
/// sorted by (kind, group), ungrouped rows first, so that concurrent batches take the groups
/// in one order and never wait for each other crosswise. The sort is stable: a group's rows
/// keep their batch order, which is the group's order. Any other batch as it is.
fn in_lock_order<'a, 'b>(rows: &'b [Row<'a>]) -> Cow<'b, [Row<'a>]> {
    let group = |r: &Row<'a>| Some((r.task.kind.as_str(), r.task.group.as_deref()?));
    let mut groups = rows.iter().filter_map(group);
    let Some(first) = groups.next() else {
        return Cow::Borrowed(rows);
    };
    if groups.all(|g| g == first) {
        return Cow::Borrowed(rows);
    }
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| group(a).cmp(&group(b)));
    Cow::Owned(sorted)
}

/// Consecutive runs of tasks whose payloads together stay within [`MAX_STATEMENT_BYTES`]
/// (a run holds at least one task, however large).
fn by_size<'a, 'b>(tasks: &'b [Row<'a>]) -> Vec<&'b [Row<'a>]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, r) in tasks.iter().enumerate() {
        let size = r.task.payload.len() + r.task.key.len() + 64;
        if i > start && bytes + size > MAX_STATEMENT_BYTES {
            out.push(&tasks[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < tasks.len() {
        out.push(&tasks[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_payloads_are_split_across_statements() {
        let big = |n: usize| NewTask {
            id: TaskId::new(),
            kind: "k".into(),
            key: format!("k{n}"),
            payload: vec![b'x'; n],
            max_attempts: 1,
            run_at: jiff::Timestamp::UNIX_EPOCH,
            expires_at: None,
            traceparent: None,
            intake: Default::default(),
            origin: None,
            group: None,
        };
        let tasks: Vec<NewTask> = vec![big(3 << 20), big(3 << 20), big(10), big(9 << 20)];
        let rows: Vec<Row<'_>> = tasks
            .iter()
            .map(|task| Row {
                task,
                created_at: 0,
            })
            .collect();
        let groups = by_size(&rows);
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            vec![1, 2, 1]
        );
    }

    #[test]
    fn rows_of_several_groups_are_inserted_in_group_order() {
        let t = |key: &str, group: Option<&str>| NewTask {
            id: TaskId::new(),
            kind: "k".into(),
            key: key.into(),
            payload: b"{}".to_vec(),
            max_attempts: 1,
            run_at: jiff::Timestamp::UNIX_EPOCH,
            expires_at: None,
            traceparent: None,
            intake: Default::default(),
            origin: None,
            group: group.map(String::from),
        };
        let rows_of = |tasks: &[NewTask]| -> Vec<String> {
            let rows: Vec<Row<'_>> = tasks
                .iter()
                .map(|task| Row {
                    task,
                    created_at: 0,
                })
                .collect();
            in_lock_order(&rows)
                .iter()
                .map(|r| r.task.key.clone())
                .collect()
        };
        let mixed = [
            t("b1", Some("B")),
            t("u1", None),
            t("a1", Some("A")),
            t("b2", Some("B")),
            t("u2", None),
            t("a2", Some("A")),
        ];
        assert_eq!(rows_of(&mixed), ["u1", "u2", "a1", "a2", "b1", "b2"]);
        let one_group = [t("b1", Some("B")), t("u1", None), t("b2", Some("B"))];
        assert_eq!(rows_of(&one_group), ["b1", "u1", "b2"], "as it is");
    }
}
