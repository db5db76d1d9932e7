//! Leadership leases: one conditional upsert takes a free or lapsed lease, or renews the
//! caller's own. A refused upsert still locks the existing row, so the read of who holds it,
//! in the same transaction, finds it.

use crate::row::{col, time};
use crate::types::Time;
use crate::{Db, db_err};
use backstop_core::StoreError;
use backstop_core::store::{Leadership, LeadershipParams, ResignParams};
use sqlx::postgres::PgRow;

/// Inserts the lease (`$1` name, `$2` owner, `$3` until, `$4` now), or takes it over where it
/// lapsed at or before now, or renews it where `$2` holds it; returns the row when granted.
const ACQUIRE: &str = "
INSERT INTO {schema}.leaders AS l (name, owner, lease_until, since) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE
SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until,
    since = CASE WHEN l.owner = EXCLUDED.owner THEN l.since ELSE EXCLUDED.since END
WHERE l.owner = EXCLUDED.owner OR l.lease_until <= EXCLUDED.since
RETURNING owner, lease_until, since";

const HOLDER: &str = "SELECT owner, lease_until, since FROM {schema}.leaders WHERE name = $1";

const RESIGN: &str = "DELETE FROM {schema}.leaders WHERE name = $1 AND owner = $2";

fn leadership(r: &PgRow) -> Result<Leadership, StoreError> {
    Ok(Leadership {
        owner: col(r, "owner")?,
        until: time(r, "lease_until")?,
        since: time(r, "since")?,
    })
}

pub(crate) async fn acquire(db: &Db, p: &LeadershipParams) -> Result<Leadership, StoreError> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let granted = sqlx::query(db.schema.sql(ACQUIRE))
        .bind(&p.name)
        .bind(&p.owner)
        .bind(Time(p.until))
        .bind(Time(p.now))
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err)?;
    let row = match granted {
        Some(row) => row,
        None => sqlx::query(db.schema.sql(HOLDER))
            .bind(&p.name)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?,
    };
    let held = leadership(&row)?;
    tx.commit().await.map_err(db_err)?;
    Ok(held)
}

pub(crate) async fn resign(db: &Db, p: &ResignParams) -> Result<bool, StoreError> {
    let done = sqlx::query(db.schema.sql(RESIGN))
        .bind(&p.name)
        .bind(&p.owner)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected() > 0)
}
