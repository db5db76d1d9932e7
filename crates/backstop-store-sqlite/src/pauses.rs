//! Pauses and their history (the [`Pauses`] impl). A pause reads the stored row of its scope
//! and cause, decides with [`PauseRecord::replaces`], and writes the row and its history
//! entry, all in one `BEGIN IMMEDIATE` transaction.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use backstop_core::StoreError;
use backstop_core::pause::{PauseAction, PauseCause, PauseEntry, PauseRecord};
use backstop_core::store::{
    BoxFuture, Cause, PauseHistoryParams, PauseParams, Pauses, PausesParams, ResumeParams,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, SqliteConnection};

macro_rules! columns {
    () => {
        "scope, cause, reason, paused_until, trips, actor, since"
    };
}

const ALL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM backstop_pauses ORDER BY scope, cause"
);
const ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM backstop_pauses WHERE scope = ?1 AND cause = ?2"
);
const CLEAR: &str = concat!(
    "DELETE FROM backstop_pauses WHERE scope = ?1 AND cause = ?2 RETURNING ",
    columns!()
);

const UPSERT: &str = "
INSERT INTO backstop_pauses (scope, cause, reason, paused_until, trips, actor, since)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (scope, cause) DO UPDATE
SET reason = excluded.reason, paused_until = excluded.paused_until, trips = excluded.trips,
    actor = excluded.actor, since = excluded.since";

const LOG: &str = "
INSERT INTO backstop_pause_log (scope, at, action, cause, reason, actor, paused_until)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

impl Pauses for SqliteStore {
    fn pauses(&self, _p: PausesParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(ALL)
                .fetch_all(&self.inner.readers)
                .await
                .map_err(db_err)?;
            rows.iter().map(record).collect()
        })
    }

    fn pause(&self, p: PauseParams) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            let mut tx = w.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
            let r = &p.record;
            let stored = sqlx::query(ONE)
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
            sqlx::query(UPSERT)
                .bind(&r.scope)
                .bind(r.cause.as_str())
                .bind(&r.reason)
                .bind(r.until.map(to_ms))
                .bind(r.trips as i64)
                .bind(&r.by)
                .bind(to_ms(r.since))
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            log(&mut tx, r, PauseAction::Pause).await?;
            tx.commit().await.map_err(db_err)?;
            Ok(true)
        })
    }

    fn resume(&self, p: ResumeParams) -> BoxFuture<'_, Result<Vec<PauseRecord>, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            let mut tx = w.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
            let mut removed = Vec::new();
            for cause in &p.causes {
                let row = sqlx::query(CLEAR)
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
                    log(&mut tx, &entry, PauseAction::Resume).await?;
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
            let rows = sqlx::query(
                "SELECT scope, at, action, cause, reason, actor, paused_until FROM backstop_pause_log \
                 WHERE scope = ?1 ORDER BY id DESC LIMIT ?2",
            )
            .bind(&p.scope)
            .bind(p.limit as i64)
            .fetch_all(&self.inner.readers)
            .await
            .map_err(db_err)?;
            rows.iter().map(entry).collect()
        })
    }
}

/// Records `r` in the history as `action`, at its `since`.
async fn log(
    conn: &mut SqliteConnection,
    r: &PauseRecord,
    action: PauseAction,
) -> Result<(), StoreError> {
    sqlx::query(LOG)
        .bind(&r.scope)
        .bind(to_ms(r.since))
        .bind(action.as_str())
        .bind(r.cause.as_str())
        .bind(&r.reason)
        .bind(&r.by)
        .bind(r.until.map(to_ms))
        .execute(conn)
        .await
        .map_err(db_err)?;
    Ok(())
}

fn cause(s: &str) -> Result<PauseCause, StoreError> {
    PauseCause::parse(s)
        .ok_or_else(|| StoreError::Database(Cause::msg(format!("unknown pause cause {s:?}"))))
}

fn record(r: &SqliteRow) -> Result<PauseRecord, StoreError> {
    Ok(PauseRecord {
        scope: r.get("scope"),
        cause: cause(r.get("cause"))?,
        reason: r.get("reason"),
        until: r.get::<Option<i64>, _>("paused_until").map(from_ms),
        trips: r.get::<i64, _>("trips") as u32,
        by: r.get("actor"),
        since: from_ms(r.get("since")),
    })
}

fn entry(r: &SqliteRow) -> Result<PauseEntry, StoreError> {
    let action: &str = r.get("action");
    Ok(PauseEntry {
        scope: r.get("scope"),
        at: from_ms(r.get("at")),
        action: PauseAction::parse(action).ok_or_else(|| {
            StoreError::Database(Cause::msg(format!("unknown pause action {action:?}")))
        })?,
        cause: cause(r.get("cause"))?,
        reason: r.get("reason"),
        by: r.get("actor"),
        until: r.get::<Option<i64>, _>("paused_until").map(from_ms),
    })
}
