//! Claim: lease due pending tasks of one kind, bumping the fencing `epoch`; the first
//! `start` of them start their attempt (`attempts` + 1), the rest are held (see
//! [`ClaimParams`]).
//!
//! One query reads the due tasks through the partial index of pending tasks; then multi-row
//! UPDATEs lease them by rowid. Both run as direct calls on the locked writer (see `raw`).

use crate::raw::{self, Db, Stmt, Value};
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::parse_id;
use crate::shapes::chunks;
use crate::stmt_cache::StmtCache;
use backstop_core::StoreError;
use backstop_core::group::OnFailure;
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::SqliteConnection;
use std::sync::LazyLock;

/// The due tasks, oldest `run_at` first, with what a worker needs (status 0 is pending).
pub(crate) const PICK: &str = "
SELECT seq, id, key, payload, attempts, max_attempts, epoch, run_at, expires_at, traceparent,
       created_at, checkpoint, grp
FROM backstop_tasks
WHERE status = 0 AND kind = ?1 AND run_at <= ?2
ORDER BY run_at
LIMIT ?3";

/// Rowids per lease UPDATE, largest first: one statement per row would pay SQLite's
/// per-statement work (cursors, halt) for every task.
pub(crate) const SHAPES: &[usize] = &[64, 16, 4, 1];

/// What a claimed row becomes: its attempt starts (`running`, `attempts` + 1), or it is held
/// (still `pending`, due again when the lease ends). `?1` owner, `?2` lease end, `?3` now.
pub(crate) const START_SET: &str =
    "status = 1, attempts = attempts + 1, att_started_at = ?3, att_worker = ?1";
const HOLD_SET: &str = "run_at = ?2";

/// One UPDATE per shape: `?1` owner, `?2` lease end, `?3` now, `?4` the kind's attempt budget
/// (for tasks stored without one: max_attempts 0), `?5` whether the kind skips failed tasks
/// of a group (kept on every row: only grouped rows read it), then the rowids.
fn lease_sql(set: &str) -> Vec<String> {
    SHAPES
        .iter()
        .map(|rows| {
            let seqs: Vec<String> = (0..*rows).map(|i| format!("?{}", i + 6)).collect();
            // OR FAIL: no statement journal; an error rolls the whole transaction back anyway.
            format!(
                "UPDATE OR FAIL backstop_tasks
                 SET {set}, epoch = epoch + 1,
                     lease_owner = ?1, lease_until = ?2, updated_at = ?3,
                     max_attempts = CASE max_attempts WHEN 0 THEN ?4 ELSE max_attempts END,
                     grp_skip = ?5
                 WHERE seq IN ({})",
                seqs.join(", ")
            )
        })
        .collect()
}

/// The claim that starts the attempt, per shape.
pub(crate) static LEASE_SQL: LazyLock<Vec<String>> = LazyLock::new(|| lease_sql(START_SET));
/// The claim that holds, per shape.
pub(crate) static HOLD_SQL: LazyLock<Vec<String>> = LazyLock::new(|| lease_sql(HOLD_SET));

/// Claims per `p`; `began` is when the claim began waiting for the writer (a limited claim's
/// rate counts from when it got it).
pub(crate) async fn claim(
    conn: &mut SqliteConnection,
    cache: &StmtCache,
    p: &ClaimParams,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    raw::write(conn, cache, |db| lease(db, p, began)).await
}

/// Claims per `p` in the writer's open transaction (a claim of its own, or one made in a
/// completion's, after its outcomes).
pub(crate) fn lease(
    db: &Db<'_>,
    p: &ClaimParams,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, StoreError> {
    // Outbox rows of a group get their places before anything is claimed.
    crate::groups::place_unplaced(db)?;
    if let Some(limit) = &p.per_key {
        return crate::claim_limited::lease(db, p, limit, began);
    }
    let limit = i64::try_from(p.limit).unwrap_or(i64::MAX);
    let now = to_ms(p.now);
    let mut seqs = Vec::new();
    let mut claimed = Vec::new();
    db.prepare(PICK)?
        .query(&[p.kind.as_str().into(), now.into(), limit.into()], |r| {
            seqs.push(r.int(0));
            claimed.push(task_at(r, p, claimed.len() < p.start)?);
            Ok(())
        })?;
    let started = p.start.min(seqs.len());
    lease_rows(db, p, &seqs[..started], &LEASE_SQL)?;
    lease_rows(db, p, &seqs[started..], &HOLD_SQL)?;
    Ok(claimed)
}

/// The task a row of [`PICK`]'s columns is, once leased: the lease adds one to the epoch (and,
/// when it starts, to the attempts) in the same transaction; a held task's attempt gets that
/// number when it starts.
pub(crate) fn task_at(
    r: &crate::raw::Row<'_>,
    p: &ClaimParams,
    started: bool,
) -> Result<ClaimedTask, StoreError> {
    Ok(ClaimedTask {
        id: parse_id(r.blob(1))?,
        kind: p.kind.clone(),
        key: r.text(2)?.to_owned(),
        payload: r.blob(3).to_vec(),
        attempt: (r.int(4) + 1) as u32,
        max_attempts: match r.int(5) {
            0 => p.max_attempts,
            n => n as u32,
        },
        epoch: r.int(6) + 1,
        run_at: from_ms(r.int(7)),
        expires_at: r.opt_int(8).map(from_ms),
        traceparent: r.opt_text(9)?,
        created_at: from_ms(r.int(10)),
        checkpoint: r.opt_text(11)?,
        started,
        group: r.opt_text(12)?,
    })
}

/// Leases the rows `seqs` with one of the statement sets above.
/// The leading parameters of a lease UPDATE (`?1` … `?5` of `lease_sql`).
pub(crate) fn lease_values(p: &ClaimParams) -> [Value<'_>; 5] {
    [
        p.owner.as_str().into(),
        to_ms(p.lease_until).into(),
        to_ms(p.now).into(),
        i64::from(p.max_attempts).into(),
        i64::from(p.on_group_failure == OnFailure::Skip).into(),
    ]
}

pub(crate) fn lease_rows(
    db: &Db<'_>,
    p: &ClaimParams,
    seqs: &[i64],
    sql: &'static [String],
) -> Result<(), StoreError> {
    let mut leases: [Option<Stmt<'_>>; SHAPES.len()] = Default::default();
    let mut values = Vec::with_capacity(5 + SHAPES[0]);
    for (shape, chunk) in chunks(seqs, SHAPES) {
        let lease = match &mut leases[shape] {
            Some(s) => s,
            slot => slot.insert(db.prepare(&sql[shape])?),
        };
        values.clear();
        values.extend_from_slice(&lease_values(p));
        values.extend(chunk.iter().map(|s| Value::Int(*s)));
        lease.execute(&values)?;
    }
    Ok(())
}
