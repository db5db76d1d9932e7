//! How many tasks a dispatcher leases ahead of its free slots: what the kind starts in a short
//! horizon at its recent pace, between one round of its concurrency and [`MAX_ROUNDS`].
//!
//! Leasing ahead lets a freed slot start its next attempt at once instead of waiting for a
//! claim's commit, and lets claims run in bigger batches (fewer commits). But a task leased
//! here is one that another process cannot run, so the amount follows the pace: a kind whose
//! attempts take a second keeps one round ahead (each waits about one attempt), while a kind
//! pushing tens of thousands of tasks a second keeps up to sixteen rounds (a few
//! milliseconds of work). Measured with `backstop bench http` (push delivery, concurrency 32):
//! a fixed 4 rounds gave 26–30k tasks/s, 8 rounds 31–37k, 16 rounds 30–42k, and this pace
//! 34–39k with a quicker start than a fixed 16.

use std::time::{Duration, Instant};

/// The most rounds of the kind's concurrency leased ahead.
pub(crate) const MAX_ROUNDS: usize = 16;
/// A task leased ahead should start within about this long, at the recent pace.
pub(crate) const HORIZON: Duration = Duration::from_millis(20);
/// How often the pace is re-measured.
const WINDOW: Duration = Duration::from_millis(20);

/// The recent pace of attempts started by one dispatcher.
#[derive(Debug)]
pub(crate) struct Pace {
    window_start: Instant,
    started: usize,
    per_sec: f64,
}

impl Pace {
    pub(crate) fn new(now: Instant) -> Self {
        Pace {
            window_start: now,
            started: 0,
            per_sec: 0.0,
        }
    }

    /// Counts `n` attempts started at `now`.
    pub(crate) fn started(&mut self, n: usize, now: Instant) {
        self.started += n;
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= WINDOW {
            self.per_sec = self.started as f64 / elapsed.as_secs_f64();
            self.window_start = now;
            self.started = 0;
        }
    }

    /// Tasks to lease ahead of `concurrency` slots, at `now`. A window that has gone on
    /// without a measurement (the kind went quiet) counts what it has so far, so an idle kind
    /// drops back to one round.
    pub(crate) fn ahead(&self, concurrency: usize, now: Instant) -> usize {
        let concurrency = concurrency.max(1);
        let elapsed = now.saturating_duration_since(self.window_start);
        let per_sec = if elapsed > 2 * WINDOW {
            self.started as f64 / elapsed.as_secs_f64()
        } else {
            self.per_sec
        };
        let wanted = (per_sec * HORIZON.as_secs_f64()).ceil() as usize;
        wanted.clamp(concurrency, MAX_ROUNDS * concurrency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paced(per_window: usize, windows: u32) -> (Pace, Instant) {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        for w in 1..=windows {
            p.started(per_window, t0 + WINDOW * w);
        }
        (p, t0 + WINDOW * windows)
    }

    #[test]
    fn a_new_or_slow_kind_leases_one_round_ahead() {
        let t0 = Instant::now();
        assert_eq!(Pace::new(t0).ahead(32, t0), 32);
        // One attempt a window (50 a second): one within the horizon, under a round.
        let (p, now) = paced(1, 10);
        assert_eq!(p.ahead(32, now), 32);
    }

    #[test]
    fn a_fast_kind_leases_what_it_starts_within_the_horizon() {
        // 5,000 attempts a second: 100 within the 20 ms horizon.
        let per_window = (5_000.0 * WINDOW.as_secs_f64()).round() as usize;
        let (p, now) = paced(per_window, 4);
        assert_eq!(p.ahead(32, now), 100);
    }

    #[test]
    fn leasing_ahead_is_capped_at_sixteen_rounds() {
        // 100,000 a second: 2,000 within the horizon, capped at 16 × 32.
        let per_window = (100_000.0 * WINDOW.as_secs_f64()).round() as usize;
        let (p, now) = paced(per_window, 4);
        assert_eq!(p.ahead(32, now), MAX_ROUNDS * 32);
    }

    #[test]
    fn a_kind_that_went_quiet_drops_back_to_one_round() {
        let (p, now) = paced(2_000, 4);
        assert_eq!(p.ahead(32, now + Duration::from_secs(1)), 32);
    }
}
