//! The reconciler's check of schedules, run by the leader each pass (so by something other
//! than the planners it watches):
//!
//! - **silent**: every schedule, every pass: one whose planning stopped raises
//!   `schedule.silent`, once per episode;
//! - **rows**: each of a schedule's recent instants has its row (a missing one is logged and
//!   raised as `audit.drift`, once per instant); a pass looks up at most [`PASS_CAP`]
//!   instants, read per kind in batches, counts those it did not reach as unchecked, and the
//!   next pass goes on there;
//! - **late** and **overrun**: the ticks among those rows, and each schedule's last tick that
//!   was to run, not started `late_after` after they were due (`tick.late`) or whose attempt
//!   runs past `max_runtime` (`tick.overrun`), once per tick (`ticks`).
//!
//! What each alert was raised for is in the pass report, which the next pass reads back (on
//! this process or on the next leader), so nothing is raised twice.

use super::ranges::{Known, Ranges};
use super::registry::definitions;
use super::report::{Raised, ScheduleCheck, ScheduleVerdict, schedule_of};
use super::ticks::{Look, ago};
use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::{AlertHub, Context, Kinds};
use crate::retention::RetentionPolicy;
use backstop_core::schedule::{Schedule, rfc3339_seconds, tick_key, watch};
use backstop_core::store::{KeysParams, ScheduleRecord, Schedules, SchedulesParams, Tasks};
use backstop_core::{Clock, Store, Task};
use jiff::{SignedDuration, Timestamp};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Instants one pass looks up at most; the schedules it does not reach are counted unchecked
/// and looked at by the next passes.
pub const PASS_CAP: usize = 2_000;

/// Keys one read asks for at most.
const KEYS_PER_READ: usize = 500;

/// Retention's cutoff moves on while a pass runs: the range stops this far short of it.
const RETENTION_MARGIN: Duration = Duration::from_secs(600);

/// The check, with what it uses.
pub(crate) struct ScheduleWatch {
    tasks: Arc<dyn Tasks>,
    progress: Arc<dyn Schedules>,
    kinds: Arc<Kinds>,
    alerts: AlertHub,
    clock: Arc<dyn Clock>,
    /// The schedules of the configuration (those registered over the API are in the ledger).
    configured: Arc<[Schedule]>,
    /// The shortest time finished tasks are kept, if retention deletes any.
    keep: Option<Duration>,
    ranges: Ranges,
}

/// A schedule a pass looks at, with its progress and its instants in range.
struct Chosen<'a> {
    schedule: &'a Schedule,
    record: &'a ScheduleRecord,
    known: Arc<Known>,
}

impl ScheduleWatch {
    /// The check of the engine's schedules on its ledger.
    pub(crate) fn new(ctx: &Context, retention: &RetentionPolicy) -> Self {
        Self::with(
            ctx.store.clone(),
            ctx.kinds.clone(),
            ctx.alerts.clone(),
            ctx.clock.clone(),
            ctx.schedules.clone(),
            retention,
        )
    }

    /// The check from its parts.
    pub(crate) fn with(
        store: Arc<dyn Store>,
        kinds: Arc<Kinds>,
        alerts: AlertHub,
        clock: Arc<dyn Clock>,
        configured: Arc<[Schedule]>,
        retention: &RetentionPolicy,
    ) -> Self {
        let keep = match (retention.succeeded, retention.compensated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        ScheduleWatch {
            tasks: store.clone(),
            progress: store,
            kinds,
            alerts,
            clock,
            configured,
            keep,
            ranges: Ranges::default(),
        }
    }

    /// One pass of the check. `previous` is the last pass's (what it raised alerts for, and
    /// where it stopped); read failures are added to `errors`, and what they kept from being
    /// looked at is counted unchecked.
    pub(crate) async fn check(
        &self,
        previous: Option<&ScheduleCheck>,
        leading: &tokio::sync::watch::Receiver<bool>,
        errors: &mut Vec<String>,
    ) -> ScheduleCheck {
        let empty = ScheduleCheck::default();
        let previous = previous.unwrap_or(&empty);
        let records = match self.progress.schedules(SchedulesParams::default()).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "schedules check: cannot read the schedules' progress");
                errors.push(format!("schedules: {e}"));
                // What was raised stays known, so that nothing is raised twice later.
                return ScheduleCheck {
                    verdict: ScheduleVerdict::Partial,
                    cursor: previous.cursor.clone(),
                    late: previous.late.clone(),
                    overrun: previous.overrun.clone(),
                    missing_ticks: previous.missing_ticks.clone(),
                    silent: previous.silent.clone(),
                    ..ScheduleCheck::default()
                };
            }
        };
        let now = self.now(errors).await;
        let registered = self.registered(&records);
        let all = self.schedules(&registered);
        let names: HashSet<&str> = all.iter().map(|s| s.name.as_str()).collect();
        self.ranges.keep_only(&names);
        let by_name: HashMap<&str, &ScheduleRecord> =
            records.iter().map(|r| (r.name.as_str(), r)).collect();
        let mut out = ScheduleCheck {
            schedules: all.len() as u64,
            ..ScheduleCheck::default()
        };
        let raised = Raised::from(previous);
        self.silence(&all, &by_name, now, previous, &raised, &mut out);

        // Which schedules this pass looks at: from where the last one stopped, up to the cap.
        let floor = self.floor(now);
        let (mut chosen, mut spent, mut stopped) = (Vec::new(), 0usize, false);
        for s in rotation(&all, previous.cursor.as_deref()) {
            let Some(record) = by_name.get(s.name.as_str()) else {
                continue; // never planned: no instant is owed a row yet
            };
            let known = self.ranges.of(s, &record.progress);
            let n = known.from(floor).len();
            if stopped || (spent > 0 && spent + n > PASS_CAP) || !*leading.borrow() {
                stopped = true;
                out.unchecked += n as u64;
                continue;
            }
            spent += n;
            out.cursor = Some(s.name.clone());
            chosen.push(Chosen {
                schedule: s,
                record,
                known,
            });
        }
        if !stopped {
            out.cursor = None;
        }

        let rows = self.rows(&chosen, floor, errors).await;
        let look = Look {
            tasks: &*self.tasks,
            alerts: &self.alerts,
            raised: &raised,
            now,
        };
        let mut looked: HashSet<&str> = HashSet::new();
        for c in &chosen {
            let (s, range) = (c.schedule, c.known.from(floor));
            let Some(rows) = rows.get(s.kind.as_str()) else {
                out.unchecked += range.len() as u64; // its kind's rows could not be read
                continue;
            };
            match look
                .schedule(s, &c.record.progress, range, rows, &mut out)
                .await
            {
                Ok(()) => {
                    out.looked_at += 1;
                    looked.insert(&s.name);
                }
                Err(e) => {
                    tracing::error!(schedule = %s.name, error = %e, "schedules check: cannot read the ticks");
                    errors.push(format!("schedule {:?}: {e}", s.name));
                    out.unchecked += range.len() as u64;
                }
            }
        }
        // Schedules this pass did not look at keep what the last pass raised for them.
        let carry = |from: &[String], to: &mut Vec<String>| {
            to.extend(
                from.iter()
                    .filter(|k| {
                        schedule_of(k).is_some_and(|n| names.contains(n) && !looked.contains(n))
                    })
                    .cloned(),
            );
        };
        carry(&previous.late, &mut out.late);
        carry(&previous.overrun, &mut out.overrun);
        carry(&previous.missing_ticks, &mut out.missing_ticks);
        out.verdict = ScheduleVerdict::decide(out.missing, out.unchecked);
        out
    }

    /// The usable schedules registered over the API that the configuration does not name.
    fn registered(&self, records: &[ScheduleRecord]) -> Vec<Schedule> {
        let mut configured = None;
        let mut out = Vec::new();
        for (name, s) in definitions(records, &self.kinds) {
            let configured = configured.get_or_insert_with(|| {
                self.configured
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<HashSet<&str>>()
            });
            if let Ok(s) = s
                && !configured.contains(name)
            {
                out.push(s);
            }
        }
        out
    }

    /// Every schedule by name: the configured ones (borrowed, not copied: a pass runs every
    /// second over what may be 10,000 of them) and `registered`.
    fn schedules<'a>(&'a self, registered: &'a [Schedule]) -> Vec<&'a Schedule> {
        let mut all: Vec<&Schedule> = self.configured.iter().chain(registered).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The clock the planners plan against: the database's where it has one.
    async fn now(&self, errors: &mut Vec<String>) -> Timestamp {
        match self.progress.database_now().await {
            Ok(Some(t)) => t,
            Ok(None) => self.clock.now(),
            Err(e) => {
                errors.push(format!("schedules: the database's clock: {e}"));
                self.clock.now()
            }
        }
    }

    /// Instants before this may have lost their finished rows to retention.
    fn floor(&self, now: Timestamp) -> Option<Timestamp> {
        let keep = self.keep?.saturating_sub(RETENTION_MARGIN);
        Some(
            now.checked_sub(SignedDuration::try_from(keep).unwrap_or(SignedDuration::MAX))
                .unwrap_or(Timestamp::MIN),
        )
    }

    /// The rows of the chosen schedules' instants, by kind then key; a kind whose rows could
    /// not all be read is left out (its schedules are counted unchecked).
    async fn rows(
        &self,
        chosen: &[Chosen<'_>],
        floor: Option<Timestamp>,
        errors: &mut Vec<String>,
    ) -> HashMap<String, HashMap<String, Task>> {
        let mut keys: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for c in chosen {
            let s = c.schedule;
            let range = c.known.from(floor).iter();
            keys.entry(s.kind.as_str())
                .or_default()
                .extend(range.map(|at| tick_key(&s.name, *at)));
        }
        let mut out = HashMap::new();
        'kinds: for (kind, keys) in keys {
            let mut rows = HashMap::new();
            for chunk in keys.chunks(KEYS_PER_READ) {
                let read = self.tasks.tasks_by_keys(KeysParams {
                    kind: kind.to_string(),
                    keys: chunk.to_vec(),
                });
                match read.await {
                    Ok(found) => rows.extend(found.into_iter().map(|t| (t.key.clone(), t))),
                    Err(e) => {
                        tracing::error!(kind, error = %e, "schedules check: cannot read the ticks");
                        errors.push(format!("schedules of kind {kind:?}: {e}"));
                        continue 'kinds;
                    }
                }
            }
            out.insert(kind.to_string(), rows);
        }
        out
    }

    /// Finds the schedules whose planning is silent; raises `schedule.silent` for each that
    /// was not silent at the last pass.
    fn silence(
        &self,
        all: &[&Schedule],
        records: &HashMap<&str, &ScheduleRecord>,
        now: Timestamp,
        previous: &ScheduleCheck,
        raised: &Raised<'_>,
        out: &mut ScheduleCheck,
    ) {
        for s in all {
            let Some(r) = records.get(s.name.as_str()) else {
                continue; // never planned: nothing to lag behind
            };
            let owed = self.ranges.of(s, &r.progress).owed;
            if !watch::silent(s, &r.progress, owed, r.updated_at, now) {
                continue;
            }
            out.silent.push(s.name.clone());
            let Some(owed) = owed.filter(|_| !raised.silent.contains(s.name.as_str())) else {
                continue;
            };
            let planned = r.progress.planned_until.map_or("-".into(), rfc3339_seconds);
            let detail = format!(
                "schedule {:?}: no planner has planned its instant {} ({} ago; planned up to \
                 {planned}, progress last written {}): every process's planner is stopped or \
                 stuck",
                s.name,
                rfc3339_seconds(owed),
                ago(owed, now),
                rfc3339_seconds(r.updated_at),
            );
            tracing::warn!(schedule = %s.name, owed = %owed, planned_until = %planned,
                "schedule silent: no planner plans it");
            self.alerts.raise(AlertEvent {
                name: AlertName::ScheduleSilent,
                kind: Some(s.kind.clone()),
                task: None,
                detail,
            });
        }
        for name in &previous.silent {
            if !out.silent.contains(name) && all.iter().any(|s| &s.name == name) {
                tracing::info!(schedule = %name, "schedule planned again: no longer silent");
            }
        }
    }
}

/// `all` (sorted by name) in the order a pass looks at them: after `cursor`, then from the
/// start.
fn rotation<'a>(
    all: &'a [&'a Schedule],
    cursor: Option<&str>,
) -> impl Iterator<Item = &'a Schedule> {
    let split = cursor.map_or(0, |c| all.partition_point(|s| s.name.as_str() <= c));
    all[split..].iter().chain(&all[..split]).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> Vec<Schedule> {
        names
            .iter()
            .map(|n| {
                serde_json::from_value::<backstop_core::schedule::ScheduleDef>(
                    serde_json::json!({"cron": "* * * * *", "kind": "k"}),
                )
                .unwrap()
                .build(n, |_| true)
                .unwrap()
            })
            .collect()
    }

    fn order(all: &[Schedule], cursor: Option<&str>) -> Vec<String> {
        let all: Vec<&Schedule> = all.iter().collect();
        rotation(&all, cursor).map(|s| s.name.clone()).collect()
    }

    #[test]
    fn a_pass_goes_on_after_the_last_schedule_looked_at() {
        let all = named(&["a", "b", "c", "d"]);
        assert_eq!(order(&all, None), ["a", "b", "c", "d"]);
        assert_eq!(order(&all, Some("b")), ["c", "d", "a", "b"]);
        assert_eq!(order(&all, Some("d")), ["a", "b", "c", "d"]);
        // A cursor naming a schedule since removed goes on after where it was.
        assert_eq!(order(&all, Some("bb")), ["c", "d", "a", "b"]);
    }
}
