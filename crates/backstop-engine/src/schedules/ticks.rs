//! What one schedule's rows say, as the reconciler's check reads them: instants without their
//! row, ticks late and ticks overrunning `max_runtime`; and the alert each raises the first
//! time a pass finds it.

use super::report::{Raised, ScheduleCheck, schedule_of};
use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::AlertHub;
use backstop_core::duration::format_duration;
use backstop_core::schedule::{Progress, Schedule, rfc3339_seconds, tick_key, watch};
use backstop_core::store::{GetParams, Tasks, TimelineParams};
use backstop_core::{EventType, StoreError, Task};
use jiff::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

/// One pass's look at schedules' rows, with what it uses.
pub(crate) struct Look<'a> {
    pub(crate) tasks: &'a dyn Tasks,
    pub(crate) alerts: &'a AlertHub,
    /// What the last pass raised alerts for.
    pub(crate) raised: &'a Raised<'a>,
    /// The clock the planners plan against.
    pub(crate) now: Timestamp,
}

impl Look<'_> {
    /// Looks at schedule `s`'s instants in `range` (newest first), given the rows of its kind
    /// found for them (`rows`, by key), and adds what it finds to `out`.
    pub(crate) async fn schedule(
        &self,
        s: &Schedule,
        progress: &Progress,
        range: &[Timestamp],
        rows: &HashMap<String, Task>,
        out: &mut ScheduleCheck,
    ) -> Result<(), StoreError> {
        let keys: Vec<String> = range.iter().map(|at| tick_key(&s.name, *at)).collect();
        let mut ticks: Vec<&Task> = keys.iter().filter_map(|k| rows.get(k)).collect();
        let found = watch::rows(range, |at| rows.contains_key(&tick_key(&s.name, at)));
        out.checked += found.checked as u64;
        out.before_first_row += found.before_first_row as u64;
        out.missing += found.missing.len() as u64;
        let missing: Vec<String> = found
            .missing
            .iter()
            .map(|at| tick_key(&s.name, *at))
            .collect();
        self.missing(s, progress, &missing);
        out.missing_ticks.extend(missing);

        // The last tick that was to run, wherever its instant is: with overlap = skip or
        // queue_one it is the one pending or running, however long ago it was due.
        let last = match progress.last_tick {
            Some(id) if !ticks.iter().any(|t| t.id == id) => self
                .tasks
                .get(GetParams { id })
                .await?
                .filter(|t| t.kind == s.kind && schedule_of(&t.key) == Some(s.name.as_str())),
            _ => None,
        };
        ticks.extend(&last);
        for t in ticks {
            if watch::is_late(s, t, self.now) {
                out.late.push(t.key.clone());
                if !self.raised.late.contains(t.key.as_str()) {
                    self.late(s, t);
                }
            }
            if watch::may_overrun(s, t, self.now)
                && let Some(started) = self.started(t).await?
                && watch::overran(s, started, self.now)
            {
                out.overrun.push(t.key.clone());
                if !self.raised.overrun.contains(t.key.as_str()) {
                    self.overrun(s, t, started);
                }
            }
        }
        Ok(())
    }

    /// Logs and raises (as `audit.drift`) the instants of `missing` no pass raised before.
    fn missing(&self, s: &Schedule, progress: &Progress, missing: &[String]) {
        let new: Vec<&str> = missing
            .iter()
            .map(String::as_str)
            .filter(|k| !self.raised.missing.contains(k))
            .collect();
        let Some(first) = new.first() else {
            return;
        };
        let planned = progress.planned_until.map_or("-".into(), rfc3339_seconds);
        let shown: Vec<&str> = new.iter().copied().take(5).collect();
        let detail = format!(
            "schedule {:?}: {} instant(s) have no row though the schedule is planned up to \
             {planned}: {}{}",
            s.name,
            new.len(),
            shown.join(", "),
            if new.len() > shown.len() { ", …" } else { "" },
        );
        tracing::error!(schedule = %s.name, missing = new.len(), first = %first, planned_until = %planned,
            "schedules check: planned instants have no row");
        self.raise(AlertName::AuditDrift, s, None, detail);
    }

    fn late(&self, s: &Schedule, t: &Task) {
        let detail = format!(
            "schedule {:?}: tick {} due {} has not started {} later (late_after = {})",
            s.name,
            t.key,
            rfc3339_seconds(t.run_at),
            ago(t.run_at, self.now),
            format_duration(s.late_after),
        );
        tracing::warn!(schedule = %s.name, key = %t.key, task = %t.id, "tick late: not started");
        self.raise(AlertName::TickLate, s, Some(t), detail);
    }

    fn overrun(&self, s: &Schedule, t: &Task, started: Timestamp) {
        let detail = format!(
            "schedule {:?}: tick {} has run {} since its attempt {} started at {} \
             (max_runtime = {})",
            s.name,
            t.key,
            ago(started, self.now),
            t.attempts,
            rfc3339_seconds(started),
            s.max_runtime.map_or("-".into(), format_duration),
        );
        tracing::warn!(schedule = %s.name, key = %t.key, task = %t.id, "tick overrun: running past max_runtime");
        self.raise(AlertName::TickOverrun, s, Some(t), detail);
    }

    fn raise(&self, name: AlertName, s: &Schedule, task: Option<&Task>, detail: String) {
        self.alerts.raise(AlertEvent {
            name,
            kind: Some(s.kind.clone()),
            task: task.map(|t| t.id),
            detail,
        });
    }

    /// When the attempt running now started, from the task's timeline (`None`: it is no
    /// longer running, or the row is gone).
    async fn started(&self, t: &Task) -> Result<Option<Timestamp>, StoreError> {
        let timeline = match self.tasks.timeline(TimelineParams { id: t.id }).await {
            Ok(tl) => tl,
            Err(StoreError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(timeline
            .iter()
            .rev()
            .find(|e| {
                e.kind == EventType::Attempt && e.outcome.is_none() && e.attempt == Some(t.attempts)
            })
            .map(|e| e.at))
    }
}

/// How long ago `then` was at `now`, in whole seconds.
pub(crate) fn ago(then: Timestamp, now: Timestamp) -> String {
    match now.duration_since(then).as_secs() {
        secs if secs > 0 => format_duration(Duration::from_secs(secs as u64)),
        _ => "0s".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    #[test]
    fn ago_is_in_whole_seconds() {
        let t: Timestamp = "2030-01-01T12:00:00Z".parse().unwrap();
        assert_eq!(ago(t, t + SignedDuration::from_secs(65)), "65s");
        assert_eq!(ago(t, t + SignedDuration::from_secs(120)), "2m");
        assert_eq!(ago(t + SignedDuration::from_secs(5), t), "0s");
    }
}
