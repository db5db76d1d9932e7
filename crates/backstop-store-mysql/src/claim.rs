//! Claim: lease due pending tasks of one kind, bumping the fencing `epoch`; the first `start`
//! of them start their attempt (`attempts` + 1), the rest are held (see [`ClaimParams`]).
//!
//! MySQL has no `UPDATE … RETURNING` (MariaDB has it only for `INSERT` and `DELETE`), so one
//! transaction selects the due rows with `FOR UPDATE SKIP LOCKED` — rows another claimer is
//! leasing right now are passed over, never waited for — and then leases exactly those rows
//! by primary key. The selected values are the leased ones less the increments, which the
//! row locks guarantee; no read-back is needed.

use crate::Db;
use crate::row::{col, from_ms, opt_time, parse_id, to_ms};
use crate::shapes::{padded_lists, repeat};
use crate::tx::{Fail, Retry, transaction};
use backstop_core::StoreError;
use backstop_core::group::OnFailure;
use backstop_core::store::{ClaimParams, ClaimedTask};
use sqlx::MySqlConnection;

/// The due tasks, oldest `run_at` first (then oldest enqueued), through the `due` index
/// (status 0 is pending).
pub(crate) const PICK: &str = "
SELECT seq, id, `key`, payload, attempts, max_attempts, epoch, run_at, expires_at, traceparent,
       created_at, checkpoint, grp
FROM {tasks}
WHERE status = 0 AND kind = ? AND run_at <= ?
ORDER BY run_at, seq
LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Leases the picked rows and starts their attempts: owner, lease end, now, now, owner, the
/// kind's attempt budget (for tasks stored without one: max_attempts 0), whether the kind
/// skips a failed task of a group (written on grouped rows only), then the `seq` list.
const LEASE: &str = "
UPDATE {tasks}
SET status = 1, attempts = attempts + 1, epoch = epoch + 1,
    lease_owner = ?, lease_until = ?, updated_at = ?, att_started_at = ?, att_worker = ?,
    max_attempts = IF(max_attempts = 0, ?, max_attempts), grp_skip = grp IS NOT NULL AND ?
WHERE seq IN ";

/// Holds the picked rows: still pending, due again at the lease's end. Binds: owner, lease
/// end, now, lease end, the kind's attempt budget, the group skip flag, then the `seq` list.
const HOLD: &str = "
UPDATE {tasks}
SET epoch = epoch + 1, lease_owner = ?, lease_until = ?, updated_at = ?, run_at = ?,
    max_attempts = IF(max_attempts = 0, ?, max_attempts), grp_skip = grp IS NOT NULL AND ?
WHERE seq IN ";

pub(crate) async fn claim(db: &Db, p: &ClaimParams) -> Result<Vec<ClaimedTask>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    if let Some(limit) = &p.per_key {
        let began = std::time::Instant::now();
        return transaction!(db, Retry::Locks, |conn| {
            crate::claim_limited::lease(db, conn, p, limit, began).await
        });
    }
    transaction!(db, Retry::Locks, |conn| lease(db, conn, p).await)
}

/// Claims per `p` in the open transaction on `conn` (a completion's, after its outcomes);
/// `began` is when the caller began, as a limited claim's rate counts it.
pub(crate) async fn claim_in(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ClaimParams,
    began: std::time::Instant,
) -> Result<Vec<ClaimedTask>, Fail> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    match &p.per_key {
        Some(limit) => crate::claim_limited::lease(db, conn, p, limit, began).await,
        None => lease(db, conn, p).await,
    }
}

async fn lease(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ClaimParams,
) -> Result<Vec<ClaimedTask>, Fail> {
    let now = to_ms(p.now);
    let skip = p.on_group_failure == OnFailure::Skip;
    let rows = sqlx::query(db.tables.q(PICK))
        .bind(p.kind.as_str())
        .bind(now)
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
    let mut seqs = Vec::with_capacity(rows.len());
    let mut claimed = Vec::with_capacity(rows.len());
    for r in &rows {
        seqs.push(col::<i64, _>(r, "seq")?);
        claimed.push(task_at(r, p, claimed.len() < p.start)?);
    }
    let started = p.start.min(seqs.len());
    start_rows(db, conn, p, &seqs[..started]).await?;
    for list in padded_lists(&seqs[started..]) {
        let sql = format!("{HOLD}({})", repeat("?", ", ", list.len()));
        let mut q = sqlx::query(db.tables.q(&sql))
            .bind(p.owner.as_str())
            .bind(to_ms(p.lease_until))
            .bind(now)
            .bind(to_ms(p.lease_until))
            .bind(i64::from(p.max_attempts))
            .bind(skip);
        for seq in list {
            q = q.bind(seq);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(claimed)
}

/// The task a row of [`PICK`]'s columns is, once leased: the lease adds one to the epoch (and,
/// when it starts, to the attempts) in the same transaction; a held task's attempt gets that
/// number when it starts.
pub(crate) fn task_at(
    r: &sqlx::mysql::MySqlRow,
    p: &ClaimParams,
    started: bool,
) -> Result<ClaimedTask, StoreError> {
    Ok(ClaimedTask {
        id: parse_id(&col::<Vec<u8>, _>(r, "id")?)?,
        kind: p.kind.clone(),
        key: crate::row::text(r, "key")?,
        payload: col(r, "payload")?,
        attempt: (col::<i64, _>(r, "attempts")? + 1) as u32,
        max_attempts: match col::<i64, _>(r, "max_attempts")? {
            0 => p.max_attempts,
            n => n as u32,
        },
        epoch: col::<i64, _>(r, "epoch")? + 1,
        run_at: from_ms(col(r, "run_at")?),
        expires_at: opt_time(r, "expires_at")?,
        traceparent: col(r, "traceparent")?,
        created_at: from_ms(col(r, "created_at")?),
        checkpoint: col(r, "checkpoint")?,
        started,
        group: crate::row::opt_text(r, "grp")?,
    })
}

/// Leases the rows `seqs` and starts their attempts.
pub(crate) async fn start_rows(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ClaimParams,
    seqs: &[i64],
) -> Result<(), Fail> {
    let now = to_ms(p.now);
    let skip = p.on_group_failure == OnFailure::Skip;
    for list in padded_lists(seqs) {
        let sql = format!("{LEASE}({})", repeat("?", ", ", list.len()));
        let mut q = sqlx::query(db.tables.q(&sql))
            .bind(p.owner.as_str())
            .bind(to_ms(p.lease_until))
            .bind(now)
            .bind(now)
            .bind(p.owner.as_str())
            .bind(i64::from(p.max_attempts))
            .bind(skip);
        for seq in list {
            q = q.bind(seq);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}
