//! Leadership leases: one conditional upsert (`INSERT … ON DUPLICATE KEY UPDATE` with `IF()`s)
//! takes a free or lapsed lease, or renews the caller's own; the read of who holds it follows
//! in the same transaction, which holds the row's lock.

use crate::Db;
use crate::row::{col, from_ms, to_ms};
use crate::tx::{Fail, Retry, db_err, transaction};
use backstop_core::StoreError;
use backstop_core::store::{Leadership, LeadershipParams, ResignParams};
use sqlx::MySqlConnection;

/// Inserts the lease, or takes it over where it lapsed at or before now, or renews it where
/// the caller holds it. Binds: name, owner, until, now; then owner, now, now (since); owner,
/// now, owner (owner); owner, now, until (lease_until).
///
/// Each assignment is right whether the server evaluates them left to right on the updated
/// row (MySQL, MariaDB by default) or all on the old row (MariaDB's
/// `SIMULTANEOUS_ASSIGNMENT`): `since` and `owner` come before the columns their conditions
/// read, and `lease_until`'s condition holds after a grant whichever `owner` it sees.
const ACQUIRE: &str = "
INSERT INTO {leaders} (name, owner, lease_until, since) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    since = IF(owner = ?, since, IF(lease_until <= ?, ?, since)),
    owner = IF(owner = ? OR lease_until <= ?, ?, owner),
    lease_until = IF(owner = ? OR lease_until <= ?, ?, lease_until)";

const HOLDER: &str = "SELECT owner, lease_until, since FROM {leaders} WHERE name = ?";

const RESIGN: &str = "DELETE FROM {leaders} WHERE name = ? AND owner = ?";

pub(crate) async fn acquire(db: &Db, p: &LeadershipParams) -> Result<Leadership, StoreError> {
    transaction!(db, Retry::Locks, |conn| acquire_locked(db, conn, p).await)
}

/// The upsert, then the read of who holds the (now locked) row.
async fn acquire_locked(
    db: &Db,
    conn: &mut MySqlConnection,
    p: &LeadershipParams,
) -> Result<Leadership, Fail> {
    let (now, until) = (to_ms(p.now), to_ms(p.until));
    sqlx::query(db.tables.q(ACQUIRE))
        .bind(&p.name)
        .bind(&p.owner)
        .bind(until)
        .bind(now)
        .bind(&p.owner)
        .bind(now)
        .bind(now)
        .bind(&p.owner)
        .bind(now)
        .bind(&p.owner)
        .bind(&p.owner)
        .bind(now)
        .bind(until)
        .execute(&mut *conn)
        .await?;
    let row = sqlx::query(db.tables.q(HOLDER))
        .bind(&p.name)
        .fetch_one(&mut *conn)
        .await?;
    Ok(Leadership {
        owner: col(&row, "owner")?,
        until: from_ms(col(&row, "lease_until")?),
        since: from_ms(col(&row, "since")?),
    })
}

pub(crate) async fn resign(db: &Db, p: &ResignParams) -> Result<bool, StoreError> {
    let done = sqlx::query(db.tables.q(RESIGN))
        .bind(&p.name)
        .bind(&p.owner)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected() > 0)
}
