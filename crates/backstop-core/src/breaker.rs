//! The circuit breaker of a kind: when its target looks sick, stop sending for a while
//! instead of spending every task's attempts on it.
//!
//! A process counts its own attempts' outcomes ([`Breaker`]); when they cross the kind's
//! threshold it trips, and the trip is written to the ledger as a pause
//! ([`crate::pause`]) that every process obeys: a cool-down that doubles on each trip in a
//! row, then probes one at a time, until one succeeds (`probes` in a row close it) or one
//! fails (it trips again).
//!
//! Only transient failures count (5xx, 408, 425, 429, timeouts, refused connections): a 4xx
//! is the target answering, so it resets the count like a success.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// `breaker = { failures = 20, cool_down = "30s", … }` on a kind.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerConfig {
    /// Transient failures in a row that trip it (0: only the failure rate trips it).
    pub failures: u32,
    /// The first cool-down; each trip in a row doubles it.
    pub cool_down: Duration,
    /// The longest cool-down.
    pub max_cool_down: Duration,
    /// Probes that must succeed in a row to close it.
    pub probes: u32,
    /// Trip also on a failure rate over a window.
    pub rate: Option<FailureRate>,
}

impl BreakerConfig {
    /// A breaker tripping after `failures` in a row, cooling down for `cool_down` (at most
    /// 32 times that, or 30 minutes, whichever is less, on repeated trips), closed by one
    /// probe.
    pub fn new(failures: u32, cool_down: Duration) -> Self {
        BreakerConfig {
            failures,
            cool_down,
            max_cool_down: cool_down
                .saturating_mul(32)
                .min(Duration::from_secs(1800))
                .max(cool_down),
            probes: 1,
            rate: None,
        }
    }
}

/// `[hosts."warehouse.internal"] breaker = { … }`: one breaker shared by every push kind whose
/// `url` names the host. Their attempts are counted together, a trip pauses all of them (the
/// pause is the host's, scope `host:<host>`), and the probes are shared: one at a time across
/// the host's kinds, by the one process holding the host's probe lease.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBreaker {
    /// The host as the config names it ([`crate::limit::host_of`]).
    pub host: String,
    /// Every kind whose target is on the host, sorted.
    pub kinds: Vec<String>,
    pub config: BreakerConfig,
}

/// Trip when at least `ratio` of the attempts of the last `window` failed transiently, once
/// there were at least `min_attempts` of them.
#[derive(Clone, Debug, PartialEq)]
pub struct FailureRate {
    pub ratio: f64,
    pub window: Duration,
    pub min_attempts: u32,
}

/// What one attempt told the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The target answered (success, a permanent failure, a skip).
    Answered,
    /// A transient failure.
    Transient,
}

/// One process's count of a kind's recent outcomes.
#[derive(Debug, Default)]
pub struct Breaker {
    in_a_row: u32,
    recent: VecDeque<(Instant, bool)>,
    failing: u32,
}

impl Breaker {
    /// Counts one outcome at `now`; returns why the breaker trips, if it does (the count
    /// starts afresh after a trip).
    pub fn record(&mut self, cfg: &BreakerConfig, seen: Seen, now: Instant) -> Option<String> {
        let failed = seen == Seen::Transient;
        self.in_a_row = if failed { self.in_a_row + 1 } else { 0 };
        let mut trip = None;
        if cfg.failures > 0 && self.in_a_row >= cfg.failures {
            trip = Some(format!("{} transient failures in a row", self.in_a_row));
        }
        if let Some(rate) = &cfg.rate {
            self.recent.push_back((now, failed));
            self.failing += failed as u32;
            while let Some(&(at, f)) = self.recent.front() {
                if now.saturating_duration_since(at) <= rate.window {
                    break;
                }
                self.recent.pop_front();
                self.failing -= f as u32;
            }
            let n = self.recent.len() as u32;
            if trip.is_none()
                && n >= rate.min_attempts.max(1)
                && self.failing as f64 >= rate.ratio * n as f64
            {
                trip = Some(format!(
                    "{} of {} attempts failed transiently within {}",
                    self.failing,
                    n,
                    crate::duration::format_duration(rate.window)
                ));
            }
        }
        if trip.is_some() {
            self.reset();
        }
        trip
    }

    /// Forgets the counts (after a trip, or when the breaker closes).
    pub fn reset(&mut self) {
        self.in_a_row = 0;
        self.recent.clear();
        self.failing = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_in_a_row_trip_and_an_answer_resets_them() {
        let cfg = BreakerConfig::new(3, Duration::from_secs(1));
        let mut b = Breaker::default();
        let t = Instant::now();
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        assert_eq!(b.record(&cfg, Seen::Answered, t), None);
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        let why = b.record(&cfg, Seen::Transient, t).expect("trips");
        assert_eq!(why, "3 transient failures in a row");
        // Counting starts afresh after a trip.
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
    }

    #[test]
    fn a_failure_rate_over_the_window_trips_once_enough_attempts_were_seen() {
        let mut cfg = BreakerConfig::new(0, Duration::from_secs(1));
        cfg.rate = Some(FailureRate {
            ratio: 0.5,
            window: Duration::from_secs(10),
            min_attempts: 4,
        });
        let mut b = Breaker::default();
        let t = Instant::now();
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        assert_eq!(b.record(&cfg, Seen::Answered, t), None);
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        let why = b.record(&cfg, Seen::Answered, t).expect("2 of 4 is half");
        assert!(why.starts_with("2 of 4 attempts failed"), "{why}");
        // Outcomes older than the window no longer count.
        let later = t + Duration::from_secs(11);
        assert_eq!(b.record(&cfg, Seen::Transient, t), None);
        assert_eq!(b.record(&cfg, Seen::Answered, later), None);
        assert_eq!(b.record(&cfg, Seen::Answered, later), None);
        assert_eq!(b.record(&cfg, Seen::Answered, later), None);
    }

    #[test]
    fn repeated_trips_are_capped() {
        let c = BreakerConfig::new(5, Duration::from_secs(30));
        assert_eq!(c.max_cool_down, Duration::from_secs(960));
        let c = BreakerConfig::new(5, Duration::from_secs(120));
        assert_eq!(c.max_cool_down, Duration::from_secs(1800));
    }
}
