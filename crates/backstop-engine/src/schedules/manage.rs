//! What operators do with schedules, on the engine's handle: list them with their next
//! instants and last ticks, run one now by hand, pause and resume, and backfill a range.

use super::pass::new_tick;
use super::registry::{check, registered};
use super::report::{ScheduleCheck, last};
use crate::engine::Engine;
use crate::enqueue::enqueue_tasks;
use backstop_core::schedule::{
    CatchUp, Overlap, Schedule, ScheduleDef, TickCause, manual_key, rfc3339_seconds, tick_key,
    tick_payload,
};
use backstop_core::store::{
    DefineScheduleParams, EnqueueResult, KeysParams, PauseScheduleParams, ScheduleRecord,
    SchedulesParams,
};
use backstop_core::{Status, StoreError, TaskId};
use jiff::Timestamp;
use serde::Serialize;

/// Instants a backfill may name at most: a larger range is several backfills.
pub const BACKFILL_MAX: usize = 10_000;

/// How many next instants and last ticks a listing shows.
const SHOWN: usize = 5;

/// Why a schedule action was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleActionError {
    #[error("no schedule named {0:?} (configured: {1})")]
    Unknown(String, String),
    #[error("{0}")]
    BadRange(String),
    #[error(transparent)]
    Invalid(backstop_core::schedule::ScheduleError),
    #[error("schedule {0:?} is defined in the configuration file; change it there")]
    Configured(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One schedule as `backstop schedules list` and `GET /v1/schedules` show it.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleView {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub kind: String,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    /// Paused, by its configuration or by hand.
    pub paused: bool,
    /// Who paused it by hand and why.
    pub paused_note: Option<String>,
    /// Every instant up to here has its row.
    pub planned_until: Option<Timestamp>,
    /// A `queue_one` instant waiting for the running tick.
    pub waiting: Option<Timestamp>,
    /// The next instants, by the database's clock.
    pub next: Vec<Timestamp>,
    /// The last instants, newest first, with their rows.
    pub last_ticks: Vec<TickView>,
    /// Instants compensated as missed, ever.
    pub missed: u64,
    /// Instants compensated as overlapping, ever.
    pub overlapped: u64,
    /// Ticks late now (not started `late_after` after they were due), as the reconciler's
    /// last pass found them.
    pub late: u64,
    /// Ticks running past `max_runtime` now, as the reconciler's last pass found them.
    pub overrun: u64,
    /// Recent planned instants without their row, as the reconciler's last pass found them.
    pub rows_missing: u64,
    /// No planner plans it (the reconciler's last pass found its planning silent).
    pub silent: bool,
    /// Registered over the API (not in the configuration file).
    pub registered: bool,
}

/// One instant's row.
#[derive(Debug, Clone, Serialize)]
pub struct TickView {
    pub instant: Timestamp,
    pub key: String,
    /// `None`: no row (not planned yet, or pruned by retention).
    pub id: Option<TaskId>,
    pub status: Option<Status>,
    pub reason: Option<String>,
}

/// What a backfill did, or would do (`dry_run`).
#[derive(Debug, Clone, Serialize)]
pub struct BackfillReport {
    pub schedule: String,
    pub from: Timestamp,
    pub to: Timestamp,
    /// Instants in the range.
    pub instants: usize,
    /// Rows created (or that would be).
    pub created: usize,
    /// Instants that had their row already.
    pub existing: usize,
    pub dry_run: bool,
}

/// What one planning pass did ([`Engine::plan_schedule`]).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PlanPass {
    /// Rows written.
    pub created: usize,
    /// Rows another planner had written.
    pub repeated: usize,
    /// More instants are due than one pass writes.
    pub more: bool,
}

/// A manual run.
#[derive(Debug, Clone, Serialize)]
pub struct Triggered {
    pub schedule: String,
    pub key: String,
    pub id: TaskId,
}

impl Engine {
    /// The configured schedules (those registered over the API are in the ledger).
    pub fn schedule_configs(&self) -> &[Schedule] {
        &self.parts.schedules
    }

    /// Every schedule: the configured ones, then those registered over the API.
    async fn all_schedules(&self) -> Result<Vec<(Schedule, bool)>, StoreError> {
        let mut all: Vec<(Schedule, bool)> = self
            .parts
            .schedules
            .iter()
            .map(|s| (s.clone(), false))
            .collect();
        for s in registered(&self.ctx).await? {
            if !all.iter().any(|(c, _)| c.name == s.name) {
                all.push((s, true));
            }
        }
        Ok(all)
    }

    async fn schedule(&self, name: &str) -> Result<Schedule, ScheduleActionError> {
        let all = self.all_schedules().await?;
        if let Some((s, _)) = all.iter().find(|(s, _)| s.name == name) {
            return Ok(s.clone());
        }
        let names: Vec<&str> = all.iter().map(|(s, _)| s.name.as_str()).collect();
        Err(ScheduleActionError::Unknown(
            name.to_string(),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
        ))
    }

    /// Every schedule with its progress, next instants and last ticks.
    pub async fn schedules(&self) -> Result<Vec<ScheduleView>, StoreError> {
        let now = super::clock::clock_now(&self.ctx).await?;
        let records = self.ctx.store.schedules(SchedulesParams::default()).await?;
        let checked = last(&*self.ctx.store).await;
        let mut out = Vec::new();
        for (s, registered) in self.all_schedules().await? {
            let record = records.iter().find(|r| r.name == s.name);
            let mut v = self.view(&s, record, now, checked.as_ref()).await?;
            v.registered = registered;
            out.push(v);
        }
        Ok(out)
    }

    /// Registers (or replaces) schedule `name` from its definition: every process plans it
    /// within a few seconds. A schedule of the configuration file cannot be replaced.
    pub async fn register_schedule(
        &self,
        name: &str,
        def: ScheduleDef,
    ) -> Result<ScheduleView, ScheduleActionError> {
        if self.parts.schedules.iter().any(|s| s.name == name) {
            return Err(ScheduleActionError::Configured(name.to_string()));
        }
        let s = check(&self.ctx, name, def).map_err(ScheduleActionError::Invalid)?;
        let now = super::clock::clock_now(&self.ctx).await?;
        let json = serde_json::to_string(&s.def).expect("a definition serialises");
        let record = self
            .ctx
            .store
            .define_schedule(DefineScheduleParams {
                name: name.to_string(),
                definition: Some(json),
                now,
            })
            .await?;
        tracing::info!(schedule = %name, "schedule registered");
        let checked = last(&*self.ctx.store).await;
        let mut v = self.view(&s, Some(&record), now, checked.as_ref()).await?;
        v.registered = true;
        Ok(v)
    }

    /// Removes a schedule registered over the API: no instant is planned any more; its ticks
    /// and counters stay in the ledger.
    pub async fn remove_schedule(&self, name: &str) -> Result<(), ScheduleActionError> {
        if self.parts.schedules.iter().any(|s| s.name == name) {
            return Err(ScheduleActionError::Configured(name.to_string()));
        }
        let s = self.schedule(name).await?;
        let now = super::clock::clock_now(&self.ctx).await?;
        self.ctx
            .store
            .define_schedule(DefineScheduleParams {
                name: s.name.clone(),
                definition: None,
                now,
            })
            .await?;
        tracing::info!(schedule = %name, "schedule removed");
        Ok(())
    }

    /// The view of `s`, with the counts of the reconciler's last check (`checked`).
    async fn view(
        &self,
        s: &Schedule,
        record: Option<&ScheduleRecord>,
        now: Timestamp,
        checked: Option<&ScheduleCheck>,
    ) -> Result<ScheduleView, StoreError> {
        let mut next = Vec::new();
        let mut cursor = now;
        while next.len() < SHOWN {
            let Some(i) = s.times.next_after(cursor) else {
                break;
            };
            next.push(i.at);
            cursor = i.at;
        }
        let mut instants = Vec::new();
        let mut cursor = now;
        while instants.len() < SHOWN {
            let Some(i) = s.times.last_at_or_before(cursor) else {
                break;
            };
            instants.push(i.at);
            let Ok(before) = i.at.checked_sub(jiff::SignedDuration::from_nanos(1)) else {
                break;
            };
            cursor = before;
        }
        let keys: Vec<String> = instants.iter().map(|at| tick_key(&s.name, *at)).collect();
        let rows = self
            .ctx
            .store
            .tasks_by_keys(KeysParams {
                kind: s.kind.clone(),
                keys: keys.clone(),
            })
            .await?;
        let last_ticks = instants
            .iter()
            .zip(keys)
            .map(|(at, key)| {
                let row = rows.iter().find(|t| t.key == key);
                TickView {
                    instant: *at,
                    id: row.map(|t| t.id),
                    status: row.map(|t| t.status),
                    reason: row.and_then(|t| t.reason.clone()),
                    key,
                }
            })
            .collect();
        let progress = record.map(|r| r.progress.clone()).unwrap_or_default();
        Ok(ScheduleView {
            name: s.name.clone(),
            cron: s.times.expr().to_string(),
            timezone: s.times.zone_name().to_string(),
            kind: s.kind.clone(),
            overlap: s.overlap,
            catch_up: s.catch_up,
            paused: s.paused || progress.paused,
            paused_note: record.and_then(|r| r.paused_note.clone()),
            planned_until: progress.planned_until,
            waiting: progress.waiting,
            next,
            last_ticks,
            missed: record.map_or(0, |r| r.missed),
            overlapped: record.map_or(0, |r| r.overlapped),
            late: checked.map_or(0, |c| ScheduleCheck::of(&c.late, &s.name)),
            overrun: checked.map_or(0, |c| ScheduleCheck::of(&c.overrun, &s.name)),
            rows_missing: checked.map_or(0, |c| ScheduleCheck::of(&c.missing_ticks, &s.name)),
            silent: checked.is_some_and(|c| c.silent.contains(&s.name)),
            registered: false,
        })
    }

    /// Plans schedule `name` up to now, once, as the planner loop does when it is due (the
    /// bench times this; the loop needs no help).
    pub async fn plan_schedule(&self, name: &str) -> Result<PlanPass, ScheduleActionError> {
        let s = self.schedule(name).await?;
        let r = super::pass::pass(&self.ctx, &s).await?;
        Ok(PlanPass {
            created: r.created,
            repeated: r.repeated,
            more: r.more,
        })
    }

    /// Runs schedule `name` now, by hand: a task keyed `<name>@manual:<now>` whose payload
    /// and origin say so. It takes no planned instant's row and no part in `overlap`.
    pub async fn trigger_schedule(
        &self,
        name: &str,
        actor: &str,
    ) -> Result<Triggered, ScheduleActionError> {
        let s = self.schedule(name).await?;
        let s = &s;
        let now = super::clock::clock_now(&self.ctx).await?;
        let key = manual_key(&s.name, now);
        let payload = tick_payload(&s.payload, now, TickCause::Manual);
        let origin = serde_json::json!({"schedule": s.name, "trigger": "manual", "actor": actor});
        let task = new_tick(&self.ctx, s, key.clone(), payload, now, None, origin);
        let r = enqueue_tasks(&self.ctx, vec![task], now).await?;
        let id = match r.first() {
            Some(EnqueueResult::Created(id) | EnqueueResult::Existing(id)) => *id,
            Some(EnqueueResult::Conflict(id)) => *id,
            None => unreachable!("one result per task"),
        };
        tracing::info!(schedule = %s.name, %key, task = %id, actor, "schedule triggered by hand");
        Ok(Triggered {
            schedule: s.name.clone(),
            key,
            id,
        })
    }

    /// Pauses (`paused`) or resumes schedule `name`: while paused, each instant is a
    /// `compensated` row `paused: …`.
    pub async fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
        note: Option<String>,
    ) -> Result<ScheduleView, ScheduleActionError> {
        let s = self.schedule(name).await?;
        let s = &s;
        let now = super::clock::clock_now(&self.ctx).await?;
        let record = self
            .ctx
            .store
            .pause_schedule(PauseScheduleParams {
                name: s.name.clone(),
                paused,
                note: if paused { note } else { None },
                now,
            })
            .await?;
        tracing::info!(schedule = %s.name, paused, "schedule paused or resumed by hand");
        let checked = last(&*self.ctx.store).await;
        Ok(self.view(s, Some(&record), now, checked.as_ref()).await?)
    }

    /// Creates the rows of every instant of `name` in `[from, to]` that has none, to run now
    /// (or counts them: `dry_run`). Idempotent: a second backfill of the range creates
    /// nothing. `to` may not be in the future, where the planner writes the rows.
    pub async fn backfill_schedule(
        &self,
        name: &str,
        from: Timestamp,
        to: Timestamp,
        dry_run: bool,
    ) -> Result<BackfillReport, ScheduleActionError> {
        let s = self.schedule(name).await?;
        let s = &s;
        let now = super::clock::clock_now(&self.ctx).await?;
        if from > to {
            return Err(ScheduleActionError::BadRange(format!(
                "--from {} is after --to {}",
                rfc3339_seconds(from),
                rfc3339_seconds(to)
            )));
        }
        if to > now {
            return Err(ScheduleActionError::BadRange(format!(
                "--to {} is in the future (the database's clock says {}): the planner writes \
                 those rows when their instants come",
                rfc3339_seconds(to),
                rfc3339_seconds(now)
            )));
        }
        // `from` itself is in the range: start just before it (the earliest time has no
        // instant before it anyway).
        let start = from
            .checked_sub(jiff::SignedDuration::from_nanos(1))
            .unwrap_or(from);
        let (instants, more) = s.times.between(start, to, BACKFILL_MAX);
        if more {
            return Err(ScheduleActionError::BadRange(format!(
                "the range holds more than {BACKFILL_MAX} instants of {:?}: backfill it in parts",
                s.name
            )));
        }
        let keys: Vec<String> = instants.iter().map(|i| tick_key(&s.name, i.at)).collect();
        let mut existing = 0;
        for chunk in keys.chunks(500) {
            existing += self
                .ctx
                .store
                .tasks_by_keys(KeysParams {
                    kind: s.kind.clone(),
                    keys: chunk.to_vec(),
                })
                .await?
                .len();
        }
        let mut report = BackfillReport {
            schedule: s.name.clone(),
            from,
            to,
            instants: instants.len(),
            created: instants.len() - existing,
            existing,
            dry_run,
        };
        if dry_run || report.created == 0 {
            return Ok(report);
        }
        let tasks = instants
            .iter()
            .zip(keys)
            .map(|(i, key)| {
                // The planner's bytes for the instant, so a backfilled row and a planned one
                // are the same operation.
                let payload =
                    tick_payload(&s.payload, i.at, TickCause::Planned { shifted: i.shifted });
                let origin = serde_json::json!({
                    "schedule": s.name,
                    "instant": rfc3339_seconds(i.at),
                    "backfill": true,
                });
                new_tick(&self.ctx, s, key, payload, now, None, origin)
            })
            .collect();
        let results = enqueue_tasks(&self.ctx, tasks, now).await?;
        report.created = results
            .iter()
            .filter(|r| matches!(r, EnqueueResult::Created(_)))
            .count();
        report.existing = report.instants - report.created;
        tracing::info!(schedule = %s.name, created = report.created, existing = report.existing,
            "schedule backfilled");
        Ok(report)
    }
}
