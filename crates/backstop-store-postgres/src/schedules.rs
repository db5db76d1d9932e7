//! Schedules' stored progress (the [`Schedules`] impl): one row per schedule, written by a
//! fenced update (only where `planned_until` is still what the pass read) or, for a schedule
//! never planned, an insert that a concurrent one makes a no-op. A planner's batch of passes
//! is one transaction, its rows written in name order (so two batches over the same
//! schedules queue rather than deadlock). The database's clock is `clock_timestamp()`, not
//! `now()` (the start of the transaction).

use crate::row::{col, opt_time, time};
use crate::types::{Id, Time};
use crate::{Db, PostgresStore, db_err};
use backstop_core::StoreError;
use backstop_core::schedule::Progress;
use backstop_core::store::{
    AdvanceScheduleParams, BoxFuture, DefineScheduleParams, PauseScheduleParams, ScheduleRecord,
    Schedules, SchedulesParams,
};
use jiff::Timestamp;
use sqlx::postgres::PgRow;

macro_rules! select {
    () => {
        "SELECT name, planned_until, outage_from, outage_to, last_tick, waiting, paused,
                paused_note, missed, overlapped, definition, updated_at
         FROM {schema}.schedules"
    };
}

const ONE: &str = concat!(select!(), " WHERE name = $1");
/// `$1`: the names.
const SOME: &str = concat!(select!(), " WHERE name = ANY($1) ORDER BY name");
const ALL: &str = concat!(select!(), " ORDER BY name");

/// `$1` name, `$2` planned_until, `$3`/`$4` outage, `$5` last_tick, `$6` waiting, `$7`/`$8`
/// counters to add, `$9` now, `$10` the planned_until the pass read.
const ADVANCE: &str = "
UPDATE {schema}.schedules
SET planned_until = $2, outage_from = $3, outage_to = $4, last_tick = $5, waiting = $6,
    missed = missed + $7, overlapped = overlapped + $8, updated_at = $9
WHERE name = $1 AND planned_until IS NOT DISTINCT FROM $10";

const FIRST: &str = "
INSERT INTO {schema}.schedules
    (name, planned_until, outage_from, outage_to, last_tick, waiting, missed, overlapped,
     updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (name) DO NOTHING";

const PAUSE: &str = "
INSERT INTO {schema}.schedules (name, paused, paused_note, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE
SET paused = EXCLUDED.paused, paused_note = EXCLUDED.paused_note, updated_at = EXCLUDED.updated_at";

const DEFINE: &str = "
INSERT INTO {schema}.schedules (name, definition, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE
SET definition = EXCLUDED.definition, updated_at = EXCLUDED.updated_at";

impl Schedules for PostgresStore {
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
            sqlx::query(self.db.schema.sql(PAUSE))
                .bind(&p.name)
                .bind(p.paused)
                // A resume clears the note: it said why the schedule was paused.
                .bind(if p.paused { p.note.as_deref() } else { None })
                .bind(Time(p.now))
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
            sqlx::query(self.db.schema.sql(DEFINE))
                .bind(&p.name)
                .bind(p.definition.as_deref())
                .bind(Time(p.now))
                .execute(&self.db.pool)
                .await
                .map_err(db_err)?;
            one(&self.db, &p.name).await
        })
    }

    fn database_now(&self) -> BoxFuture<'_, Result<Option<Timestamp>, StoreError>> {
        Box::pin(async move {
            let Time(t) = sqlx::query_scalar::<_, Time>("SELECT clock_timestamp()")
                .fetch_one(&self.db.pool)
                .await
                .map_err(db_err)?;
            Ok(Some(t))
        })
    }
}

/// A deadlock (another transaction took the same rows in another order) aborts the batch,
/// which wrote nothing and is simply run again.
const DEADLOCK_RETRIES: usize = 5;

/// Writes each item fenced, in one transaction: `true` where written, in `items`' order.
async fn advance_all(db: &Db, items: &[AdvanceScheduleParams]) -> Result<Vec<bool>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    // Rows are locked in name order, whatever order the items come in.
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|a, b| items[*a].name.cmp(&items[*b].name));
    let mut tries = 0;
    loop {
        match in_transaction(db, items, &order).await {
            Ok(written) => return Ok(written),
            Err(e) if tries < DEADLOCK_RETRIES && crate::is_deadlock(&e) => {
                tries += 1;
                tracing::debug!(
                    tries,
                    "schedule advances deadlocked with another batch; again"
                );
            }
            Err(e) => return Err(db_err(e)),
        }
    }
}

async fn in_transaction(
    db: &Db,
    items: &[AdvanceScheduleParams],
    order: &[usize],
) -> Result<Vec<bool>, sqlx::Error> {
    let mut tx = db.pool.begin().await?;
    let mut written = vec![false; items.len()];
    for &i in order {
        match advance(db, &mut tx, &items[i]).await {
            Ok(w) => written[i] = w,
            Err(e) => {
                // At once: its row locks would hold up the other planners until then.
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
    }
    tx.commit().await?;
    Ok(written)
}

async fn advance(
    db: &Db,
    conn: &mut sqlx::PgConnection,
    p: &AdvanceScheduleParams,
) -> Result<bool, sqlx::Error> {
    let g = &p.progress;
    // ADVANCE and FIRST share their first nine binds.
    let bind = |sql: &'static str| {
        sqlx::query(db.schema.sql(sql))
            .bind(&p.name)
            .bind(g.planned_until.map(Time))
            .bind(g.outage.map(|o| Time(o.0)))
            .bind(g.outage.map(|o| Time(o.1)))
            .bind(g.last_tick.map(Id))
            .bind(g.waiting.map(Time))
            .bind(p.add_missed as i64)
            .bind(p.add_overlapped as i64)
            .bind(Time(p.now))
    };
    let updated = bind(ADVANCE)
        .bind(p.expected.map(Time))
        .execute(&mut *conn)
        .await?
        .rows_affected();
    if updated == 1 {
        return Ok(true);
    }
    if p.expected.is_some() {
        return Ok(false);
    }
    let inserted = bind(FIRST).execute(&mut *conn).await?.rows_affected();
    Ok(inserted == 1)
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
            sqlx::query(db.schema.sql(ONE))
                .bind(name)
                .fetch_all(&db.pool)
                .await
        }
        Some(names) => {
            sqlx::query(db.schema.sql(SOME))
                .bind(names)
                .fetch_all(&db.pool)
                .await
        }
        None => sqlx::query(db.schema.sql(ALL)).fetch_all(&db.pool).await,
    }
    .map_err(db_err)?;
    rows.iter().map(record).collect()
}

fn record(r: &PgRow) -> Result<ScheduleRecord, StoreError> {
    let outage = match (opt_time(r, "outage_from")?, opt_time(r, "outage_to")?) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    Ok(ScheduleRecord {
        name: col(r, "name")?,
        progress: Progress {
            planned_until: opt_time(r, "planned_until")?,
            outage,
            last_tick: col::<Option<Id>>(r, "last_tick")?.map(|Id(id)| id),
            waiting: opt_time(r, "waiting")?,
            paused: col(r, "paused")?,
        },
        missed: col::<i64>(r, "missed")? as u64,
        overlapped: col::<i64>(r, "overlapped")? as u64,
        definition: col(r, "definition")?,
        paused_note: col(r, "paused_note")?,
        updated_at: time(r, "updated_at")?,
    })
}
