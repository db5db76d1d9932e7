//! Leadership leases and beats (the [`Cluster`] impl). One conditional upsert takes a free
//! or lapsed leadership lease, or renews the caller's own. A refused upsert still locks the existing row, so the read of who holds it,
//! in the same transaction, finds it. Beats are upserts by name.

use crate::row::{col, time};
use crate::types::Time;
use crate::{Db, PostgresStore, db_err};
use backstop_core::StoreError;
use backstop_core::store::{
    Beat, BeatParams, BoxFuture, Cluster, ForgetBeatsParams, Leadership, LeadershipParams,
    ResignParams,
};
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

const BEAT: &str = "
INSERT INTO {schema}.beats (name, owner, at, detail) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE
SET owner = EXCLUDED.owner, at = EXCLUDED.at, detail = EXCLUDED.detail";

// left(), not LIKE: names may hold `%` or `_`.
const BEATS: &str = "
SELECT name, owner, at, detail FROM {schema}.beats
WHERE left(name, length($1)) = $1 ORDER BY name";

const FORGET: &str = "DELETE FROM {schema}.beats WHERE left(name, length($1)) = $1 AND at < $2";

impl Cluster for PostgresStore {
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

fn leadership(r: &PgRow) -> Result<Leadership, StoreError> {
    Ok(Leadership {
        owner: col(r, "owner")?,
        until: time(r, "lease_until")?,
        since: time(r, "since")?,
    })
}

async fn acquire(db: &Db, p: &LeadershipParams) -> Result<Leadership, StoreError> {
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

async fn resign(db: &Db, p: &ResignParams) -> Result<bool, StoreError> {
    let done = sqlx::query(db.schema.sql(RESIGN))
        .bind(&p.name)
        .bind(&p.owner)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected() > 0)
}

async fn beat(db: &Db, p: &BeatParams) -> Result<(), StoreError> {
    sqlx::query(db.schema.sql(BEAT))
        .bind(&p.name)
        .bind(&p.owner)
        .bind(Time(p.at))
        .bind(&p.detail)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

async fn beats(db: &Db, prefix: &str) -> Result<Vec<Beat>, StoreError> {
    let rows = sqlx::query(db.schema.sql(BEATS))
        .bind(prefix)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter()
        .map(|r| {
            Ok(Beat {
                name: col(r, "name")?,
                owner: col(r, "owner")?,
                at: time(r, "at")?,
                detail: col(r, "detail")?,
            })
        })
        .collect()
}

async fn forget_beats(db: &Db, p: &ForgetBeatsParams) -> Result<u64, StoreError> {
    let done = sqlx::query(db.schema.sql(FORGET))
        .bind(&p.prefix)
        .bind(Time(p.before))
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected())
}
