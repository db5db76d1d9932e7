//! Completion: a batch of attempt outcomes in one statement, each fenced by its `epoch` and
//! the running status, and (only when some lost their lease) a second statement recording
//! the stale ones, in one transaction, with the starts of held tasks that ride along (see
//! `start`).
//!
//! The held rows are locked first, in id order, so that two batches touching the same tasks
//! (a completion and a heartbeat of one worker, say) queue instead of deadlocking. A finished
//! attempt stays on the task row; a retried one is written to the timeline, because the next
//! attempt reuses the row's attempt columns. A completion whose lease was lost changes
//! nothing and is recorded on its task's timeline as `stale_completion`. When one batch holds
//! the same lease twice, the first one counts and the repeat is stale, as it would be in a
//! later batch.

use crate::row::duration_ms;
use crate::start;
use crate::types::{Id, Time};
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::{CompleteParams, CompleteResult, Completion, LeaseRef};
use sqlx::PgConnection;
use sqlx::postgres::PgBindIterExt;

/// Applies the fenced completions and returns the position (`ord`) of each that counted.
///
/// Every join here is between a table and one CTE (never CTE to CTE): PostgreSQL estimates an
/// `UNNEST` at a handful of rows, and a nested loop between two 4,000-row CTEs made large
/// batches take seconds. The completions' own columns ride along in `held` instead. The held
/// rows are found from the completions, one lookup by id each: a `LATERAL` subquery whose only
/// condition is `id`, fenced with `OFFSET 0` so that the outer conditions on epoch and status
/// are not pushed into it (they would let the planner pick the partial index of running tasks
/// instead of the id's). Statistics taken while no task was
/// running otherwise make the planner walk every running task for each completion, through
/// the partial index of running tasks (33 s per batch measured with 1,000,000 finished tasks
/// in the table). `first` is in id order, so the locks are taken in id order.
///
/// Then the groups of the grouped tasks among them are locked (`groups`), in group order,
/// before any row changes: ending a grouped task locks its group's row (the update trigger of
/// 0013_groups), and an enqueue locks the rows of its groups in group order too (`enqueue`).
/// Taken row by row, in whatever order the update met them, these locks deadlocked with an
/// enqueue of many groups; PostgreSQL needs a second (`deadlock_timeout`) to see one, and a few
/// in a row held up a process's completions and heartbeats past its leases.
const COMPLETE: &str = "
WITH c AS (
    SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::integer[], $8::timestamptz[], $9::timestamptz[],
                         $10::text[], $11::timestamptz[], $12::bigint[], $13::bigint[],
                         $15::text[])
        WITH ORDINALITY AS c(id, epoch, status, error, reason, outcome, http_status,
                             started_at, ended_at, worker, run_at, attempt, duration_ms,
                             att_error, ord)
),
first AS (
    SELECT DISTINCT ON (id, epoch) * FROM c ORDER BY id, epoch, ord
),
held AS MATERIALIZED (
    SELECT t.seq, t.t_kind, t.t_grp, f.*
    FROM first AS f
    CROSS JOIN LATERAL (
        SELECT t.seq, t.epoch AS t_epoch, t.status AS t_status, t.kind AS t_kind,
               t.grp AS t_grp
        FROM {schema}.tasks AS t
        WHERE t.id = f.id
        FOR UPDATE OFFSET 0
    ) AS t
    WHERE t.t_epoch = f.epoch AND t.t_status = 'running'
),
groups AS MATERIALIZED (
    SELECT 1
    FROM (SELECT DISTINCT h.t_kind, h.t_grp FROM held AS h WHERE h.t_grp IS NOT NULL
          ORDER BY h.t_kind, h.t_grp) AS n
    CROSS JOIN LATERAL (
        SELECT 1 FROM {schema}.task_groups AS g
        WHERE g.kind = n.t_kind AND g.grp = n.t_grp
        FOR UPDATE OFFSET 0
    ) AS g
),
-- This transaction unparks its groups' next tasks itself ([`UNPARK`]): the row trigger of
-- 0013 stands aside for it (0018). Set before the first row changes, as `groups` is.
by_store AS MATERIALIZED (
    SELECT set_config('backstop.unparks', 'store', true)
),
done AS (
    UPDATE {schema}.tasks AS t
    SET status = h.status, run_at = coalesce(h.run_at, t.run_at),
        last_error = h.error, reason = h.reason,
        lease_owner = NULL, lease_until = NULL, updated_at = $14,
        att_started_at = CASE WHEN h.status = 'pending' THEN NULL ELSE h.started_at END,
        att_ended_at = CASE WHEN h.status = 'pending' THEN NULL ELSE h.ended_at END,
        att_outcome = CASE WHEN h.status = 'pending' THEN NULL ELSE h.outcome END,
        att_error = CASE WHEN h.status = 'pending' THEN NULL ELSE h.att_error END,
        att_http_status = CASE WHEN h.status = 'pending' THEN NULL ELSE h.http_status END,
        att_worker = CASE WHEN h.status = 'pending' THEN NULL ELSE h.worker END
    FROM held AS h
    -- Only the primary key: `held` checked epoch and status under the row lock it holds, and
    -- a status condition here would let stale statistics pick the partial index of running
    -- tasks again.
    WHERE t.seq = h.seq
      -- Evaluated once, before the first row is updated: the groups are locked first.
      AND (SELECT count(*) FROM groups) >= 0
      AND (SELECT count(*) FROM by_store) >= 0
    RETURNING t.id, t.attempts, h.ord, h.status, h.ended_at, h.outcome, h.error,
              h.http_status, h.duration_ms, h.worker, t.kind, t.grp, t.grp_skip
),
retried AS (
    INSERT INTO {schema}.events
        (task_id, type, at, attempt, outcome, error, http_status, duration_ms, worker)
    SELECT d.id, 'attempt', d.ended_at, d.attempts, d.outcome, d.error, d.http_status,
           d.duration_ms, d.worker
    FROM done AS d
    WHERE d.status = 'pending'
)
-- With, for each task whose end lets its group go on, its group (its kind beside).
SELECT d.ord, d.kind,
       CASE WHEN d.status IN ('succeeded', 'compensated') OR (d.status = 'failed' AND d.grp_skip)
            THEN d.grp END
FROM done AS d";

/// Unparks the first open task of each listed group (`$1` kinds, `$2` groups) if it is parked:
/// what the row trigger of 0013 does for one ended task, for a whole completion batch. A
/// statement of its own after [`COMPLETE`], which locked the groups first: its snapshot sees
/// the task of any enqueuer that held a group's lock before (see 0013's `group_promote`).
const UNPARK: &str = concat!(
    "
UPDATE {schema}.tasks AS t SET run_at = t.parked_run_at, parked_run_at = NULL
FROM (SELECT DISTINCT u.kind COLLATE \"C\" AS kind, u.grp COLLATE \"C\" AS grp
      FROM UNNEST($1::text[], $2::text[]) AS u(kind, grp)) AS g
CROSS JOIN LATERAL (
    SELECT o.seq FROM {schema}.tasks AS o
    WHERE o.kind = g.kind AND o.grp = g.grp AND ",
    crate::groups::holds_its_group!(),
    "
    ORDER BY o.grp_seq
    LIMIT 1
) AS h
WHERE t.seq = h.seq AND t.parked_run_at IS NOT NULL"
);

/// Records rejected completions on their tasks' timelines.
const STALE: &str = "
INSERT INTO {schema}.events (task_id, type, at, attempt, outcome, error, http_status, worker)
SELECT id, 'stale_completion', $7, attempt, outcome, error, http_status, worker
FROM UNNEST($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::integer[], $6::text[])
    WITH ORDINALITY AS s(id, attempt, outcome, error, http_status, worker, ord)
ORDER BY ord";

/// Locks the rows of every task a batch touches, in id order: the completions and the starts
/// each lock in id order, but one after the other they would not, and a heartbeat of the same
/// worker (which locks its running and held rows together, in id order) could deadlock
/// against them.
const LOCK: &str = "
SELECT 1 FROM {schema}.tasks WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE";

pub(crate) async fn complete(db: &Db, p: &CompleteParams) -> Result<CompleteResult, StoreError> {
    let starts = p.starts.as_ref().filter(|s| !s.tasks.is_empty());
    if p.completions.is_empty() && starts.is_none() && p.claims.is_empty() {
        return Ok(CompleteResult::default());
    }
    let began = std::time::Instant::now();
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    if let Some(s) = starts
        && !p.completions.is_empty()
    {
        let ids = p.completions.iter().map(|c| c.lease.id);
        let ids = ids.chain(s.tasks.iter().map(|t| t.lease.id));
        sqlx::query(db.schema.sql(LOCK))
            .bind(ids.map(Id).bind_iter())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    let stale = apply(db, &mut tx, p).await?;
    let not_started = match starts {
        Some(s) => start::apply(db, &mut tx, s).await?,
        None => Vec::new(),
    };
    // After the completions: the slots they freed are free to these claims.
    let mut claimed = Vec::with_capacity(p.claims.len());
    for c in &p.claims {
        claimed.push(crate::claim::claim_in(db, &mut tx, c, began).await?);
    }
    tx.commit().await.map_err(db_err)?;
    if !stale.is_empty() {
        tracing::warn!(count = stale.len(), "rejected stale completions");
    }
    Ok(CompleteResult {
        stale,
        not_started,
        claimed,
    })
}

/// Applies the completions of `p`; returns the stale ones, recorded on their timelines.
async fn apply(
    db: &Db,
    tx: &mut PgConnection,
    p: &CompleteParams,
) -> Result<Vec<LeaseRef>, StoreError> {
    let c = &p.completions;
    if c.is_empty() {
        return Ok(Vec::new());
    }
    let counted: Vec<(i64, String, Option<String>)> = sqlx::query_as(db.schema.sql(COMPLETE))
        .bind(c.iter().map(|c| Id(c.lease.id)).bind_iter())
        .bind(c.iter().map(|c| c.lease.epoch).bind_iter())
        .bind(c.iter().map(|c| c.status.as_str()).bind_iter())
        .bind(c.iter().map(|c| c.last_error.as_deref()).bind_iter())
        .bind(c.iter().map(|c| c.reason.as_deref()).bind_iter())
        .bind(c.iter().map(|c| c.outcome.as_str()).bind_iter())
        .bind(c.iter().map(|c| c.http_status.map(i32::from)).bind_iter())
        .bind(c.iter().map(|c| Time(c.started_at)).bind_iter())
        .bind(c.iter().map(|c| Time(c.ended_at)).bind_iter())
        .bind(c.iter().map(|c| c.worker.as_str()).bind_iter())
        .bind(c.iter().map(|c| c.run_at.map(Time)).bind_iter())
        .bind(c.iter().map(|c| i64::from(c.attempt)).bind_iter())
        .bind(
            c.iter()
                .map(|c| duration_ms(c.started_at, c.ended_at))
                .bind_iter(),
        )
        .bind(Time(p.now))
        // The finished attempt's error, or a success's note.
        .bind(
            c.iter()
                .map(|c| c.last_error.as_deref().or(c.note.as_deref()))
                .bind_iter(),
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    // The groups their ends let go on: their next tasks are unparked here, in one statement.
    let (kinds, groups): (Vec<&str>, Vec<&str>) = counted
        .iter()
        .filter_map(|(_, kind, grp)| Some((kind.as_str(), grp.as_deref()?)))
        .unzip();
    if !kinds.is_empty() {
        sqlx::query(db.schema.sql(UNPARK))
            .bind(&kinds)
            .bind(&groups)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    // Positions are 1-based (`WITH ORDINALITY`); whatever did not count was stale.
    let mut counts = vec![false; c.len()];
    for ord in counted.iter().map(|c| c.0) {
        if let Some(slot) = usize::try_from(ord - 1)
            .ok()
            .and_then(|i| counts.get_mut(i))
        {
            *slot = true;
        }
    }
    let stale: Vec<&Completion> = c
        .iter()
        .zip(&counts)
        .filter(|(_, counted)| !**counted)
        .map(|(c, _)| c)
        .collect();
    if !stale.is_empty() {
        sqlx::query(db.schema.sql(STALE))
            .bind(stale.iter().map(|c| Id(c.lease.id)).bind_iter())
            .bind(stale.iter().map(|c| i64::from(c.attempt)).bind_iter())
            .bind(stale.iter().map(|c| c.outcome.as_str()).bind_iter())
            .bind(stale.iter().map(|c| c.last_error.as_deref()).bind_iter())
            .bind(
                stale
                    .iter()
                    .map(|c| c.http_status.map(i32::from))
                    .bind_iter(),
            )
            .bind(stale.iter().map(|c| c.worker.as_str()).bind_iter())
            .bind(Time(p.now))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
    }
    Ok(stale.into_iter().map(|c| c.lease).collect())
}
