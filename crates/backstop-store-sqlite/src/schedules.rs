//! Schedules' stored progress (the [`Schedules`] impl): one row per schedule, written by a
//! fenced update (only where `planned_until` is still what the pass read) or, for a schedule
//! never planned, an insert that a concurrent one makes a no-op.

use crate::SqliteStore;
use crate::db_err;
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::{id_bytes, parse_id};
use backstop_core::StoreError;
use backstop_core::schedule::Progress;
use backstop_core::store::{
    AdvanceScheduleParams, BoxFuture, DefineScheduleParams, PauseScheduleParams, ScheduleRecord,
    Schedules, SchedulesParams,
};
use jiff::Timestamp;
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, SqliteConnection};

macro_rules! select {
    () => {
        "SELECT name, planned_until, outage_from, outage_to, last_tick, waiting, paused, \
         paused_note, missed, overlapped, definition, updated_at FROM backstop_schedules"
    };
}

const ONE: &str = concat!(select!(), " WHERE name = ?1");
const ALL: &str = concat!(select!(), " ORDER BY name");

/// `?1` name, `?2` planned_until, `?3`/`?4` outage, `?5` last_tick, `?6` waiting, `?7`/`?8`
/// counters to add, `?9` now, `?10` the planned_until the pass read.
const ADVANCE: &str = "
UPDATE backstop_schedules
SET planned_until = ?2, outage_from = ?3, outage_to = ?4, last_tick = ?5, waiting = ?6,
    missed = missed + ?7, overlapped = overlapped + ?8, updated_at = ?9
WHERE name = ?1 AND planned_until IS ?10";

const FIRST: &str = "
INSERT INTO backstop_schedules
    (name, planned_until, outage_from, outage_to, last_tick, waiting, missed, overlapped,
     updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (name) DO NOTHING";

const PAUSE: &str = "
INSERT INTO backstop_schedules (name, paused, paused_note, updated_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused, paused_note = excluded.paused_note, updated_at = excluded.updated_at";

const DEFINE: &str = "
INSERT INTO backstop_schedules (name, definition, updated_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE
SET definition = excluded.definition, updated_at = excluded.updated_at";

impl Schedules for SqliteStore {
    fn schedules(
        &self,
        p: SchedulesParams,
    ) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, StoreError>> {
        Box::pin(async move {
            let mut conn = self.inner.readers.acquire().await.map_err(db_err)?;
            read(&mut conn, p.names.as_deref()).await
        })
    }

    fn advance_schedule(
        &self,
        p: AdvanceScheduleParams,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            advance(&mut w, &p).await
        })
    }

    fn pause_schedule(
        &self,
        p: PauseScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            sqlx::query(PAUSE)
                .bind(&p.name)
                .bind(p.paused)
                // A resume clears the note: it said why the schedule was paused.
                .bind(if p.paused { p.note.as_deref() } else { None })
                .bind(to_ms(p.now))
                .execute(&mut *w)
                .await
                .map_err(db_err)?;
            one(&mut w, &p.name).await
        })
    }

    fn define_schedule(
        &self,
        p: DefineScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>> {
        Box::pin(async move {
            let mut w = self.inner.lock_writer().await?;
            sqlx::query(DEFINE)
                .bind(&p.name)
                .bind(p.definition.as_deref())
                .bind(to_ms(p.now))
                .execute(&mut *w)
                .await
                .map_err(db_err)?;
            one(&mut w, &p.name).await
        })
    }

    fn database_now(&self) -> BoxFuture<'_, Result<Option<Timestamp>, StoreError>> {
        // One process owns the file: its clock is the only one.
        Box::pin(async { Ok(None) })
    }
}

async fn advance(w: &mut SqliteConnection, p: &AdvanceScheduleParams) -> Result<bool, StoreError> {
    let mut tx = w.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
    let g = &p.progress;
    // ADVANCE and FIRST share their first nine binds.
    let bind = |sql: &'static str| {
        sqlx::query(sql)
            .bind(&p.name)
            .bind(g.planned_until.map(to_ms))
            .bind(g.outage.map(|o| to_ms(o.0)))
            .bind(g.outage.map(|o| to_ms(o.1)))
            .bind(g.last_tick.as_ref().map(|id| id_bytes(id).to_vec()))
            .bind(g.waiting.map(to_ms))
            .bind(p.add_missed as i64)
            .bind(p.add_overlapped as i64)
            .bind(to_ms(p.now))
    };
    let updated = bind(ADVANCE)
        .bind(p.expected.map(to_ms))
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
    let written = if updated == 1 {
        true
    } else if p.expected.is_none() {
        bind(FIRST)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?
            .rows_affected()
            == 1
    } else {
        false
    };
    tx.commit().await.map_err(db_err)?;
    Ok(written)
}

async fn one(conn: &mut SqliteConnection, name: &str) -> Result<ScheduleRecord, StoreError> {
    read(conn, Some(&[name.to_string()]))
        .await?
        .pop()
        .ok_or_else(|| StoreError::Database(format!("schedule {name:?} vanished").into()))
}

async fn read(
    conn: &mut SqliteConnection,
    names: Option<&[String]>,
) -> Result<Vec<ScheduleRecord>, StoreError> {
    let rows = match names {
        // The planner's case: one schedule per pass.
        Some([name]) => sqlx::query(ONE).bind(name).fetch_all(&mut *conn).await,
        _ => sqlx::query(ALL).fetch_all(&mut *conn).await,
    }
    .map_err(db_err)?;
    let mut out: Vec<ScheduleRecord> = rows.iter().map(record).collect::<Result<_, _>>()?;
    if let Some(names) = names {
        out.retain(|r| names.contains(&r.name));
    }
    Ok(out)
}

fn record(r: &SqliteRow) -> Result<ScheduleRecord, StoreError> {
    let ms = |c: &str| r.get::<Option<i64>, _>(c).map(from_ms);
    let outage = match (ms("outage_from"), ms("outage_to")) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    Ok(ScheduleRecord {
        name: r.get("name"),
        progress: Progress {
            planned_until: ms("planned_until"),
            outage,
            last_tick: r
                .get::<Option<Vec<u8>>, _>("last_tick")
                .map(|b| parse_id(&b))
                .transpose()?,
            waiting: ms("waiting"),
            paused: r.get::<i64, _>("paused") != 0,
        },
        missed: r.get::<i64, _>("missed") as u64,
        overlapped: r.get::<i64, _>("overlapped") as u64,
        definition: r.get("definition"),
        paused_note: r.get("paused_note"),
        updated_at: from_ms(r.get("updated_at")),
    })
}
