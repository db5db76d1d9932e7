//! Completion: a batch of attempt outcomes in one transaction, each fenced by `epoch` and the
//! running status, with the starts of held tasks that ride along (see `start`).
//!
//! Per list of up to 64 completions, three round trips whatever the list's length: a locking
//! read of the leases still held (`FOR UPDATE`, in index order, so concurrent batches lock in
//! one order), one multi-row `UPDATE` of those rows (each column a `CASE` over the row's
//! `seq`), and the timeline rows — the attempts that are retried (the next attempt reuses the
//! row's attempt columns) and the stale completions, which are rejected and reported back.
//! Tasks of an ordering group that end add two or three more (see `groups`); others none.

use crate::Db;
use crate::groups::{Ending, GroupLocks, Member, member};
use crate::row::{col, id_bytes, parse_id, status_code, to_ms};
use crate::shapes::{chunks, padded, repeat};
use crate::start;
use crate::tx::{Fail, Retry, transaction};
use backstop_core::store::{CompleteParams, CompleteResult, Completion, LeaseRef};
use backstop_core::{Status, StoreError};
use sqlx::MySqlConnection;
use std::collections::{HashMap, HashSet};

/// Completions per list. Each `CASE` scans its `WHEN`s for every row, so a statement costs
/// the square of its rows: measured with the `store_phases` example, 64 beat 32 (more round
/// trips) and 128 or 256 (about 10% and 40% slower).
const LIST: usize = 64;

/// The listed tasks, locked until the commit; which of their leases are still held is decided
/// on the rows read. Only `id IN (…)` is in the predicate, so the unique `task_id` index is
/// the only one that fits and exactly the listed rows are locked, in id order. With
/// `status = 1` in the predicate the optimizer sometimes walked the `leased` index instead,
/// locking (for a moment each) every running row: concurrent completions deadlocked about ten
/// times per run of the concurrency suite and one ran out of tries under load in CI.
/// The row's group comes along, for the promotion within it (see `groups`).
pub(crate) const HELD: &str =
    "SELECT seq, id, epoch, attempts, status, kind, grp, grp_skip FROM {tasks} WHERE id IN (";

/// The columns a completion sets, each from its own `CASE seq WHEN ? THEN ? … END`.
const CASE_COLUMNS: [&str; 10] = [
    "status",
    "run_at",
    "last_error",
    "reason",
    "att_started_at",
    "att_ended_at",
    "att_outcome",
    "att_error",
    "att_http_status",
    "att_worker",
];

/// Events per `INSERT`, largest first.
const SHAPES: &[usize] = &[64, 16, 4, 1];

/// Retried attempts. Binds per row: task id, end, attempt, outcome, error, HTTP status,
/// duration, worker.
const RECORD_RETRIES: &str = "INSERT INTO {events} \
    (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker) VALUES ";
const RETRY_ROW: &str = "(?, 'attempt', ?, ?, ?, ?, ?, ?, ?)";

/// Completions that came after their lease was lost. Binds per row: task id, now, attempt,
/// outcome, error, HTTP status, worker.
const RECORD_STALE: &str = "INSERT INTO {events} \
    (task_id, type, at, attempt, outcome, error, http_status, worker) VALUES ";
const STALE_ROW: &str = "(?, 'stale_completion', ?, ?, ?, ?, ?, ?)";

pub(crate) async fn complete(db: &Db, p: &CompleteParams) -> Result<CompleteResult, StoreError> {
    let starts = p.starts.as_ref().filter(|s| !s.tasks.is_empty());
    if p.completions.is_empty() && starts.is_none() && p.claims.is_empty() {
        return Ok(CompleteResult::default());
    }
    let began = std::time::Instant::now();
    let now = to_ms(p.now);
    // The starts lock their rows after the completions' (a deadlock with a heartbeat that
    // locks both at once is detected at once by InnoDB, and `Retry::Locks` runs it again).
    let mut groups = GroupLocks::default();
    let (stale, not_started, claimed) = transaction!(db, Retry::Locks, |conn| {
        groups.begin(db, conn).await?;
        let stale = apply_all(db, conn, &p.completions, now, &mut groups).await?;
        let not_started = match starts {
            Some(s) => start::start_all(db, conn, s).await?,
            None => Vec::new(),
        };
        // After the completions: the slots they freed are free to these claims.
        let mut claimed = Vec::with_capacity(p.claims.len());
        for c in &p.claims {
            claimed.push(crate::claim::claim_in(db, conn, c, began).await?);
        }
        Ok((stale, not_started, claimed))
    })?;
    if !stale.is_empty() {
        tracing::warn!(count = stale.len(), "rejected stale completions");
    }
    Ok(CompleteResult {
        stale,
        not_started,
        claimed,
    })
}

/// A completion whose lease still holds: its row and attempt number.
struct Held<'a> {
    seq: i64,
    attempts: i64,
    c: &'a Completion,
}

/// A locked row whose lease still holds: its `seq`, attempts and group.
struct Locked {
    seq: i64,
    attempts: i64,
    group: Option<Member>,
}

/// Applies the completions in order; returns the stale ones. A lease completed twice in one
/// batch is applied once: the second completion is stale, as it would be in a later batch.
/// The groups of the tasks that end are locked before their rows change, and promoted once
/// all have changed (see `groups`).
async fn apply_all(
    db: &Db,
    conn: &mut MySqlConnection,
    completions: &[Completion],
    now: i64,
    groups: &mut GroupLocks,
) -> Result<Vec<LeaseRef>, Fail> {
    let mut done = HashSet::new();
    let mut stale = Vec::new();
    let mut ended = Ending::default();
    for chunk in completions.chunks(LIST) {
        let mut locked = lock_held(db, conn, chunk).await?;
        let mut held = Vec::with_capacity(chunk.len());
        let mut lost = Vec::new();
        let mut ending = Ending::default();
        for c in chunk {
            match locked.remove(&c.lease) {
                Some(l) if done.insert(c.lease) => {
                    ending.note(l.group.as_ref(), c.status);
                    held.push(Held {
                        seq: l.seq,
                        attempts: l.attempts,
                        c,
                    })
                }
                _ => lost.push(c),
            }
        }
        if !ending.is_empty() {
            groups.take(db, conn, &ending).await?;
            ended.extend(ending);
        }
        update(db, conn, &held, now).await?;
        let retried: Vec<&Held> = held
            .iter()
            .filter(|h| h.c.status == Status::Pending)
            .collect();
        record_retries(db, conn, &retried).await?;
        record_stale(db, conn, &lost, now).await?;
        stale.extend(lost.iter().map(|c| c.lease));
    }
    if !ended.is_empty() {
        ended.promote(db, conn).await?;
    }
    Ok(stale)
}

/// The chunk's leases still held, each with its row, attempt count and group; locked.
async fn lock_held(
    db: &Db,
    conn: &mut MySqlConnection,
    chunk: &[Completion],
) -> Result<HashMap<LeaseRef, Locked>, Fail> {
    let n = padded(chunk.len());
    let sql = format!("{HELD}{}) FOR UPDATE", repeat("?", ", ", n));
    let mut q = sqlx::query(db.tables.q(&sql));
    for i in 0..n {
        let l = &chunk[i.min(chunk.len() - 1)].lease;
        q = q.bind(id_bytes(&l.id));
    }
    let mut held = HashMap::with_capacity(chunk.len());
    for r in q.fetch_all(&mut *conn).await? {
        if col::<i8, _>(&r, "status")? != status_code(Status::Running) {
            continue;
        }
        let lease = LeaseRef {
            id: parse_id(&col::<Vec<u8>, _>(&r, "id")?)?,
            epoch: col(&r, "epoch")?,
        };
        // A lease of another epoch is not held: the row was rescued and claimed again.
        if chunk.iter().any(|c| c.lease == lease) {
            let locked = Locked {
                seq: col(&r, "seq")?,
                attempts: col(&r, "attempts")?,
                group: member(&r)?,
            };
            held.insert(lease, locked);
        }
    }
    Ok(held)
}

/// One `UPDATE` of every held row: the task's new state, and the attempt's facts on the row
/// when the attempt ends the task (a retried attempt goes to the timeline instead).
async fn update(
    db: &Db,
    conn: &mut MySqlConnection,
    held: &[Held<'_>],
    now: i64,
) -> Result<(), Fail> {
    if held.is_empty() {
        return Ok(());
    }
    let n = padded(held.len());
    let rows: Vec<&Held> = (0..n).map(|i| &held[i.min(held.len() - 1)]).collect();
    let case = format!("CASE seq {} END", repeat("WHEN ? THEN ?", " ", n));
    let sets: Vec<String> = CASE_COLUMNS
        .iter()
        .map(|c| match *c {
            "run_at" => format!("run_at = COALESCE({case}, run_at)"),
            _ => format!("{c} = {case}"),
        })
        .collect();
    let sql = format!(
        "UPDATE {{tasks}} SET {}, lease_owner = NULL, lease_until = NULL, updated_at = ? \
         WHERE seq IN ({})",
        sets.join(", "),
        repeat("?", ", ", n)
    );
    let mut q = sqlx::query(db.tables.q(&sql));
    for column in CASE_COLUMNS {
        for h in &rows {
            let c = h.c;
            let ends = c.status != Status::Pending;
            q = q.bind(h.seq);
            q = match column {
                "status" => q.bind(status_code(c.status)),
                "run_at" => q.bind(c.run_at.map(to_ms)),
                "last_error" => q.bind(c.last_error.as_deref()),
                "reason" => q.bind(c.reason.as_deref()),
                "att_started_at" => q.bind(ends.then(|| to_ms(c.started_at))),
                "att_ended_at" => q.bind(ends.then(|| to_ms(c.ended_at))),
                "att_outcome" => q.bind(ends.then(|| c.outcome.as_str())),
                "att_error" => q.bind(
                    c.last_error
                        .as_deref()
                        .or(c.note.as_deref())
                        .filter(|_| ends),
                ),
                "att_http_status" => q.bind(c.http_status.map(i32::from).filter(|_| ends)),
                "att_worker" => q.bind(ends.then_some(c.worker.as_str())),
                other => unreachable!("no value for {other}"),
            };
        }
    }
    q = q.bind(now);
    for h in &rows {
        q = q.bind(h.seq);
    }
    q.execute(&mut *conn).await?;
    Ok(())
}

/// The retried attempts, numbered from their rows.
async fn record_retries(
    db: &Db,
    conn: &mut MySqlConnection,
    retried: &[&Held<'_>],
) -> Result<(), Fail> {
    for chunk in chunks(retried, SHAPES) {
        let sql = format!("{RECORD_RETRIES}{}", repeat(RETRY_ROW, ", ", chunk.len()));
        let mut q = sqlx::query(db.tables.q(&sql));
        for h in chunk {
            let c = h.c;
            let end = to_ms(c.ended_at);
            q = q
                .bind(id_bytes(&c.lease.id))
                .bind(end)
                .bind(h.attempts)
                .bind(c.outcome.as_str())
                .bind(c.last_error.as_deref())
                .bind(c.http_status.map(i32::from))
                .bind(end - to_ms(c.started_at))
                .bind(c.worker.as_str());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// The rejected completions, on their tasks' timelines.
async fn record_stale(
    db: &Db,
    conn: &mut MySqlConnection,
    lost: &[&Completion],
    now: i64,
) -> Result<(), Fail> {
    for chunk in chunks(lost, SHAPES) {
        let sql = format!("{RECORD_STALE}{}", repeat(STALE_ROW, ", ", chunk.len()));
        let mut q = sqlx::query(db.tables.q(&sql));
        for c in chunk {
            q = q
                .bind(id_bytes(&c.lease.id))
                .bind(now)
                .bind(i64::from(c.attempt))
                .bind(c.outcome.as_str())
                .bind(c.last_error.as_deref())
                .bind(c.http_status.map(i32::from))
                .bind(c.worker.as_str());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}
