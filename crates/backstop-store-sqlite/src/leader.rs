//! Leadership leases: one conditional upsert takes a free or lapsed lease, or renews the
//! caller's own; a refused caller reads who holds it in the same transaction.

use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use backstop_core::StoreError;
use backstop_core::store::{Leadership, LeadershipParams, ResignParams};
use sqlx::sqlite::SqliteRow;
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

fn leadership(r: &SqliteRow) -> Leadership {
    Leadership {
        owner: r.get("owner"),
        until: from_ms(r.get("lease_until")),
        since: from_ms(r.get("since")),
    }
}

pub(crate) async fn acquire(
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

pub(crate) async fn resign(
    conn: &mut SqliteConnection,
    p: &ResignParams,
) -> Result<bool, StoreError> {
    let done = sqlx::query(RESIGN)
        .bind(&p.name)
        .bind(&p.owner)
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected() > 0)
}
