//! What the reconciler's schedule check found, as its pass report carries it: counts, a
//! verdict that never claims more than was checked, and the ticks and schedules each alert was
//! raised for (so that the next pass, on this process or the next leader, raises none twice).

use crate::reconciler::nodes::RECONCILER_BEAT;
use backstop_core::store::{BeatsParams, Cluster};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What the rows of the checked instants say, from worst to best.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleVerdict {
    /// Some instants looked at have no row.
    Missing,
    /// Every instant looked at has its row, but some were not looked at (over the pass's cap,
    /// or a read failed): the next passes go on with them.
    Partial,
    /// Every instant in range was looked at and has its row.
    #[default]
    Complete,
}

impl ScheduleVerdict {
    /// Decides from what was found: a missing row wins over instants not looked at.
    pub fn decide(missing: u64, unchecked: u64) -> Self {
        if missing > 0 {
            ScheduleVerdict::Missing
        } else if unchecked > 0 {
            ScheduleVerdict::Partial
        } else {
            ScheduleVerdict::Complete
        }
    }
}

/// One pass's check of every schedule (configured, and registered over the API).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScheduleCheck {
    /// Schedules known to the pass.
    pub schedules: u64,
    /// Schedules whose rows this pass looked at.
    pub looked_at: u64,
    /// Instants whose row this pass looked for, from each schedule's oldest row in range on.
    pub checked: u64,
    /// Of those, instants without their row.
    pub missing: u64,
    /// Instants in range older than the schedule's oldest row there, which have none: not
    /// counted as missing (they may predate the schedule's first pass).
    pub before_first_row: u64,
    /// Instants in range this pass did not look at (over its cap, or a read failed).
    pub unchecked: u64,
    /// `complete`, `partial` (something was not looked at) or `missing`.
    pub verdict: ScheduleVerdict,
    /// Where the next pass goes on: the last schedule looked at, when some were not reached.
    pub cursor: Option<String>,
    /// Keys of the ticks late now (`tick.late` was raised for each once).
    pub late: Vec<String>,
    /// Keys of the ticks overrunning `max_runtime` now (`tick.overrun` raised once each).
    pub overrun: Vec<String>,
    /// Keys of the instants found without their row (`audit.drift` raised once each).
    pub missing_ticks: Vec<String>,
    /// Schedules whose planning is silent now (`schedule.silent` raised once per episode).
    pub silent: Vec<String>,
}

impl ScheduleCheck {
    /// How many of `keys` are ticks of schedule `name` (`<name>@…`).
    pub fn of(keys: &[String], name: &str) -> u64 {
        keys.iter().filter(|k| schedule_of(k) == Some(name)).count() as u64
    }
}

/// What a pass raised alerts for, as the next pass looks it up.
pub(crate) struct Raised<'a> {
    pub(crate) late: HashSet<&'a str>,
    pub(crate) overrun: HashSet<&'a str>,
    pub(crate) missing: HashSet<&'a str>,
    pub(crate) silent: HashSet<&'a str>,
}

impl<'a> Raised<'a> {
    /// What `c` raised alerts for.
    pub(crate) fn from(c: &'a ScheduleCheck) -> Self {
        let set = |v: &'a [String]| v.iter().map(String::as_str).collect();
        Raised {
            late: set(&c.late),
            overrun: set(&c.overrun),
            missing: set(&c.missing_ticks),
            silent: set(&c.silent),
        }
    }
}

/// The schedule a tick key belongs to: everything before its `@` (names never hold one).
pub(crate) fn schedule_of(key: &str) -> Option<&str> {
    key.split_once('@').map(|(name, _)| name)
}

/// The check of the reconciler's last recorded pass, by any process.
pub(crate) async fn last(cluster: &dyn Cluster) -> Option<ScheduleCheck> {
    #[derive(Deserialize)]
    struct Pass {
        #[serde(default)]
        schedules: ScheduleCheck,
    }
    let beats = cluster
        .beats(BeatsParams {
            prefix: RECONCILER_BEAT.to_string(),
        })
        .await
        .ok()?;
    let b = beats.into_iter().find(|b| b.name == RECONCILER_BEAT)?;
    serde_json::from_str::<Pass>(&b.detail)
        .ok()
        .map(|p| p.schedules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_row_wins_over_what_was_not_looked_at() {
        assert_eq!(ScheduleVerdict::decide(1, 5), ScheduleVerdict::Missing);
        assert_eq!(ScheduleVerdict::decide(0, 5), ScheduleVerdict::Partial);
        assert_eq!(ScheduleVerdict::decide(0, 0), ScheduleVerdict::Complete);
        assert_eq!(
            serde_json::to_value(ScheduleVerdict::Partial).unwrap(),
            "partial"
        );
    }

    #[test]
    fn keys_count_for_their_own_schedule_only() {
        let keys = vec![
            "s@2030-01-01T12:00:00Z".to_string(),
            "s-2@2030-01-01T12:00:00Z".to_string(),
            "s@2030-01-01T12:01:00Z".to_string(),
        ];
        assert_eq!(ScheduleCheck::of(&keys, "s"), 2);
        assert_eq!(ScheduleCheck::of(&keys, "s-2"), 1);
        assert_eq!(ScheduleCheck::of(&keys, "t"), 0);
    }
}
