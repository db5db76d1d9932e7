//! Schedules' stored progress (the [`Schedules`] impl): one row per schedule, written by a
//! fenced update (only where `planned_until` is still what the pass read) or, for a schedule
//! never planned, an insert that a concurrent one makes a no-op. A planner's batch of passes
//! is written in one `BEGIN IMMEDIATE` transaction (one commit for all), with direct calls
//! that prepare each statement once ([`crate::raw`]).

use crate::SqliteStore;
use crate::db_err;
use crate::raw::{self, Db, Row, Value};
use crate::row::jiff_ms::{from_ms, to_ms};
use crate::row::{id_bytes, parse_id};
use crate::stmt_cache::StmtCache;
use backstop_core::StoreError;
use backstop_core::schedule::Progress;
use backstop_core::store::{
    AdvanceScheduleParams, BoxFuture, DefineScheduleParams, PauseScheduleParams, ScheduleRecord,
    Schedules, SchedulesParams,
};
use jiff::Timestamp;
use sqlx::SqliteConnection;

macro_rules! select {
    () => {
        "SELECT name, planned_until, outage_from, outage_to, last_tick, waiting, paused, \
         paused_note, missed, overlapped, definition, updated_at FROM backstop_schedules"
    };
}

/// `?1`: the names, as a JSON array.
const SOME: &str = concat!(
    select!(),
    " WHERE name IN (SELECT value FROM json_each(?1)) ORDER BY name"
);
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

    fn advance_schedules(
        &self,
        items: Vec<AdvanceScheduleParams>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>> {
        Box::pin(async move {
            if items.is_empty() {
                return Ok(Vec::new());
            }
            let mut w = self.inner.lock_writer().await?;
            advance(&mut w, &self.inner.stmts, &items).await
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

/// Writes each item fenced, in order, in one transaction: `true` where written.
async fn advance(
    w: &mut SqliteConnection,
    cache: &StmtCache,
    items: &[AdvanceScheduleParams],
) -> Result<Vec<bool>, StoreError> {
    raw::write(w, cache, |db| {
        let mut update = db.prepare(ADVANCE)?;
        let mut first = None;
        let mut out = Vec::with_capacity(items.len());
        for p in items {
            let g = &p.progress;
            // ADVANCE and FIRST share their first nine values.
            let values: [Value<'_>; 10] = [
                p.name.as_str().into(),
                g.planned_until.map(to_ms).into(),
                g.outage.map(|o| to_ms(o.0)).into(),
                g.outage.map(|o| to_ms(o.1)).into(),
                g.last_tick.as_ref().map(id_bytes).into(),
                g.waiting.map(to_ms).into(),
                Value::Int(p.add_missed as i64),
                Value::Int(p.add_overlapped as i64),
                Value::Int(to_ms(p.now)),
                p.expected.map(to_ms).into(),
            ];
            let written = if update.execute(&values)? == 1 {
                true
            } else if p.expected.is_none() {
                let insert = match &mut first {
                    Some(s) => s,
                    slot => slot.insert(db.prepare(FIRST)?),
                };
                insert.execute(&values[..9])? == 1
            } else {
                false
            };
            out.push(written);
        }
        Ok(out)
    })
    .await
}

async fn one(conn: &mut SqliteConnection, name: &str) -> Result<ScheduleRecord, StoreError> {
    read(conn, Some(&[name.to_string()]))
        .await?
        .pop()
        .ok_or_else(|| StoreError::Database(format!("schedule {name:?} vanished").into()))
}

/// The rows of `names` (all when `None`), by name: thousands at once for the planner's
/// batch, read in place rather than handed over one by one.
async fn read(
    conn: &mut SqliteConnection,
    names: Option<&[String]>,
) -> Result<Vec<ScheduleRecord>, StoreError> {
    let json = names.map(|n| serde_json::to_string(n).expect("strings"));
    raw::read(conn, |db: &Db<'_>| {
        let mut out = Vec::new();
        let (sql, values) = match &json {
            Some(json) => (SOME, vec![Value::Text(json)]),
            None => (ALL, Vec::new()),
        };
        db.prepare(sql)?.query(&values, |r| {
            out.push(record(r)?);
            Ok(())
        })?;
        Ok(out)
    })
    .await
}

/// One row of [`select!`]'s columns, in order.
fn record(r: &Row<'_>) -> Result<ScheduleRecord, StoreError> {
    let ms = |c| r.opt_int(c).map(from_ms);
    let outage = match (ms(2), ms(3)) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    // A NULL blob reads as empty; an id is never empty.
    let last_tick = match r.blob(4) {
        [] => None,
        b => Some(parse_id(b)?),
    };
    Ok(ScheduleRecord {
        name: r.text(0)?.to_owned(),
        progress: Progress {
            planned_until: ms(1),
            outage,
            last_tick,
            waiting: ms(5),
            paused: r.int(6) != 0,
        },
        missed: r.int(8) as u64,
        overlapped: r.int(9) as u64,
        definition: r.opt_text(10)?,
        paused_note: r.opt_text(7)?,
        updated_at: from_ms(r.int(11)),
    })
}
