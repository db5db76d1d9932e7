//! Pauses and their history (the [`Pauses`] impl). A pause reads the stored row of its scope
//! and cause (locked), decides with [`PauseRecord::replaces`], and writes the row and its
//! history entry in the same transaction. A row that was absent is inserted plainly: if
//! another process inserted it meanwhile, the duplicate key runs the transaction again, which
//! then decides against that row (an upsert would have overwritten it undecided).

use crate::row::{col, from_ms, opt_time, text, to_ms};
use crate::tx::{Retry, db_err, transaction};
use crate::{Db, MysqlStore};
use backstop_core::StoreError;
use backstop_core::pause::{PauseAction, PauseCause, PauseEntry, PauseRecord};
use backstop_core::store::{
    BoxFuture, PauseHistoryParams, PauseParams, Pauses, PausesParams, ResumeParams,
};
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlRow;

macro_rules! columns {
    () => {
        "scope, cause, reason, paused_until, trips, actor, since"
    };
}

const ALL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {pauses} ORDER BY scope, cause"
);
const ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM {pauses} WHERE scope = ? AND cause = ? FOR UPDATE"
);

/// A new row. When another process inserted the same row since this one looked, the
/// duplicate key error runs the transaction again, and it then finds that row, locked.
const INSERT: &str = "
INSERT INTO {pauses} (reason, paused_until, trips, actor, since, scope, cause)
VALUES (?, ?, ?, ?, ?, ?, ?)";

/// The row this transaction read and locked.
const UPDATE: &str = "
UPDATE {pauses} SET reason = ?, paused_until = ?, trips = ?, actor = ?, since = ?
WHERE scope = ? AND cause = ?";

const CLEAR: &str = "DELETE FROM {pauses} WHERE scope = ? AND cause = ?";

const LOG: &str = "
INSERT INTO {pause_log} (scope, at, action, cause, reason, actor, paused_until)
VALUES (?, ?, ?, ?, ?, ?, ?)";

const HISTORY: &str = "
SELECT scope, at, action, cause, reason, actor, paused_until FROM {pause_log}
WHERE scope = ? ORDER BY id DESC LIMIT ?";

impl Pauses for MysqlStore {
    fn pauses(&self, _p: PausesParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(self.db.tables.q(ALL))
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
            transaction!(db, Retry::LocksAndDuplicates, |conn| {
                let stored = stored(db, conn, &r.scope, r.cause).await?;
                if !r.replaces(stored.as_ref()) {
                    return Ok(false);
                }
                let sql = if stored.is_some() { UPDATE } else { INSERT };
                sqlx::query(db.tables.q(sql))
                    .bind(&r.reason)
                    .bind(r.until.map(to_ms))
                    .bind(r.trips as i64)
                    .bind(&r.by)
                    .bind(to_ms(r.since))
                    .bind(r.scope.as_bytes())
                    .bind(r.cause.as_str())
                    .execute(&mut *conn)
                    .await?;
                log(db, conn, r, PauseAction::Pause).await?;
                Ok(true)
            })
        })
    }

    fn resume(&self, p: ResumeParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>> {
        Box::pin(async move {
            let db = &self.db;
            transaction!(db, Retry::Locks, |conn| {
                let mut removed = Vec::new();
                for cause in &p.causes {
                    let Some(gone) = stored(db, conn, &p.scope, *cause).await? else {
                        continue;
                    };
                    sqlx::query(db.tables.q(CLEAR))
                        .bind(p.scope.as_bytes())
                        .bind(cause.as_str())
                        .execute(&mut *conn)
                        .await?;
                    let entry = PauseRecord {
                        reason: p.reason.clone(),
                        by: p.by.clone(),
                        since: p.now,
                        until: None,
                        ..gone.clone()
                    };
                    log(db, conn, &entry, PauseAction::Resume).await?;
                    removed.push(gone);
                }
                Ok(removed)
            })
        })
    }

    fn pause_history(
        &self,
        p: PauseHistoryParams,
    ) -> BoxFuture<'_, Result<Vec<PauseEntry>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(self.db.tables.q(HISTORY))
                .bind(p.scope.as_bytes())
                .bind(p.limit as i64)
                .fetch_all(&self.db.pool)
                .await
                .map_err(db_err)?;
            rows.iter().map(entry).collect()
        })
    }
}

/// The stored row of `scope` and `cause`, locked.
async fn stored(
    db: &Db,
    conn: &mut MySqlConnection,
    scope: &str,
    cause: PauseCause,
) -> Result<Option<PauseRecord>, crate::tx::Fail> {
    let row = sqlx::query(db.tables.q(ONE))
        .bind(scope.as_bytes())
        .bind(cause.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.map(|r| record(&r)).transpose()?)
}

/// Records `r` in the history as `action`, at its `since`.
async fn log(
    db: &Db,
    conn: &mut MySqlConnection,
    r: &PauseRecord,
    action: PauseAction,
) -> Result<(), sqlx::Error> {
    sqlx::query(db.tables.q(LOG))
        .bind(r.scope.as_bytes())
        .bind(to_ms(r.since))
        .bind(action.as_str())
        .bind(r.cause.as_str())
        .bind(&r.reason)
        .bind(&r.by)
        .bind(r.until.map(to_ms))
        .execute(conn)
        .await?;
    Ok(())
}

fn cause(s: &str) -> Result<PauseCause, StoreError> {
    PauseCause::parse(s)
        .ok_or_else(|| StoreError::Database(format!("unknown pause cause {s:?}").into()))
}

fn record(r: &MySqlRow) -> Result<PauseRecord, StoreError> {
    Ok(PauseRecord {
        scope: text(r, "scope")?,
        cause: cause(&col::<String, _>(r, "cause")?)?,
        reason: col(r, "reason")?,
        until: opt_time(r, "paused_until")?,
        trips: col::<i64, _>(r, "trips")? as u32,
        by: col(r, "actor")?,
        since: from_ms(col(r, "since")?),
    })
}

fn entry(r: &MySqlRow) -> Result<PauseEntry, StoreError> {
    let action: String = col(r, "action")?;
    Ok(PauseEntry {
        scope: text(r, "scope")?,
        at: from_ms(col(r, "at")?),
        action: PauseAction::parse(&action).ok_or_else(|| {
            StoreError::Database(format!("unknown pause action {action:?}").into())
        })?,
        cause: cause(&col::<String, _>(r, "cause")?)?,
        reason: col(r, "reason")?,
        by: col(r, "actor")?,
        until: opt_time(r, "paused_until")?,
    })
}
