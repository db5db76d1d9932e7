//! Overrides of a kind's limits per key and their history (the [`LimitOverrides`] impl): the
//! row and its history entry are written in one transaction. A limited claim reads the rows
//! itself (`claim_limited::OVERRIDES`).

use crate::row::{col, from_ms, text, to_ms};
use crate::tx::{Retry, db_err, transaction};
use crate::{Db, MysqlStore};
use backstop_core::StoreError;
use backstop_core::store::{
    BoxFuture, ClearLimitOverrideParams, LimitOverride, LimitOverrideHistoryParams, LimitOverrides,
    LimitOverridesParams, OverrideAction, OverrideChange, SetLimitOverrideParams,
};
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlRow;

const ALL: &str = "
SELECT kind, lkey, max, rate_limit, rate_period, rate_burst, actor, reason, since
FROM {limit_overrides} WHERE kind = ? ORDER BY lkey";

const ONE: &str = "
SELECT kind, lkey, max, rate_limit, rate_period, rate_burst, actor, reason, since
FROM {limit_overrides} WHERE kind = ? AND lkey = ? FOR UPDATE";

const UPSERT: &str = "
INSERT INTO {limit_overrides}
    (kind, lkey, max, rate_limit, rate_period, rate_burst, actor, reason, since)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE max = VALUES(max), rate_limit = VALUES(rate_limit),
    rate_period = VALUES(rate_period), rate_burst = VALUES(rate_burst), actor = VALUES(actor),
    reason = VALUES(reason), since = VALUES(since)";

const CLEAR: &str = "DELETE FROM {limit_overrides} WHERE kind = ? AND lkey = ?";

const LOG: &str = "
INSERT INTO {limit_override_log}
    (kind, lkey, at, action, max, rate_limit, rate_period, rate_burst, actor, reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

const HISTORY: &str = "
SELECT kind, lkey, at AS since, action, max, rate_limit, rate_period, rate_burst, actor, reason
FROM {limit_override_log} WHERE kind = ? AND lkey = ? ORDER BY id DESC LIMIT ?";

impl LimitOverrides for MysqlStore {
    fn limit_overrides(
        &self,
        p: LimitOverridesParams,
    ) -> BoxFuture<'_, Result<Vec<LimitOverride>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(self.db.tables.q(ALL))
                .bind(p.kind.as_bytes())
                .fetch_all(&self.db.pool)
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
            let db = &self.db;
            let e = &p.entry;
            transaction!(db, Retry::Locks, |conn| {
                let [max, limit, period, burst] = e.stored();
                sqlx::query(db.tables.q(UPSERT))
                    .bind(e.kind.as_bytes())
                    .bind(e.key.as_bytes())
                    .bind(max)
                    .bind(limit)
                    .bind(period)
                    .bind(burst)
                    .bind(&e.by)
                    .bind(&e.reason)
                    .bind(to_ms(e.since))
                    .execute(&mut *conn)
                    .await?;
                log(db, conn, e, OverrideAction::Set).await?;
                Ok(())
            })
        })
    }

    fn clear_limit_override(
        &self,
        p: ClearLimitOverrideParams,
    ) -> BoxFuture<'_, Result<Option<LimitOverride>, StoreError>> {
        Box::pin(async move {
            let db = &self.db;
            transaction!(db, Retry::Locks, |conn| {
                let Some(row) = sqlx::query(db.tables.q(ONE))
                    .bind(p.kind.as_bytes())
                    .bind(p.key.as_bytes())
                    .fetch_optional(&mut *conn)
                    .await?
                else {
                    return Ok(None);
                };
                let gone = entry(&row)?;
                sqlx::query(db.tables.q(CLEAR))
                    .bind(p.kind.as_bytes())
                    .bind(p.key.as_bytes())
                    .execute(&mut *conn)
                    .await?;
                let change = LimitOverride {
                    by: p.by.clone(),
                    reason: p.reason.clone(),
                    since: p.now,
                    ..gone.clone()
                };
                log(db, conn, &change, OverrideAction::Clear).await?;
                Ok(Some(gone))
            })
        })
    }

    fn limit_override_history(
        &self,
        p: LimitOverrideHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<OverrideChange>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(self.db.tables.q(HISTORY))
                .bind(p.kind.as_bytes())
                .bind(p.key.as_bytes())
                .bind(i64::from(p.limit))
                .fetch_all(&self.db.pool)
                .await
                .map_err(db_err)?;
            rows.iter()
                .map(|r| {
                    let action: String = col(r, "action")?;
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
    db: &Db,
    conn: &mut MySqlConnection,
    e: &LimitOverride,
    action: OverrideAction,
) -> Result<(), sqlx::Error> {
    let [max, limit, period, burst] = e.stored();
    sqlx::query(db.tables.q(LOG))
        .bind(e.kind.as_bytes())
        .bind(e.key.as_bytes())
        .bind(to_ms(e.since))
        .bind(action.as_str())
        .bind(max)
        .bind(limit)
        .bind(period)
        .bind(burst)
        .bind(&e.by)
        .bind(&e.reason)
        .execute(conn)
        .await?;
    Ok(())
}

fn entry(r: &MySqlRow) -> Result<LimitOverride, StoreError> {
    let limits = LimitOverride::limits_from([
        col(r, "max")?,
        col(r, "rate_limit")?,
        col(r, "rate_period")?,
        col(r, "rate_burst")?,
    ]);
    Ok(LimitOverride {
        kind: text(r, "kind")?,
        key: text(r, "lkey")?,
        max: limits.max,
        rate: limits.rate,
        by: col(r, "actor")?,
        reason: col(r, "reason")?,
        since: from_ms(col(r, "since")?),
    })
}
