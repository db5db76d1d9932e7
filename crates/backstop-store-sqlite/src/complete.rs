//! Completion: a batch of attempt outcomes in one transaction, each fenced by `epoch` and the
//! running status, with the starts of held tasks that ride along (see `start`): on the one
//! writer, every commit saved is throughput.
//!
//! Each completion is one UPDATE of its task row, a prepared statement stepped once per task on
//! the locked writer (see `raw`). When it changes nothing the lease was lost, and the stale
//! completion is recorded on the task's timeline instead: no savepoints, no second pass. (A
//! multi-row UPDATE … FROM VALUES measured slower: SQLite materialises the join first.)

use crate::raw::{self, Db, Stmt, Value};
use crate::row::jiff_ms::to_ms;
use crate::row::{id_bytes, status_code};
use crate::start;
use crate::stmt_cache::StmtCache;
use backstop_core::store::{CompleteParams, CompleteResult, Completion, LeaseRef};
use backstop_core::{Status, StoreError};
use sqlx::SqliteConnection;

/// The attempt ended the task (succeeded, failed, compensated): its facts stay on the row.
/// A grouped task lets its group go (`grp_live` cleared) unless it failed where its kind
/// blocks.
pub(crate) const FINISH: &str = concat!(
    "
UPDATE backstop_tasks
SET status = ?3, run_at = coalesce(?12, run_at), last_error = ?4, reason = ?5,
    lease_owner = NULL, lease_until = NULL, updated_at = ?11,
    att_ended_at = ?9, att_outcome = ?6, att_error = ?14, att_http_status = ?7,
    att_started_at = ?8, att_worker = ?10,
    grp_live = ",
    crate::groups::grp_live_after!("?3", ""),
    "
WHERE id = ?1 AND epoch = ?2 AND status = 1"
);

/// The attempt is retried: the next attempt reuses the row's attempt columns, so this one
/// goes to the timeline table first ([`RECORD_RETRY`]).
pub(crate) const RETRY: &str = "
UPDATE backstop_tasks
SET status = ?3, run_at = coalesce(?12, run_at), last_error = ?4, reason = ?5,
    lease_owner = NULL, lease_until = NULL, updated_at = ?11,
    att_started_at = NULL, att_ended_at = NULL, att_outcome = NULL, att_error = NULL,
    att_http_status = NULL, att_worker = NULL
WHERE id = ?1 AND epoch = ?2 AND status = 1";

/// The retried attempt's row in the timeline, written only while the lease still holds.
pub(crate) const RECORD_RETRY: &str = "
INSERT INTO backstop_events
    (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
SELECT id, 'attempt', ?9, attempts, ?6, ?4, ?7, ?9 - ?8, ?10
FROM backstop_tasks
WHERE id = ?1 AND epoch = ?2 AND status = 1";

/// A completion that came after its lease was lost.
const RECORD_STALE: &str = "
INSERT INTO backstop_events (task_id, type, at, attempt, outcome, error, http_status, worker)
VALUES (?1, 'stale_completion', ?11, ?13, ?6, ?4, ?7, ?10)";

/// Writes `p` in one transaction: the completions, the starts of held tasks, then the
/// limited claims (`began`: when the writer was asked for, as a claim's rate counts it).
pub(crate) async fn complete(
    conn: &mut SqliteConnection,
    cache: &StmtCache,
    p: &CompleteParams,
    began: std::time::Instant,
) -> Result<CompleteResult, StoreError> {
    let starts = p.starts.as_ref().filter(|s| !s.tasks.is_empty());
    if p.completions.is_empty() && starts.is_none() && p.claims.is_empty() {
        return Ok(CompleteResult::default());
    }
    let now = to_ms(p.now);
    let (stale, not_started, claimed) = raw::write(conn, cache, |db| {
        let stale = apply(db, &p.completions, now)?;
        let not_started = match starts {
            Some(s) => start::apply(db, s)?,
            None => Vec::new(),
        };
        // After the completions: the slots they freed are free to these claims.
        let claimed = p
            .claims
            .iter()
            .map(|c| crate::claim::lease(db, c, began))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((stale, not_started, claimed))
    })
    .await?;
    if !stale.is_empty() {
        tracing::warn!(count = stale.len(), "rejected stale completions");
    }
    Ok(CompleteResult {
        stale,
        not_started,
        claimed,
    })
}

fn apply(db: &Db<'_>, completions: &[Completion], now: i64) -> Result<Vec<LeaseRef>, StoreError> {
    // Retries are prepared only when the batch has one; stale completions are rare.
    let mut finish: Option<Stmt<'_>> = None;
    let mut retry: Option<(Stmt<'_>, Stmt<'_>)> = None;
    let mut stale = Vec::new();
    let mut ended = Vec::new();
    for c in completions {
        // Every statement takes the same parameters, each using the ones it needs: ?1 id,
        // ?2 epoch, ?3 status, ?4 error, ?5 reason, ?6 outcome, ?7 HTTP status, ?8 start,
        // ?9 end, ?10 worker, ?11 now, ?12 next run, ?13 attempt number, ?14 the attempt's
        // error (or a success's note).
        let values: [Value<'_>; 14] = [
            id_bytes(&c.lease.id).into(),
            c.lease.epoch.into(),
            status_code(c.status).into(),
            c.last_error.as_deref().into(),
            c.reason.as_deref().into(),
            c.outcome.as_str().into(),
            c.http_status.map(i64::from).into(),
            to_ms(c.started_at).into(),
            to_ms(c.ended_at).into(),
            c.worker.as_str().into(),
            now.into(),
            c.run_at.map(to_ms).into(),
            i64::from(c.attempt).into(),
            c.last_error.as_deref().or(c.note.as_deref()).into(),
        ];
        let applied = if c.status == Status::Pending {
            let (record, update) = match &mut retry {
                Some(r) => r,
                None => retry.insert((db.prepare(RECORD_RETRY)?, db.prepare(RETRY)?)),
            };
            // Inserts nothing when the lease is gone: the same fence as the update.
            record.execute(&values[..10])?;
            update.execute(&values[..12])?
        } else {
            let update = match &mut finish {
                Some(s) => s,
                None => finish.insert(db.prepare(FINISH)?),
            };
            // No RETURNING (such as whether the task has a group): SQLite gathers returned
            // rows in a table of their own, which cost this UPDATE about 2.5 µs of its 7 and
            // the drain about 15 % (BENCHMARKS.md). The one unpark below skips tasks of no
            // group itself, and is not run at all on a ledger that never had a group.
            let changed = update.execute(&values)?;
            if changed > 0 {
                ended.push(&c.lease.id);
            }
            changed
        };
        if applied == 0 {
            db.prepare(RECORD_STALE)?.execute(&values[..13])?;
            stale.push(c.lease);
        }
    }
    if !ended.is_empty() && crate::groups::any(db)? {
        // The next task of each ended grouped task's group, if it was parked, is due now.
        let ids = crate::groups::ids_json(ended);
        db.prepare(&crate::groups::PROMOTE_AFTER_RUN)?
            .execute(&[ids.as_str().into()])?;
    }
    Ok(stale)
}
