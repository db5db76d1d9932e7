//! One planning pass over one schedule: read its progress and its last tick, decide
//! ([`backstop_core::schedule::plan`]), write the rows, then store the progress fenced by
//! where the pass started.
//!
//! Rows first, progress second: a crash between them leaves rows whose instants the next
//! pass plans again, and those are repeats (same key, same payload), never second rows.

use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::Context;
use crate::enqueue::enqueue_tasks;
use backstop_core::schedule::{
    LastTick, Overlap, PlannedTick, Schedule, TickCause, plan, rfc3339_seconds, tick_payload,
};
use backstop_core::store::{AdvanceScheduleParams, EnqueueResult, GetParams, SchedulesParams};
use backstop_core::{Intake, NewTask, StoreError, TaskId};
use jiff::Timestamp;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct PassReport {
    /// Rows this pass created (not repeats of another planner's).
    pub(crate) created: usize,
    /// Rows another planner had written already.
    pub(crate) repeated: usize,
    /// More instants are due than one pass writes.
    pub(crate) more: bool,
    /// Whether this pass's progress was stored (`false`: another planner moved it first).
    pub(crate) advanced: bool,
    /// A `queue_one` instant is waiting for the running tick.
    pub(crate) waiting: bool,
}

/// Plans `s` up to `now` (the database's clock).
pub(crate) async fn pass(
    ctx: &Context,
    s: &Schedule,
    now: Timestamp,
) -> Result<PassReport, StoreError> {
    let record = ctx
        .store
        .schedules(SchedulesParams {
            names: Some(vec![s.name.clone()]),
        })
        .await?
        .pop();
    let progress = record.map(|r| r.progress).unwrap_or_default();
    // `allow` never looks at the last tick (unless a queue_one instant was left waiting by
    // an earlier definition).
    let needs_last = s.overlap != Overlap::Allow || progress.waiting.is_some();
    let last = match progress.last_tick.filter(|_| needs_last) {
        // `None` when retention pruned it: long finished.
        Some(id) => ctx.store.get(GetParams { id }).await?.map(|t| LastTick {
            id,
            status: t.status,
        }),
        None => None,
    };
    let decided = plan(s, &progress, last, now);
    let mut report = PassReport {
        more: decided.more,
        waiting: decided.progress.waiting.is_some(),
        ..PassReport::default()
    };
    let mut next = decided.progress.clone();
    let (mut missed, mut overlapped) = (0u64, 0u64);
    if !decided.ticks.is_empty() {
        let tasks: Vec<NewTask> = decided.ticks.iter().map(|t| tick_task(ctx, s, t)).collect();
        let results = enqueue_tasks(ctx, tasks, now).await?;
        let mut missed_ids = Vec::new();
        for (t, r) in decided.ticks.iter().zip(&results) {
            let id = match r {
                EnqueueResult::Created(id) => {
                    report.created += 1;
                    match t.compensated.as_deref() {
                        Some(r) if r.starts_with("missed") => {
                            missed += 1;
                            missed_ids.push(*id);
                        }
                        Some(r) if r.starts_with("overlap") => overlapped += 1,
                        _ => {}
                    }
                    *id
                }
                EnqueueResult::Existing(id) => {
                    report.repeated += 1;
                    *id
                }
                EnqueueResult::Conflict(id) => {
                    // Same instant, other bytes: the schedule's payload changed between two
                    // planners' passes. The first row stands.
                    tracing::warn!(schedule = %s.name, key = %t.key, task = %id,
                        "a tick of this instant exists with another payload; it stands");
                    *id
                }
            };
            if t.compensated.is_none() {
                next.last_tick = Some(id);
            }
        }
        // One alert per outage, raised by the planner that wrote its rows.
        if let (Some((from, to)), Some(first)) = (decided.new_outage, missed_ids.first()) {
            ctx.alerts.raise(AlertEvent {
                name: AlertName::ScheduleMissed,
                kind: Some(s.kind.clone()),
                task: Some(*first),
                detail: format!(
                    "schedule {:?}: no scheduler ran {}–{}; {} instant(s) missed (catch_up = {})",
                    s.name,
                    rfc3339_seconds(from),
                    rfc3339_seconds(to),
                    missed,
                    s.catch_up.as_str(),
                ),
            });
            tracing::warn!(schedule = %s.name, from = %from, to = %to, missed,
                "schedule missed instants while no scheduler ran");
        }
    }
    report.advanced = ctx
        .store
        .advance_schedule(AdvanceScheduleParams {
            name: s.name.clone(),
            expected: progress.planned_until,
            progress: next,
            add_missed: missed,
            add_overlapped: overlapped,
            now,
        })
        .await?;
    Ok(report)
}

/// The task of one planned tick, with its kind's defaults.
fn tick_task(ctx: &Context, s: &Schedule, t: &PlannedTick) -> NewTask {
    let payload = tick_payload(
        &s.payload,
        t.instant.at,
        TickCause::Planned {
            shifted: t.instant.shifted,
        },
    );
    let origin = serde_json::json!({
        "schedule": s.name,
        "instant": rfc3339_seconds(t.instant.at),
    });
    new_tick(
        ctx,
        s,
        t.key.clone(),
        payload,
        t.run_at,
        t.compensated.clone(),
        origin,
    )
}

/// A tick's task: the kind's attempt budget and validity, and the intake its fate says.
pub(crate) fn new_tick(
    ctx: &Context,
    s: &Schedule,
    key: String,
    payload: Vec<u8>,
    run_at: Timestamp,
    compensated: Option<String>,
    origin: serde_json::Value,
) -> NewTask {
    let kind = ctx.kinds.get(&s.kind).map(|k| &k.config);
    NewTask {
        id: TaskId::new(),
        kind: s.kind.clone(),
        key,
        payload,
        max_attempts: kind.map_or(1, |k| k.max_attempts),
        run_at,
        expires_at: kind
            .and_then(|k| k.expires_in)
            .map(|d| backstop_core::clock::add(run_at, d)),
        traceparent: None,
        intake: match compensated {
            None => Intake::Run,
            Some(reason) => Intake::Compensated { reason },
        },
        origin: Some(origin.to_string()),
    }
}
