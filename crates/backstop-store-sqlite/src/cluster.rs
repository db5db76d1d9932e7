//! Leadership leases and beats (the [`Cluster`] impl). One conditional upsert takes a free
//! or lapsed leadership lease, or renews the caller's own; a refused caller reads who holds
//! it in the same transaction. Beats are upserts by name.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use backstop_core::StoreError;
use backstop_core::store::{
    Beat, BeatParams, BoxFuture, Cluster, ForgetBeatsParams, Leadership, LeadershipParams,
    ResignParams,
};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Connection, Row, SqliteConnection};

/// Inserts the lease (`?1` name, `?2` owner, `?3` until, `?4` now), or takes it over where
/// it lapsed at or before now, or renews it where `?2` holds it; returns the row when granted.
const ACQUIRE: &str = "
INSERT INTO backstop_leaders AS l (name, owner, lease_until, since) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, lease_until = excluded.lease_until,
    since = iif(l.owner = excluded.owner, l.since, excluded.since)
WHERE l.owner = excluded.owner OR l.lease_until <= excluded.since
RETURNING owner, lease_until, since";

const HOLDER: &str = "SELECT owner, lease_until, since FROM backstop_leaders WHERE name = ?1";

const RESIGN: &str = "DELETE FROM backstop_leaders WHERE name = ?1 AND owner = ?2";

impl Cluster for SqliteStore {
    fn acquire_leadership(
        &self,
        p: LeadershipParams,
    ) -> BoxFuture<'_, Result<Leadership, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            acquire(&mut w, &p).await
        })
    }

    fn resign_leadership(&self, p: ResignParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            resign(&mut w, &p).await
        })
    }

    fn beat(&self, p: BeatParams) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            beat(&mut w, &p).await
        })
    }

    fn beats<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<Beat>, StoreError>> {
        Box::pin(beats(&self.inner.readers, prefix))
    }

    fn forget_beats(&self, p: ForgetBeatsParams) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            forget_beats(&mut w, &p).await
        })
    }
}

fn leadership(r: &SqliteRow) -> Leadership {
    Leadership {
        owner: r.get("owner"),
        until: from_ms(r.get("lease_until")),
        since: from_ms(r.get("since")),
    }
}

async fn acquire(
    conn: &mut SqliteConnection,
    p: &LeadershipParams,
) -> Result<Leadership, StoreError> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let granted = sqlx::query(ACQUIRE)
        .bind(&p.name)
        .bind(&p.owner)
        .bind(to_ms(p.until))
        .bind(to_ms(p.now))
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err)?;
    let row = match granted {
        Some(row) => row,
        // Refused: the row exists (the insert conflicted) and this transaction holds the
        // write lock, so it is still there.
        None => sqlx::query(HOLDER)
            .bind(&p.name)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?,
    };
    let held = leadership(&row);
    tx.commit().await.map_err(db_err)?;
    Ok(held)
}

async fn resign(conn: &mut SqliteConnection, p: &ResignParams) -> Result<bool, StoreError> {
    let done = sqlx::query(RESIGN)
        .bind(&p.name)
        .bind(&p.owner)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected() > 0)
}

async fn beat(conn: &mut SqliteConnection, p: &BeatParams) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO backstop_beats (name, owner, at, detail) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE
         SET owner = excluded.owner, at = excluded.at, detail = excluded.detail",
    )
    .bind(&p.name)
    .bind(&p.owner)
    .bind(to_ms(p.at))
    .bind(&p.detail)
    .execute(conn)
    .await
    .map_err(db_err)?;
    Ok(())
}

async fn beats(pool: &SqlitePool, prefix: &str) -> Result<Vec<Beat>, StoreError> {
    // substr, not LIKE: names may hold `%` or `_`.
    let rows = sqlx::query(
        "SELECT name, owner, at, detail FROM backstop_beats
         WHERE substr(name, 1, length(?1)) = ?1 ORDER BY name",
    )
    .bind(prefix)
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    Ok(rows
        .iter()
        .map(|r| Beat {
            name: r.get("name"),
            owner: r.get("owner"),
            at: from_ms(r.get("at")),
            detail: r.get("detail"),
        })
        .collect())
}

async fn forget_beats(
    conn: &mut SqliteConnection,
    p: &ForgetBeatsParams,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM backstop_beats WHERE substr(name, 1, length(?1)) = ?1 AND at < ?2",
    )
    .bind(&p.prefix)
    .bind(to_ms(p.before))
    .execute(conn)
    .await
    .map_err(db_err)?;
    Ok(done.rows_affected())
}
