//! Schedules' stored progress (the [`Schedules`] impl): one row per schedule, written by a
//! fenced update (only where `planned_until` is still what the pass read) or, for a schedule
//! never planned, an insert that a concurrent one's duplicate key turns into `false`. A
//! planner's batch of passes is one transaction, its rows written in name order (so two
//! batches over the same schedules queue rather than deadlock; one InnoDB picks as a victim
//! anyway is tried again whole). The database's clock is the server's `UTC_TIMESTAMP(6)` counted in microseconds from the epoch,
//! which no session `time_zone` (nor its DST) changes.

use crate::row::{col, from_ms, id_bytes, opt_time, parse_id, text, to_ms};
use crate::tx::{DUPLICATE, Retry, db_err, error_number, transaction};
use crate::{Db, MysqlStore};
use backstop_core::StoreError;
use backstop_core::schedule::Progress;
use backstop_core::store::{
    AdvanceScheduleParams, BoxFuture, DefineScheduleParams, PauseScheduleParams, ScheduleRecord,
    Schedules, SchedulesParams,
};
use jiff::Timestamp;
use sqlx::mysql::MySqlRow;
use std::collections::HashSet;

macro_rules! select {
    () => {
        "SELECT name, planned_until, outage_from, outage_to, last_tick, waiting, paused, \
         paused_note, missed, overlapped, definition, updated_at FROM {schedules}"
    };
}

const ONE: &str = concat!(select!(), " WHERE name = ?");
const ALL: &str = concat!(select!(), " ORDER BY name");

/// Binds: planned_until, outage from/to, last_tick, waiting, counters to add, now; name and
/// the planned_until the pass read (`<=>`: NULL-safe).
const ADVANCE: &str = "
UPDATE {schedules}
SET planned_until = ?, outage_from = ?, outage_to = ?, last_tick = ?, waiting = ?,
    missed = missed + ?, overlapped = overlapped + ?, updated_at = ?
WHERE name = ? AND planned_until <=> ?";

const FIRST: &str = "
INSERT INTO {schedules}
    (planned_until, outage_from, outage_to, last_tick, waiting, missed, overlapped, updated_at,
     name)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";

const PAUSE: &str = "
INSERT INTO {schedules} (name, paused, paused_note, updated_at) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    paused = VALUES(paused), paused_note = VALUES(paused_note), updated_at = VALUES(updated_at)";

const DEFINE: &str = "
INSERT INTO {schedules} (name, definition, updated_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE definition = VALUES(definition), updated_at = VALUES(updated_at)";

/// Microseconds since the Unix epoch, by the server's clock. `UNIX_TIMESTAMP(NOW(6))` would
/// read the local time back through the session's zone, ambiguous in a DST fall-back hour.
const NOW: &str = "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";

impl Schedules for MysqlStore {
    fn schedules(
        &self,
        p: SchedulesParams,
    ) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, StoreError>> {
        Box::pin(async move { read(&self.db, p.names.as_deref()).await })
    }

    fn advance_schedules(
        &self,
        items: Vec<AdvanceScheduleParams>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>> {
        Box::pin(async move { advance_all(&self.db, &items).await })
    }

    fn pause_schedule(
        &self,
        p: PauseScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>> {
        Box::pin(async move {
            sqlx::query(self.db.tables.q(PAUSE))
                .bind(p.name.as_bytes())
                .bind(p.paused)
                // A resume clears the note: it said why the schedule was paused.
                .bind(if p.paused { p.note.as_deref() } else { None })
                .bind(to_ms(p.now))
                .execute(&self.db.pool)
                .await
                .map_err(db_err)?;
            one(&self.db, &p.name).await
        })
    }

    fn define_schedule(
        &self,
        p: DefineScheduleParams,
    ) -> BoxFuture<'_, Result<ScheduleRecord, StoreError>> {
        Box::pin(async move {
            sqlx::query(self.db.tables.q(DEFINE))
                .bind(p.name.as_bytes())
                .bind(p.definition.as_deref())
                .bind(to_ms(p.now))
                .execute(&self.db.pool)
                .await
                .map_err(db_err)?;
            one(&self.db, &p.name).await
        })
    }

    fn database_now(&self) -> BoxFuture<'_, Result<Option<Timestamp>, StoreError>> {
        Box::pin(async move {
            let micros: i64 = sqlx::query_scalar(NOW)
                .fetch_one(&self.db.pool)
                .await
                .map_err(db_err)?;
            Timestamp::from_microsecond(micros)
                .map(Some)
                .map_err(|e| StoreError::Database(format!("the server's clock: {e}").into()))
        })
    }
}

/// Writes each item fenced, in one transaction: `true` where written, in `items`' order.
async fn advance_all(db: &Db, items: &[AdvanceScheduleParams]) -> Result<Vec<bool>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    // Rows are locked in name order, whatever order the items come in.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|a, b| items[*a].name.as_bytes().cmp(items[*b].name.as_bytes()));
    transaction!(db, Retry::Locks, |conn| {
        let mut written = vec![false; items.len()];
        for &i in &order {
            written[i] = advance(db, conn, &items[i]).await?;
        }
        Ok(written)
    })
}

async fn advance(
    db: &Db,
    conn: &mut sqlx::MySqlConnection,
    p: &AdvanceScheduleParams,
) -> Result<bool, sqlx::Error> {
    let g = &p.progress;
    let bind = |sql| {
        sqlx::query(db.tables.q(sql))
            .bind(g.planned_until.map(to_ms))
            .bind(g.outage.map(|o| to_ms(o.0)))
            .bind(g.outage.map(|o| to_ms(o.1)))
            .bind(g.last_tick.as_ref().map(id_bytes))
            .bind(g.waiting.map(to_ms))
            .bind(p.add_missed as i64)
            .bind(p.add_overlapped as i64)
            .bind(to_ms(p.now))
            .bind(p.name.as_bytes())
    };
    let updated = bind(ADVANCE)
        .bind(p.expected.map(to_ms))
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if updated == 1 {
        return Ok(true);
    }
    if p.expected.is_some() {
        return Ok(false);
    }
    match bind(FIRST).execute(&mut *conn).await {
        Ok(_) => Ok(true),
        // Another planner's first pass, or a row that a pause or a registration made and
        // whose planned_until another pass has set since: not ours to write. InnoDB undoes
        // the statement alone; the transaction goes on.
        Err(e) if error_number(&e) == Some(DUPLICATE) => Ok(false),
        Err(e) => Err(e),
    }
}

async fn one(db: &Db, name: &str) -> Result<ScheduleRecord, StoreError> {
    read(db, Some(&[name.to_string()]))
        .await?
        .pop()
        .ok_or_else(|| StoreError::Database(format!("schedule {name:?} vanished").into()))
}

async fn read(db: &Db, names: Option<&[String]>) -> Result<Vec<ScheduleRecord>, StoreError> {
    let rows = match names {
        // The planner's case: one schedule per pass.
        Some([name]) => {
            sqlx::query(db.tables.q(ONE))
                .bind(name.as_bytes())
                .fetch_all(&db.pool)
                .await
        }
        _ => sqlx::query(db.tables.q(ALL)).fetch_all(&db.pool).await,
    }
    .map_err(db_err)?;
    let mut out: Vec<ScheduleRecord> = rows.iter().map(record).collect::<Result<_, _>>()?;
    if let Some(names) = names {
        // The planner's batch asks for thousands: look each up in a set.
        let names: HashSet<&str> = names.iter().map(String::as_str).collect();
        out.retain(|r| names.contains(r.name.as_str()));
    }
    Ok(out)
}

fn record(r: &MySqlRow) -> Result<ScheduleRecord, StoreError> {
    let outage = match (opt_time(r, "outage_from")?, opt_time(r, "outage_to")?) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    Ok(ScheduleRecord {
        name: text(r, "name")?,
        progress: Progress {
            planned_until: opt_time(r, "planned_until")?,
            outage,
            last_tick: col::<Option<Vec<u8>>, _>(r, "last_tick")?
                .map(|b| parse_id(&b))
                .transpose()?,
            waiting: opt_time(r, "waiting")?,
            paused: col::<i8, _>(r, "paused")? != 0,
        },
        missed: col::<i64, _>(r, "missed")? as u64,
        overlapped: col::<i64, _>(r, "overlapped")? as u64,
        definition: col(r, "definition")?,
        paused_note: col(r, "paused_note")?,
        updated_at: from_ms(col(r, "updated_at")?),
    })
}
