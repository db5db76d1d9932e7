//! Overrides of a kind's limits per key and their history (the [`LimitOverrides`] impl): the
//! row and its history entry are written in one `BEGIN IMMEDIATE` transaction. A limited claim
//! reads the rows itself (`claim_limited::OVERRIDES`).

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use backstop_core::StoreError;
use backstop_core::store::{
    BoxFuture, ClearLimitOverrideParams, LimitOverride, LimitOverrideHistoryParams, LimitOverrides,
    LimitOverridesParams, OverrideAction, OverrideChange, SetLimitOverrideParams,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, SqliteConnection};

const ALL: &str = "
SELECT kind, lkey, max, rate_limit, rate_period, rate_burst, actor, reason, since
FROM backstop_limit_overrides WHERE kind = ?1 ORDER BY lkey";

const UPSERT: &str = "
INSERT INTO backstop_limit_overrides
    (kind, lkey, max, rate_limit, rate_period, rate_burst, actor, reason, since)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (kind, lkey) DO UPDATE
SET max = excluded.max, rate_limit = excluded.rate_limit, rate_period = excluded.rate_period,
    rate_burst = excluded.rate_burst, actor = excluded.actor, reason = excluded.reason,
    since = excluded.since";

const CLEAR: &str = "
DELETE FROM backstop_limit_overrides WHERE kind = ?1 AND lkey = ?2
RETURNING kind, lkey, max, rate_limit, rate_period, rate_burst, actor, reason, since";

const LOG: &str = "
INSERT INTO backstop_limit_override_log
    (kind, lkey, at, action, max, rate_limit, rate_period, rate_burst, actor, reason)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

const HISTORY: &str = "
SELECT kind, lkey, at AS since, action, max, rate_limit, rate_period, rate_burst, actor, reason
FROM backstop_limit_override_log WHERE kind = ?1 AND lkey = ?2 ORDER BY id DESC LIMIT ?3";

impl LimitOverrides for SqliteStore {
    fn limit_overrides(
        &self,
        p: LimitOverridesParams,
    ) -> BoxFuture<'_, Result<Vec<LimitOverride>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(ALL)
                .bind(&p.kind)
                .fetch_all(&self.inner.readers)
                .await
                .map_err(db_err)?;
            rows.iter().map(entry).collect()
        })
    }

    fn set_limit_override(
        &self,
        p: SetLimitOverrideParams,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            let mut tx = w.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
            let e = &p.entry;
            let [max, limit, period, burst] = e.stored();
            sqlx::query(UPSERT)
                .bind(&e.kind)
                .bind(&e.key)
                .bind(max)
                .bind(limit)
                .bind(period)
                .bind(burst)
                .bind(&e.by)
                .bind(&e.reason)
                .bind(to_ms(e.since))
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            log(&mut tx, e, OverrideAction::Set).await?;
            tx.commit().await.map_err(db_err)
        })
    }

    fn clear_limit_override(
        &self,
        p: ClearLimitOverrideParams,
    ) -> BoxFuture<'_, Result<Option<LimitOverride>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            let mut tx = w.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
            let Some(row) = sqlx::query(CLEAR)
                .bind(&p.kind)
                .bind(&p.key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_err)?
            else {
                return Ok(None);
            };
            let gone = entry(&row)?;
            let change = LimitOverride {
                by: p.by.clone(),
                reason: p.reason.clone(),
                since: p.now,
                ..gone.clone()
            };
            log(&mut tx, &change, OverrideAction::Clear).await?;
            tx.commit().await.map_err(db_err)?;
            Ok(Some(gone))
        })
    }

    fn limit_override_history(
        &self,
        p: LimitOverrideHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<OverrideChange>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(HISTORY)
                .bind(&p.kind)
                .bind(&p.key)
                .bind(i64::from(p.limit))
                .fetch_all(&self.inner.readers)
                .await
                .map_err(db_err)?;
            rows.iter()
                .map(|r| {
                    let action: String = r.try_get("action").map_err(db_err)?;
                    Ok(OverrideChange {
                        action: OverrideAction::stored(&action)?,
                        entry: entry(r)?,
                    })
                })
                .collect()
        })
    }
}

/// Records `e` in the history as `action`, at its `since`.
async fn log(
    conn: &mut SqliteConnection,
    e: &LimitOverride,
    action: OverrideAction,
) -> Result<(), StoreError> {
    let [max, limit, period, burst] = e.stored();
    sqlx::query(LOG)
        .bind(&e.kind)
        .bind(&e.key)
        .bind(to_ms(e.since))
        .bind(action.as_str())
        .bind(max)
        .bind(limit)
        .bind(period)
        .bind(burst)
        .bind(&e.by)
        .bind(&e.reason)
        .execute(conn)
        .await
        .map_err(db_err)?;
    Ok(())
}

fn entry(r: &SqliteRow) -> Result<LimitOverride, StoreError> {
    let n = |c: &str| r.try_get::<Option<i64>, _>(c).map_err(db_err);
    let limits = LimitOverride::limits_from([
        n("max")?,
        n("rate_limit")?,
        n("rate_period")?,
        n("rate_burst")?,
    ]);
    Ok(LimitOverride {
        kind: r.try_get("kind").map_err(db_err)?,
        key: r.try_get("lkey").map_err(db_err)?,
        max: limits.max,
        rate: limits.rate,
        by: r.try_get("actor").map_err(db_err)?,
        reason: r.try_get("reason").map_err(db_err)?,
        since: from_ms(r.try_get("since").map_err(db_err)?),
    })
}
