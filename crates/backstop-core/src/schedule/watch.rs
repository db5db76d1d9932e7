//! What the reconciler watches of a schedule, without I/O: which recent instants must have
//! their rows, whether a tick is late or overruns, and whether the schedule's planning has gone
//! silent. The engine's check reads the rows and raises the alerts.

use super::plan::Progress;
use super::spec::Schedule;
use crate::task::{Status, Task};
use jiff::{SignedDuration, Timestamp};
use std::time::Duration;

/// The reconciler looks for the rows of at least this many of a schedule's latest planned
/// instants.
pub const RANGE_MIN: usize = 10;

/// ... and of at most this many (a schedule firing every second watches its last 100 s).
pub const RANGE_MAX: usize = 100;

/// A tick stays in the range at least this long after it became late, so that a pass sees it.
pub const LATE_WATCH: Duration = Duration::from_secs(300);

/// A schedule is silent when the first instant after its planned progress passed more than
/// this long ago and nothing wrote its progress for as long: twice the planner's own
/// [`ON_TIME`](super::plan::ON_TIME) edge, past which an instant counts as missed.
pub const SILENT_AFTER: Duration = Duration::from_secs(120);

/// The instants of `s` whose rows the reconciler looks for, newest first: its latest
/// [`RANGE_MIN`] instants at or before `planned_until`, and further back while a tick there
/// could still be late (`late_after` + `jitter` + [`LATE_WATCH`]), at most [`RANGE_MAX`]. The
/// `queue_one` instant waiting for the running tick (no row yet) is left out, and so are
/// instants before `floor` (where retention may have deleted finished rows).
pub fn range(s: &Schedule, progress: &Progress, floor: Option<Timestamp>) -> Vec<Timestamp> {
    let Some(until) = progress.planned_until else {
        return Vec::new();
    };
    let late_span = s
        .late_after
        .saturating_add(s.jitter)
        .saturating_add(LATE_WATCH);
    let watched = sub(until, late_span);
    // Walk back to the oldest instant of the range, then enumerate forward as the planner
    // does, so that both name exactly the same instants.
    let mut oldest = None;
    let mut count = 0;
    let mut cursor = until;
    while count < RANGE_MAX {
        let Some(i) = s.times.last_at_or_before(cursor) else {
            break;
        };
        if (count >= RANGE_MIN && i.at < watched) || floor.is_some_and(|f| i.at < f) {
            break;
        }
        oldest = Some(i.at);
        count += 1;
        let Ok(before) = i.at.checked_sub(SignedDuration::from_nanos(1)) else {
            break;
        };
        cursor = before;
    }
    let Some(oldest) = oldest else {
        return Vec::new();
    };
    let start = oldest
        .checked_sub(SignedDuration::from_nanos(1))
        .unwrap_or(oldest);
    let (instants, _) = s.times.between(start, until, RANGE_MAX);
    instants
        .into_iter()
        .rev()
        .map(|i| i.at)
        .filter(|at| progress.waiting != Some(*at))
        .collect()
}

/// What the rows of a range say, from the instants that have one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowCheck {
    /// Instants without their row, newest first.
    pub missing: Vec<Timestamp>,
    /// Instants checked: those at or after the oldest one with a row.
    pub checked: usize,
    /// Instants older than the oldest one with a row, which have none: not counted as missing,
    /// because they may predate the schedule (its first pass writes no row for earlier
    /// instants).
    pub before_first_row: usize,
}

/// Checks `range` (newest first, as [`range`] gives it): every instant at or after the oldest
/// one with a row must have its row.
pub fn rows(range: &[Timestamp], has_row: impl Fn(Timestamp) -> bool) -> RowCheck {
    let Some(oldest) = range.iter().rposition(|at| has_row(*at)) else {
        return RowCheck {
            before_first_row: range.len(),
            ..RowCheck::default()
        };
    };
    RowCheck {
        missing: range[..oldest]
            .iter()
            .copied()
            .filter(|at| !has_row(*at))
            .collect(),
        checked: oldest + 1,
        before_first_row: range.len() - oldest - 1,
    }
}

/// The instant `s`'s planner owes next: the first after `planned_until` (`None`: never
/// planned, or no instant is left).
pub fn owed(s: &Schedule, progress: &Progress) -> Option<Timestamp> {
    Some(s.times.next_after(progress.planned_until?)?.at)
}

/// Whether `s`'s planning has gone silent at `now`: the instant its planner owes (`owed`, as
/// [`owed`] gives it) passed more than [`SILENT_AFTER`] ago and its progress was last written
/// (`updated_at`) as long ago. A paused schedule is never silent.
pub fn silent(
    s: &Schedule,
    progress: &Progress,
    owed: Option<Timestamp>,
    updated_at: Timestamp,
    now: Timestamp,
) -> bool {
    let edge = sub(now, SILENT_AFTER);
    !(s.paused || progress.paused) && owed.is_some_and(|o| o <= edge) && updated_at <= edge
}

/// Whether tick `t` of `s` is late at `now`: still pending, never started, and `late_after`
/// past when it was due (its `run_at`: the instant plus its jitter, or when a caught-up or
/// queued tick was written to run).
pub fn is_late(s: &Schedule, t: &Task, now: Timestamp) -> bool {
    t.status == Status::Pending && t.attempts == 0 && add(t.run_at, s.late_after) <= now
}

/// Whether running tick `t` of `s` may have run past `max_runtime` at `now`: its attempt
/// started at or after its `run_at`, so only these need the attempt's start read.
pub fn may_overrun(s: &Schedule, t: &Task, now: Timestamp) -> bool {
    t.status == Status::Running && s.max_runtime.is_some_and(|m| add(t.run_at, m) <= now)
}

/// Whether an attempt of a tick of `s` that started at `started` has overrun at `now`.
pub fn overran(s: &Schedule, started: Timestamp, now: Timestamp) -> bool {
    s.max_runtime.is_some_and(|m| add(started, m) <= now)
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    crate::clock::add(t, d)
}

fn sub(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_sub(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MIN)
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
