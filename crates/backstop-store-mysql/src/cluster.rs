//! Leadership leases and beats (the [`Cluster`] impl). One conditional upsert (`INSERT … ON DUPLICATE KEY UPDATE` with `IF()`s)
//! takes a free or lapsed lease, or renews the caller's own; the read of who holds it follows
//! in the same transaction, which holds the row's lock. Beats are upserts by name.

use crate::row::{col, from_ms, to_ms};
use crate::tx::{Fail, Retry, db_err, transaction};
use crate::{Db, MysqlStore};
use backstop_core::StoreError;
use backstop_core::store::{
    Beat, BeatParams, BoxFuture, Cluster, ForgetBeatsParams, Leadership, LeadershipParams,
    ResignParams,
};
use sqlx::MySqlConnection;

impl Cluster for MysqlStore {
    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>> {
        Box::pin(async move { acquire(&self.db, &p).await })
    }

    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move { resign(&self.db, &p).await })
    }

    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { beat(&self.db, &p).await })
    }

    fn beats<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<Beat>, StoreError>> {
        Box::pin(beats(&self.db, prefix))
    }

    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { forget_beats(&self.db, &p).await })
    }
}

const BEAT: &str = "
INSERT INTO {beats} (name, owner, at, detail) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE owner = VALUES(owner), at = VALUES(at), detail = VALUES(detail)";

// LEFT(), not LIKE: names may hold `%` or `_`.
const BEATS: &str = "
SELECT name, owner, at, detail FROM {beats} WHERE LEFT(name, CHAR_LENGTH(?)) = ? ORDER BY name";

const FORGET: &str = "DELETE FROM {beats} WHERE LEFT(name, CHAR_LENGTH(?)) = ? AND at < ?";

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

async fn acquire(db: &Db, p: &LeadershipParams) -> Result<Leadership, StoreError> {
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

async fn resign(db: &Db, p: &ResignParams) -> Result<bool, StoreError> {
    let done = sqlx::query(db.tables.q(RESIGN))
        .bind(&p.name)
        .bind(&p.owner)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected() > 0)
}

async fn beat(db: &Db, p: &BeatParams) -> Result<(), StoreError> {
    sqlx::query(db.tables.q(BEAT))
        .bind(&p.name)
        .bind(&p.owner)
        .bind(to_ms(p.at))
        .bind(&p.detail)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

async fn beats(db: &Db, prefix: &str) -> Result<Vec<Beat>, StoreError> {
    let rows = sqlx::query(db.tables.q(BEATS))
        .bind(prefix)
        .bind(prefix)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter()
        .map(|r| {
            Ok(Beat {
                name: col(r, "name")?,
                owner: col(r, "owner")?,
                at: from_ms(col(r, "at")?),
                detail: col(r, "detail")?,
            })
        })
        .collect()
}

async fn forget_beats(db: &Db, p: &ForgetBeatsParams) -> Result<u64, StoreError> {
    let done = sqlx::query(db.tables.q(FORGET))
        .bind(&p.prefix)
        .bind(&p.prefix)
        .bind(to_ms(p.before))
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected())
}
