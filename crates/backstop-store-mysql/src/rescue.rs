//! The reconciler's writes (the [`Rescue`] impl): rescue of expired leases (a worker crashed) and expiry of pending
//! tasks past their business deadline. Rows are picked with `FOR UPDATE SKIP LOCKED`, so
//! several reconcilers, and claims or completions in flight, never wait for one another;
//! each status change is decided by `backstop_core::transition` per row. A task of an ordering
//! group that ends here lets its group go on (see `groups`).

use crate::ended::{HELD_COLUMNS, Held, Move, move_rows, record_attempts};
use crate::groups::{Ending, GroupLocks, member};
use crate::row::{col, parse_id, text, to_ms};
use crate::shapes::{padded_lists, repeat};
use crate::tx::{Fail, Retry, transaction};
use crate::{Db, MysqlStore};
use backstop_core::store::Cause;
use backstop_core::store::{BoxFuture, ExpireParams, Rescue, RescueParams, Rescued};
use backstop_core::{Status, StoreError, Transition, transition};
use sqlx::MySqlConnection;

/// Running tasks whose lease expired, oldest lease first, through the `leased` index.
pub(crate) const RESCUE_PICK: &str = "
SELECT {held}, max_attempts FROM {tasks}
WHERE status = 1 AND lease_until < ?
ORDER BY lease_until LIMIT ?
FOR UPDATE SKIP LOCKED";

/// Pending tasks past their deadline, earliest first, through the `expiring` index; with their
/// groups, which they leave.
pub(crate) const EXPIRE_PICK: &str = "
SELECT seq, kind, grp, grp_skip FROM {tasks}
WHERE status = 0 AND expires_at <= ?
ORDER BY expires_at LIMIT ?
FOR UPDATE SKIP LOCKED";

/// The `expired` event of each listed row. Binds: now, then the `seq` list.
const RECORD_EXPIRED: &str = "INSERT INTO {events} (task_id, type, at, reason)
SELECT id, 'expired', ?, 'expired' FROM {tasks} WHERE seq IN ";

impl Rescue for MysqlStore {
    fn rescue(&self, p: RescueParams) -> BoxFuture<'_, Result<Vec<Rescued>, StoreError>> {
        Box::pin(async move { rescue(&self.db, &p).await })
    }

    fn expire(&self, p: ExpireParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { expire(&self.db, &p).await })
    }
}

/// Rescues tasks whose lease expired: back to pending, or failed when no attempt is left.
async fn rescue(db: &Db, p: &RescueParams) -> Result<Vec<Rescued>, StoreError> {
    if p.limit == 0 {
        return Ok(Vec::new());
    }
    let now = to_ms(p.now);
    let mut groups = GroupLocks::default();
    transaction!(db, Retry::Locks, |conn| {
        groups.begin(db, conn).await?;
        rescue_locked(db, conn, p, now, &mut groups).await
    })
}

/// Picks, records and moves the expired leases.
async fn rescue_locked(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &RescueParams,
    now: i64,
    groups: &mut GroupLocks,
) -> Result<Vec<Rescued>, Fail> {
    let sql = RESCUE_PICK.replace("{held}", HELD_COLUMNS);
    let rows = sqlx::query(db.tables.q(&sql))
        .bind(now)
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut held = Vec::with_capacity(rows.len());
    let mut fates = Vec::with_capacity(rows.len());
    let mut rescued = Vec::with_capacity(rows.len());
    let mut ending = Ending::default();
    for r in &rows {
        let h = Held::read(r)?;
        let max: i64 = col(r, "max_attempts")?;
        let status = transition(
            Status::Running,
            Transition::Rescue {
                attempts_left: h.attempts < max,
            },
        )
        .map_err(|e| StoreError::Database(Cause::new(e)))?;
        rescued.push(Rescued {
            id: parse_id(&h.id)?,
            kind: text(r, "kind")?,
            status,
            lease_owner: h.lease_owner.clone(),
            group: h.group.as_ref().map(|m| m.name()),
        });
        ending.note(h.group.as_ref(), status);
        held.push(h);
        fates.push((max, status));
    }
    if !ending.is_empty() {
        groups.take(db, conn, &ending).await?;
    }
    record_attempts(
        db,
        conn,
        &held,
        now,
        "lease_expired",
        "lease expired; held by ",
    )
    .await?;
    let to_pending: Vec<i64> = held
        .iter()
        .zip(&fates)
        .filter(|(_, (_, s))| *s == Status::Pending)
        .map(|(h, _)| h.seq)
        .collect();
    let pending = Move {
        to: Status::Pending,
        run_at: Some(now),
        reason: None,
        last_error: None,
        now,
    };
    move_rows(db, conn, &to_pending, &pending).await?;
    // Spent rows (rare) one by one: each reason names its own counts.
    for (h, (max, status)) in held.iter().zip(&fates) {
        if *status == Status::Pending {
            continue;
        }
        let reason = format!(
            "attempts exhausted ({} of {max}); the last lease expired",
            h.attempts
        );
        let failed = Move {
            to: *status,
            run_at: None,
            reason: Some(&reason),
            last_error: Some("lease expired"),
            now,
        };
        move_rows(db, conn, &[h.seq], &failed).await?;
    }
    if !ending.is_empty() {
        ending.promote(db, conn).await?;
    }
    Ok(rescued)
}

/// Compensates pending tasks past `expires_at` with reason `expired`; returns how many.
async fn expire(db: &Db, p: &ExpireParams) -> Result<u64, StoreError> {
    if p.limit == 0 {
        return Ok(0);
    }
    let now = to_ms(p.now);
    let compensated = transition(Status::Pending, Transition::Expire)
        .map_err(|e| StoreError::Database(Cause::new(e)))?;
    let mut groups = GroupLocks::default();
    transaction!(db, Retry::Locks, |conn| {
        groups.begin(db, conn).await?;
        expire_locked(db, conn, p, now, compensated, &mut groups).await
    })
}

/// Picks, records and compensates the expired tasks.
async fn expire_locked(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ExpireParams,
    now: i64,
    compensated: Status,
    groups: &mut GroupLocks,
) -> Result<u64, Fail> {
    let rows = sqlx::query(db.tables.q(EXPIRE_PICK))
        .bind(now)
        .bind(i64::try_from(p.limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *conn)
        .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut seqs = Vec::with_capacity(rows.len());
    let mut ending = Ending::default();
    for r in &rows {
        seqs.push(col::<i64, _>(r, "seq")?);
        ending.note(member(r)?.as_ref(), compensated);
    }
    if !ending.is_empty() {
        groups.take(db, conn, &ending).await?;
    }
    // The rows are locked above, so this read sees them as they are.
    for list in padded_lists(&seqs) {
        let sql = format!("{RECORD_EXPIRED}({})", repeat("?", ", ", list.len()));
        let mut q = sqlx::query(db.tables.q(&sql)).bind(now);
        for seq in list {
            q = q.bind(seq);
        }
        q.execute(&mut *conn).await?;
    }
    let to = Move {
        to: compensated,
        run_at: None,
        reason: Some("expired"),
        last_error: None,
        now,
    };
    move_rows(db, conn, &seqs, &to).await?;
    if !ending.is_empty() {
        ending.promote(db, conn).await?;
    }
    Ok(seqs.len() as u64)
}
