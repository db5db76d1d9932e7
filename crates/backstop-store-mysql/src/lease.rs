//! Leases a worker holds (the [`Leases`] impl; claim and complete run in `claim.rs` and
//! `complete.rs`): heartbeats extend them, release gives them back at shutdown.

use crate::ended::{HELD_COLUMNS, Held, Move, move_rows, record_attempts};
use crate::groups::{Ending, GroupLocks};
use crate::row::{col, id_bytes, parse_id, to_ms};
use crate::shapes::{padded_lists, repeat};
use crate::tx::{Fail, Retry, db_err, transaction};
use crate::{Db, MysqlStore};
use backstop_core::store::Cause;
use backstop_core::store::{
    BoxFuture, ClaimParams, ClaimedTask, CompleteParams, CompleteResult, HeartbeatParams, LeaseRef,
    Leases, ReleaseParams,
};
use backstop_core::{Status, StoreError, Transition, transition};
use sqlx::MySqlConnection;
use std::collections::HashSet;

impl Leases for MysqlStore {
    fn claim(&self, p: ClaimParams) -> BoxFuture<'_, Result<Vec<ClaimedTask>, StoreError>> {
        Box::pin(async move { crate::claim::claim(&self.db, &p).await })
    }

    fn complete(&self, p: CompleteParams) -> BoxFuture<'_, Result<CompleteResult, StoreError>> {
        Box::pin(async move { crate::complete::complete(&self.db, &p).await })
    }

    fn heartbeat(&self, p: HeartbeatParams) -> BoxFuture<'_, Result<Vec<LeaseRef>, StoreError>> {
        Box::pin(async move { heartbeat(&self.db, &p).await })
    }

    fn release(&self, p: ReleaseParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { release(&self.db, &p).await })
    }
}

/// One lease of a list, as an `OR` chain term over the unique `id` index.
const LEASE: &str = "(id = ? AND epoch = ?)";

fn leases_sql(head: &str, n: usize, tail: &str) -> String {
    format!("{head}({}){tail}", repeat(LEASE, " OR ", n))
}

/// Extends the listed leases still held by `owner`; a held task's `run_at` follows its lease.
/// Binds: lease end, lease end, now, owner, leases.
const HEARTBEAT: &str = "UPDATE {tasks} SET run_at = IF(status = 0, ?, run_at), lease_until = ?,
    updated_at = ? WHERE status IN (0, 1) AND lease_owner = ? AND ";

/// Which of the listed leases `owner` holds. Binds: owner, leases.
const HELD_BY: &str =
    "SELECT id, epoch FROM {tasks} WHERE status IN (0, 1) AND lease_owner = ? AND ";

/// The listed held tasks go back as they were, due now, with no attempt. Binds: now, now,
/// leases.
const RELEASE_HELD: &str = "UPDATE {tasks} SET lease_owner = NULL, lease_until = NULL,
    run_at = ?, updated_at = ? WHERE status = 0 AND lease_owner IS NOT NULL AND ";

/// Extends leases; returns those that were lost.
///
/// One `UPDATE` per list of leases, outside any transaction: when it matches every lease, none
/// was lost. Otherwise a read says which are held. A lease matched then is matched by the
/// update too (an epoch never comes back), so the only race reports a lease lost just after
/// it was extended — which it is.
async fn heartbeat(db: &Db, p: &HeartbeatParams) -> Result<Vec<LeaseRef>, StoreError> {
    let distinct: Vec<LeaseRef> = {
        let mut seen = HashSet::new();
        p.leases
            .iter()
            .filter(|l| seen.insert(**l))
            .copied()
            .collect()
    };
    if distinct.is_empty() {
        return Ok(Vec::new());
    }
    let mut extended = 0;
    for list in padded_lists(&distinct) {
        let mut q = sqlx::query(db.tables.q(&leases_sql(HEARTBEAT, list.len(), "")))
            .bind(to_ms(p.lease_until))
            .bind(to_ms(p.lease_until))
            .bind(to_ms(p.now))
            .bind(p.owner.as_str());
        for l in &list {
            q = q.bind(id_bytes(&l.id).to_vec()).bind(l.epoch);
        }
        extended += q.execute(&db.pool).await.map_err(db_err)?.rows_affected();
    }
    if extended as usize == distinct.len() {
        return Ok(Vec::new());
    }
    let mut held = HashSet::new();
    for list in padded_lists(&distinct) {
        let mut q =
            sqlx::query(db.tables.q(&leases_sql(HELD_BY, list.len(), ""))).bind(p.owner.as_str());
        for l in &list {
            q = q.bind(id_bytes(&l.id).to_vec()).bind(l.epoch);
        }
        for r in q.fetch_all(&db.pool).await.map_err(db_err)? {
            held.insert(LeaseRef {
                id: parse_id(&col::<Vec<u8>, _>(&r, "id")?)?,
                epoch: col(&r, "epoch")?,
            });
        }
    }
    Ok(p.leases
        .iter()
        .filter(|l| !held.contains(l))
        .copied()
        .collect())
}

/// Gives leases back unfinished: a held task goes back as it was; a running attempt is
/// recorded as `interrupted` and its task runs again now, or fails when its attempts are
/// spent. Returns how many were still held.
async fn release(db: &Db, p: &ReleaseParams) -> Result<u64, StoreError> {
    if p.leases.is_empty() {
        return Ok(0);
    }
    let now = to_ms(p.now);
    let mut groups = GroupLocks::default();
    transaction!(db, Retry::Locks, |conn| {
        groups.begin(db, conn).await?;
        release_held(db, conn, p, now, &mut groups).await
    })
}

/// Gives back the listed holds, then records and moves the listed running attempts still
/// held; returns how many in all.
async fn release_held(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &ReleaseParams,
    now: i64,
    groups: &mut GroupLocks,
) -> Result<u64, Fail> {
    let mut released = 0;
    for list in padded_lists(&p.leases) {
        let mut q = sqlx::query(db.tables.q(&leases_sql(RELEASE_HELD, list.len(), "")))
            .bind(now)
            .bind(now);
        for l in &list {
            q = q.bind(id_bytes(&l.id).to_vec()).bind(l.epoch);
        }
        released += q.execute(&mut *conn).await?.rows_affected();
    }
    let mut rows = Vec::new();
    for list in padded_lists(&p.leases) {
        let head =
            format!("SELECT {HELD_COLUMNS}, max_attempts FROM {{tasks}} WHERE status = 1 AND ");
        let sql = leases_sql(&head, list.len(), " ORDER BY seq FOR UPDATE");
        let mut q = sqlx::query(db.tables.q(&sql));
        for l in &list {
            q = q.bind(id_bytes(&l.id).to_vec()).bind(l.epoch);
        }
        for r in q.fetch_all(&mut *conn).await? {
            let h = Held::read(&r)?;
            let max: i64 = col(&r, "max_attempts")?;
            if !rows.iter().any(|(o, _): &(Held, i64)| o.seq == h.seq) {
                rows.push((h, max));
            }
        }
    }
    if rows.is_empty() {
        return Ok(released);
    }
    let (held, maxes): (Vec<Held>, Vec<i64>) = rows.into_iter().unzip();
    let mut fates = Vec::with_capacity(held.len());
    let mut ending = Ending::default();
    for (h, max) in held.iter().zip(&maxes) {
        let status = transition(
            Status::Running,
            Transition::Release {
                attempts_left: h.attempts < *max,
            },
        )
        .map_err(|e| StoreError::Database(Cause::new(e)))?;
        ending.note(h.group.as_ref(), status);
        fates.push(status);
    }
    if !ending.is_empty() {
        groups.take(db, conn, &ending).await?;
    }
    record_attempts(
        db,
        conn,
        &held,
        now,
        "interrupted",
        "released at shutdown by ",
    )
    .await?;
    for ((h, max), status) in held.iter().zip(&maxes).zip(fates) {
        let reason = (status == Status::Failed).then(|| {
            format!(
                "attempts exhausted ({} of {max}); the last attempt was interrupted at shutdown",
                h.attempts
            )
        });
        let m = Move {
            to: status,
            run_at: (status == Status::Pending).then_some(now),
            reason: reason.as_deref(),
            last_error: reason.is_some().then_some("interrupted at shutdown"),
            now,
        };
        move_rows(db, conn, &[h.seq], &m).await?;
    }
    if !ending.is_empty() {
        ending.promote(db, conn).await?;
    }
    Ok(released + held.len() as u64)
}
