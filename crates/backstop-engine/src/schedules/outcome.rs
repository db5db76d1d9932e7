//! What one schedule's pass comes to once its rows are written: the rows created and
//! repeated, the progress to store (its last tick is the newest row that runs), the counters
//! to add, and the one `schedule.missed` alert of a new outage, raised by the planner that
//! wrote its rows.

use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::Context;
use backstop_core::schedule::{Plan, Progress, Schedule, rfc3339_seconds};
use backstop_core::store::EnqueueResult;

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

/// A pass whose rows are written, its progress not yet stored.
pub(crate) struct Outcome {
    pub(crate) report: PassReport,
    /// The progress to store.
    pub(crate) progress: Progress,
    pub(crate) missed: u64,
    pub(crate) overlapped: u64,
}

/// The outcome of `decided` for `s`, given the store's answer for each of its ticks (`rows`,
/// in order); raises the alert of a new outage.
pub(crate) fn outcome(
    ctx: &Context,
    s: &Schedule,
    decided: &Plan,
    rows: &[EnqueueResult],
) -> Outcome {
    let mut out = Outcome {
        report: PassReport {
            more: decided.more,
            waiting: decided.progress.waiting.is_some(),
            ..PassReport::default()
        },
        progress: decided.progress.clone(),
        missed: 0,
        overlapped: 0,
    };
    let mut missed_ids = Vec::new();
    for (t, r) in decided.ticks.iter().zip(rows) {
        let id = match r {
            EnqueueResult::Created(id) => {
                out.report.created += 1;
                match t.compensated.as_deref() {
                    Some(r) if r.starts_with("missed") => {
                        out.missed += 1;
                        missed_ids.push(*id);
                    }
                    Some(r) if r.starts_with("overlap") => out.overlapped += 1,
                    _ => {}
                }
                *id
            }
            EnqueueResult::Existing(id) => {
                out.report.repeated += 1;
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
            out.progress.last_tick = Some(id);
        }
    }
    // One alert per outage, raised by the planner that wrote its rows.
    if let (Some((from, to)), Some(first)) = (decided.new_outage, missed_ids.first()) {
        let missed = out.missed;
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
    out
}
