//! Each schedule's range (the instants whose rows the check looks for) and the instant its
//! planner owes next, kept between the reconciler's passes and worked out again only when the
//! schedule's progress or definition changed: a pass looks at every schedule, and working out
//! instants costs about a microsecond each (10,000 every-minute schedules: a quarter of a
//! second, every pass, without this).

use backstop_core::schedule::{Progress, Schedule, ScheduleDef, watch};
use jiff::Timestamp;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What a schedule's progress says of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Known {
    /// Its instants in range, newest first, before any retention floor
    /// ([`watch::range`]).
    pub(crate) range: Vec<Timestamp>,
    /// The instant its planner owes next ([`watch::owed`]).
    pub(crate) owed: Option<Timestamp>,
}

impl Known {
    /// The range without the instants before `floor` (where retention may have deleted rows).
    pub(crate) fn from(&self, floor: Option<Timestamp>) -> &[Timestamp] {
        let n = match floor {
            Some(f) => self.range.partition_point(|at| *at >= f),
            None => self.range.len(),
        };
        &self.range[..n]
    }
}

struct Entry {
    def: ScheduleDef,
    planned_until: Option<Timestamp>,
    waiting: Option<Timestamp>,
    known: Arc<Known>,
}

/// The ranges of the schedules seen, by name.
#[derive(Default)]
pub(crate) struct Ranges {
    cache: Mutex<HashMap<String, Entry>>,
}

impl Ranges {
    /// What `progress` says of `s`, from the last pass's when neither changed since.
    pub(crate) fn of(&self, s: &Schedule, progress: &Progress) -> Arc<Known> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = cache.get(&s.name)
            && e.planned_until == progress.planned_until
            && e.waiting == progress.waiting
            && e.def == s.def
        {
            return e.known.clone();
        }
        let known = Arc::new(Known {
            range: watch::range(s, progress, None),
            owed: watch::owed(s, progress),
        });
        let entry = Entry {
            def: s.def.clone(),
            planned_until: progress.planned_until,
            waiting: progress.waiting,
            known: known.clone(),
        };
        cache.insert(s.name.clone(), entry);
        known
    }

    /// Forgets the schedules not in `names` (removed, or no longer usable).
    pub(crate) fn keep_only(&self, names: &HashSet<&str>) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|name, _| names.contains(name.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(cron: &str) -> Schedule {
        serde_json::from_value::<ScheduleDef>(serde_json::json!({"cron": cron, "kind": "k"}))
            .unwrap()
            .build("s", |_| true)
            .unwrap()
    }

    fn at(t: &str) -> Progress {
        Progress {
            planned_until: Some(t.parse().unwrap()),
            ..Progress::default()
        }
    }

    #[test]
    fn a_range_is_worked_out_again_when_progress_or_definition_changes() {
        let ranges = Ranges::default();
        let s = schedule("* * * * *");
        let a = ranges.of(&s, &at("2030-01-01T12:00:10Z"));
        assert!(Arc::ptr_eq(&a, &ranges.of(&s, &at("2030-01-01T12:00:10Z"))));
        let b = ranges.of(&s, &at("2030-01-01T12:01:10Z"));
        assert_eq!(
            b.range[0],
            "2030-01-01T12:01:00Z".parse::<Timestamp>().unwrap()
        );
        let hourly = ranges.of(&schedule("0 * * * *"), &at("2030-01-01T12:01:10Z"));
        assert_eq!(
            hourly.owed,
            Some("2030-01-01T13:00:00Z".parse::<Timestamp>().unwrap())
        );
        ranges.keep_only(&HashSet::new());
        assert!(!Arc::ptr_eq(
            &hourly,
            &ranges.of(&schedule("0 * * * *"), &at("2030-01-01T12:01:10Z"))
        ));
    }

    #[test]
    fn a_floor_cuts_the_older_instants() {
        let ranges = Ranges::default();
        let k = ranges.of(&schedule("* * * * *"), &at("2030-01-01T12:30:10Z"));
        assert_eq!(k.from(None).len(), 10);
        let floor: Timestamp = "2030-01-01T12:28:00Z".parse().unwrap();
        assert_eq!(k.from(Some(floor)).len(), 3, "12:30, 12:29, 12:28");
    }
}
