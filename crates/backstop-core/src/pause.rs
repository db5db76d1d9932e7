//! Pausing a kind's dispatch: by hand, by its circuit breaker, or because its target asked to
//! wait (`Retry-After` on a 429 or 503).
//!
//! A pause is a row per `(scope, cause)` in the ledger, so every process on a database sees it
//! and it outlives restarts. The three causes never overwrite one another: a breaker tripping
//! while an operator's pause stands leaves that pause as it is, and an operator's resume
//! clears them all. What a kind may do now is its [`Gate`], computed from its rows and a clock.
//!
//! Paused work spends nothing: nothing is claimed, nothing is attempted, tasks stay `pending`.

use jiff::Timestamp;
use std::fmt;
use std::time::Duration;

/// The scope a kind's pauses are kept under.
pub fn kind_scope(kind: &str) -> String {
    format!("kind:{kind}")
}

/// The scope a target host's pauses are kept under (a `Retry-After` pauses every kind posting
/// to the host; see [`crate::limit::host_of`] for how a host is named).
pub fn host_scope(host: &str) -> String {
    format!("host:{host}")
}

/// The host a [`host_scope`] names (`None` for another scope).
pub fn scope_host(scope: &str) -> Option<&str> {
    scope.strip_prefix("host:")
}

/// Why a scope is paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PauseCause {
    /// A person, over the API or the CLI; lasts until resumed.
    Manual,
    /// The circuit breaker tripped: a cool-down, then probes.
    Breaker,
    /// The target answered 429 or 503 with `Retry-After`: nothing is sent before then.
    RetryAfter,
}

impl PauseCause {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseCause::Manual => "manual",
            PauseCause::Breaker => "breaker",
            PauseCause::RetryAfter => "retry_after",
        }
    }

    /// Every cause (an operator's resume clears them all).
    pub const ALL: [PauseCause; 3] = [
        PauseCause::Manual,
        PauseCause::Breaker,
        PauseCause::RetryAfter,
    ];

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for PauseCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stored pause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseRecord {
    /// What is paused ([`kind_scope`]).
    pub scope: String,
    pub cause: PauseCause,
    /// Why, in words (the operator's reason, the failures that tripped the breaker, the status
    /// that asked to wait).
    pub reason: String,
    /// The end of the pause: a manual pause has none; a breaker's is the end of its cool-down
    /// (then it probes); a `Retry-After`'s is when the target said to come back.
    pub until: Option<Timestamp>,
    /// The breaker's trips in a row, which lengthen each cool-down (0 for other causes).
    pub trips: u32,
    /// Who: the operator, or the process that tripped it.
    pub by: String,
    /// When it was written.
    pub since: Timestamp,
}

impl PauseRecord {
    /// Whether writing `self` over `stored` (the row of the same scope and cause) is a change:
    /// a manual pause always (the newest reason wins); a breaker trip only when it counts more
    /// trips (two processes tripping at once make one trip, not two); a `Retry-After` only
    /// when it ends later.
    pub fn replaces(&self, stored: Option<&PauseRecord>) -> bool {
        let Some(s) = stored else { return true };
        match self.cause {
            PauseCause::Manual => true,
            PauseCause::Breaker => self.trips > s.trips,
            PauseCause::RetryAfter => self.until > s.until,
        }
    }
}

/// What a scope may do at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Dispatch as usual.
    Open,
    /// Nothing starts: paused by hand, cooling down after a trip, or waiting out a
    /// `Retry-After`. `until` is `None` for a manual pause.
    Closed {
        cause: PauseCause,
        reason: String,
        until: Option<Timestamp>,
        by: String,
        since: Timestamp,
    },
    /// The breaker's cool-down is over: a few probes may run, one at a time; a success
    /// closes the breaker, a failure trips it again. `scope` is the breaker's: the kind's own
    /// or its target host's.
    Probing {
        trips: u32,
        reason: String,
        scope: String,
    },
}

impl Gate {
    /// A scope's gate from its rows at `now`. A manual pause wins; then a cool-down or a
    /// `Retry-After` still running (the later end first); then a breaker whose cool-down is
    /// over (probing). A `Retry-After` that has passed is no pause.
    pub fn of(rows: &[PauseRecord], now: Timestamp) -> Gate {
        let closed = |r: &PauseRecord| Gate::Closed {
            cause: r.cause,
            reason: r.reason.clone(),
            until: r.until,
            by: r.by.clone(),
            since: r.since,
        };
        if let Some(m) = rows.iter().find(|r| r.cause == PauseCause::Manual) {
            return closed(m);
        }
        let running = rows
            .iter()
            .filter(|r| r.until.is_some_and(|u| u > now))
            .max_by_key(|r| r.until);
        if let Some(r) = running {
            return closed(r);
        }
        match rows.iter().find(|r| r.cause == PauseCause::Breaker) {
            Some(b) => Gate::Probing {
                trips: b.trips,
                reason: b.reason.clone(),
                scope: b.scope.clone(),
            },
            None => Gate::Open,
        }
    }

    /// Its name where it is shown: `open`, `paused` or `probing`.
    pub fn state(&self) -> &'static str {
        match self {
            Gate::Open => "open",
            Gate::Closed { .. } => "paused",
            Gate::Probing { .. } => "probing",
        }
    }

    /// Whether attempts may start (freely or as probes).
    pub fn is_closed(&self) -> bool {
        matches!(self, Gate::Closed { .. })
    }
}

/// The cool-down after the `trips`-th trip in a row: `base` doubled for each earlier trip,
/// at most `max`.
pub fn cool_down(base: Duration, max: Duration, trips: u32) -> Duration {
    let doublings = trips.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << doublings).min(max.max(base))
}

/// An entry of a scope's pause history: every pause, trip and resume, by whom and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseEntry {
    pub scope: String,
    pub at: Timestamp,
    /// `pause` or `resume`.
    pub action: PauseAction,
    pub cause: PauseCause,
    pub reason: String,
    pub by: String,
    /// The end the pause was given (pauses only).
    pub until: Option<Timestamp>,
}

/// What a history entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseAction {
    /// A pause was written (by hand, a trip, a `Retry-After`).
    Pause,
    /// A pause was cleared (by hand, or the breaker closed after a probe succeeded).
    Resume,
}

impl PauseAction {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseAction::Pause => "pause",
            PauseAction::Resume => "resume",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pause" => Some(PauseAction::Pause),
            "resume" => Some(PauseAction::Resume),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cause: PauseCause, until: Option<i64>, trips: u32) -> PauseRecord {
        PauseRecord {
            scope: kind_scope("k"),
            cause,
            reason: cause.as_str().into(),
            until: until.map(|s| Timestamp::from_second(s).unwrap()),
            trips,
            by: "t".into(),
            since: Timestamp::from_second(0).unwrap(),
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn a_manual_pause_wins_over_everything() {
        let rows = [
            row(PauseCause::Breaker, Some(100), 2),
            row(PauseCause::Manual, None, 0),
        ];
        assert!(matches!(
            Gate::of(&rows, at(10)),
            Gate::Closed {
                cause: PauseCause::Manual,
                until: None,
                ..
            }
        ));
    }

    #[test]
    fn a_breaker_cools_down_then_probes() {
        let rows = [row(PauseCause::Breaker, Some(100), 3)];
        assert!(Gate::of(&rows, at(99)).is_closed());
        assert_eq!(
            Gate::of(&rows, at(100)),
            Gate::Probing {
                trips: 3,
                reason: "breaker".into(),
                scope: kind_scope("k"),
            }
        );
    }

    #[test]
    fn a_retry_after_closes_until_it_ends_then_is_nothing() {
        let rows = [row(PauseCause::RetryAfter, Some(50), 0)];
        assert!(Gate::of(&rows, at(49)).is_closed());
        assert_eq!(Gate::of(&rows, at(50)), Gate::Open);
        assert_eq!(Gate::of(&[], at(50)), Gate::Open);
    }

    #[test]
    fn a_retry_after_beyond_a_cool_down_keeps_the_probes_waiting() {
        let rows = [
            row(PauseCause::Breaker, Some(10), 1),
            row(PauseCause::RetryAfter, Some(60), 0),
        ];
        assert!(matches!(
            Gate::of(&rows, at(30)),
            Gate::Closed {
                cause: PauseCause::RetryAfter,
                ..
            }
        ));
        assert!(matches!(Gate::of(&rows, at(60)), Gate::Probing { .. }));
    }

    #[test]
    fn only_more_trips_or_a_later_end_replace_a_stored_pause() {
        let b2 = row(PauseCause::Breaker, Some(100), 2);
        assert!(!row(PauseCause::Breaker, Some(200), 2).replaces(Some(&b2)));
        assert!(row(PauseCause::Breaker, Some(200), 3).replaces(Some(&b2)));
        let r = row(PauseCause::RetryAfter, Some(100), 0);
        assert!(!row(PauseCause::RetryAfter, Some(90), 0).replaces(Some(&r)));
        assert!(row(PauseCause::RetryAfter, Some(110), 0).replaces(Some(&r)));
        assert!(row(PauseCause::Manual, None, 0).replaces(Some(&row(PauseCause::Manual, None, 0))));
        assert!(row(PauseCause::Breaker, Some(1), 1).replaces(None));
    }

    #[test]
    fn each_trip_doubles_the_cool_down_up_to_its_cap() {
        let s = Duration::from_secs;
        assert_eq!(cool_down(s(30), s(600), 1), s(30));
        assert_eq!(cool_down(s(30), s(600), 2), s(60));
        assert_eq!(cool_down(s(30), s(600), 5), s(480));
        assert_eq!(cool_down(s(30), s(600), 6), s(600));
        assert_eq!(cool_down(s(30), s(600), 60), s(600));
        assert_eq!(cool_down(s(30), s(10), 3), s(30));
    }
}
