//! Pauses and their history (the [`Pauses`] impl). A pause reads the stored row of its scope
//! and cause (locked), decides with [`PauseRecord::replaces`], and writes the row and its
//! history entry in the same transaction. A row that was absent is inserted only if it still
//! is; otherwise the decision is taken again against the row another process wrote (an
//! upsert would have overwritten it undecided).

use crate::row::{col, count, opt_time, time};
use crate::types::Time;
use crate::{PostgresStore, db_err};
use backstop_core::StoreError;
use backstop_core::pause::{PauseAction, PauseCause, PauseEntry, PauseRecord};
use backstop_core::store::{
    BoxFuture, PauseHistoryParams, PauseParams, Pauses, PausesParams, ResumeParams,
};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

macro_rules! columns {
    () => {
        "scope, cause, reason, paused_until, trips, actor, since"
    };
}

const ALL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {schema}.pauses ORDER BY scope, cause"
);
const ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {schema}.pauses WHERE scope = $1 AND cause = $2 FOR UPDATE"
);
const CLEAR: &str = concat!(
    "DELETE FROM {schema}.pauses WHERE scope = $1 AND cause = $2 RETURNING ",
    columns!()
);

/// A new row, unless another process inserted it since this one looked (then nothing, and the
/// decision is taken again against that row).
const INSERT: &str = "
INSERT INTO {schema}.pauses (scope, cause, reason, paused_until, trips, actor, since)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (scope, cause) DO NOTHING";

/// The row this transaction read and locked.
const UPDATE: &str = "
UPDATE {schema}.pauses SET reason = $3, paused_until = $4, trips = $5, actor = $6, since = $7
WHERE scope = $1 AND cause = $2";

const LOG: &str = "
INSERT INTO {schema}.pause_log (scope, at, action, cause, reason, actor, paused_until)
VALUES ($1, $2, $3, $4, $5, $6, $7)";

const HISTORY: &str = "
SELECT scope, at, action, cause, reason, actor, paused_until FROM {schema}.pause_log
WHERE scope = $1 ORDER BY id DESC LIMIT $2";

impl Pauses for PostgresStore {
    fn pauses(&self, _p: PausesParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(self.db.schema.sql(ALL))
                .fetch_all(&self.db.pool)
                .await
                .map_err(db_err)?;
            rows.iter().map(record).collect()
        })
    }

    fn pause(&self, p: PauseParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let db = &self.db;
            let r = &p.record;
            loop {
                let mut tx = db.pool.begin().await.map_err(db_err)?;
                let stored = sqlx::query(db.schema.sql(ONE))
                    .bind(&r.scope)
                    .bind(r.cause.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_err)?
                    .map(|row| record(&row))
                    .transpose()?;
                if !r.replaces(stored.as_ref()) {
                    return Ok(false);
                }
                let sql = if stored.is_some() { UPDATE } else { INSERT };
                let written = sqlx::query(db.schema.sql(sql))
                    .bind(&r.scope)
                    .bind(r.cause.as_str())
                    .bind(&r.reason)
                    .bind(r.until.map(Time))
                    .bind(r.trips as i64)
                    .bind(&r.by)
                    .bind(Time(r.since))
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err)?
                    .rows_affected();
                if written == 0 {
                    // Inserted by another process since this one looked: decide again.
                    tx.rollback().await.map_err(db_err)?;
                    continue;
                }
                log(self, &mut tx, r, PauseAction::Pause).await?;
                tx.commit().await.map_err(db_err)?;
                return Ok(true);
            }
        })
    }

    fn resume(&self, p: ResumeParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>> {
        Box::pin(async move {
            let db = &self.db;
            let mut tx = db.pool.begin().await.map_err(db_err)?;
            let mut removed = Vec::new();
            for cause in &p.causes {
                let row = sqlx::query(db.schema.sql(CLEAR))
                    .bind(&p.scope)
                    .bind(cause.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_err)?;
                if let Some(row) = row {
                    let gone = record(&row)?;
                    let entry = PauseRecord {
                        reason: p.reason.clone(),
                        by: p.by.clone(),
                        since: p.now,
                        until: None,
                        ..gone.clone()
                    };
                    log(self, &mut tx, &entry, PauseAction::Resume).await?;
                    removed.push(gone);
                }
            }
            tx.commit().await.map_err(db_err)?;
            Ok(removed)
        })
    }

    fn pause_history(
        &self,
        p: PauseHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<PauseEntry>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(self.db.schema.sql(HISTORY))
                .bind(&p.scope)
                .bind(p.limit as i64)
                .fetch_all(&self.db.pool)
                .await
                .map_err(db_err)?;
            rows.iter().map(entry).collect()
        })
    }
}

/// Records `r` in the history as `action`, at its `since`.
async fn log(
    store: &PostgresStore,
    conn: &mut PgConnection,
    r: &PauseRecord,
    action: PauseAction,
) -> Result<(), StoreError> {
    sqlx::query(store.db.schema.sql(LOG))
        .bind(&r.scope)
        .bind(Time(r.since))
        .bind(action.as_str())
        .bind(r.cause.as_str())
        .bind(&r.reason)
        .bind(&r.by)
        .bind(r.until.map(Time))
        .execute(conn)
        .await
        .map_err(db_err)?;
    Ok(())
}

fn cause(s: &str) -> Result<PauseCause, StoreError> {
    PauseCause::parse(s)
        .ok_or_else(|| StoreError::Database(format!("unknown pause cause {s:?}").into()))
}

fn record(r: &PgRow) -> Result<PauseRecord, StoreError> {
    Ok(PauseRecord {
        scope: col(r, "scope")?,
        cause: cause(&col::<String>(r, "cause")?)?,
        reason: col(r, "reason")?,
        until: opt_time(r, "paused_until")?,
        trips: count(r, "trips")?,
        by: col(r, "actor")?,
        since: time(r, "since")?,
    })
}

fn entry(r: &PgRow) -> Result<PauseEntry, StoreError> {
    let action: String = col(r, "action")?;
    Ok(PauseEntry {
        scope: col(r, "scope")?,
        at: time(r, "at")?,
        action: PauseAction::parse(&action).ok_or_else(|| {
            StoreError::Database(format!("unknown pause action {action:?}").into())
        })?,
        cause: cause(&col::<String>(r, "cause")?)?,
        reason: col(r, "reason")?,
        by: col(r, "actor")?,
        until: opt_time(r, "paused_until")?,
    })
}
