//! Rate limits per key by GCRA (the generic cell rate algorithm): each key keeps one time, its
//! *theoretical arrival time* (TAT). A start at `now` conforms when `max(TAT, now)` is at most
//! `(burst - 1)` intervals ahead of `now`; it moves the TAT one interval (`period / limit`) on.
//! So a key starts `burst` tasks at once after a quiet spell and then one per interval, and any
//! window of length `w` holds at most `burst + w / interval` starts. One stored time per key,
//! nothing to refill: the TAT is all the state, which is what lets every process share it
//! through the store.

use std::time::Duration;

/// A kind's rate limit per key (`limits.rate = { key = "/tenant_id", limit = 100, period =
/// "1s", burst = 10 }`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// A JSON pointer into the payload naming the key.
    pub key: String,
    /// Starts allowed per `period`, per key (at least 1).
    pub limit: u32,
    /// The period `limit` counts over.
    pub period: Duration,
    /// Starts a quiet key may make at once (at least 1; 1 spaces every start evenly).
    pub burst: u32,
    /// What an enqueue does with a payload lacking the key.
    pub missing_key: super::MissingKey,
}

impl RateLimit {
    /// The rate itself, without its key.
    pub fn spec(&self) -> RateSpec {
        RateSpec {
            limit: self.limit,
            period: self.period,
            burst: self.burst,
        }
    }

    /// The algorithm's parameters.
    pub fn gcra(&self) -> Gcra {
        self.spec().gcra()
    }

    /// What a claim needs of it.
    pub fn per_key(&self) -> super::KeyRate {
        super::KeyRate {
            pointer: self.key.clone(),
            spec: self.spec(),
        }
    }

    /// Checks a payload at enqueue: its key, or why it cannot be used.
    pub fn check(&self, payload: &serde_json::Value) -> Result<String, super::BadKey> {
        super::check_key(payload, &self.key, self.missing_key, "limits.rate")
    }
}

/// A rate: `limit` starts per `period`, `burst` at once (a kind's, or one key's override).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSpec {
    /// Starts per period (at least 1).
    pub limit: u32,
    /// The period.
    pub period: Duration,
    /// Starts a quiet key may make at once (at least 1).
    pub burst: u32,
}

impl RateSpec {
    /// The algorithm's parameters.
    pub fn gcra(&self) -> Gcra {
        Gcra::new(self.limit, self.period, self.burst)
    }

    /// How it reads: `10 per 1s, burst 2`.
    pub fn describe(&self) -> String {
        format!(
            "{} per {}, burst {}",
            self.limit,
            crate::duration::format_duration(self.period),
            self.burst
        )
    }
}

/// GCRA's parameters, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    /// Time between two starts at the steady rate (`period / limit`, at least 1 µs).
    pub interval_us: i64,
    /// Starts a quiet key may make at once.
    pub burst: u32,
}

impl Gcra {
    /// `limit` starts per `period`, `burst` at once.
    pub fn new(limit: u32, period: Duration, burst: u32) -> Self {
        let period_us = i64::try_from(period.as_micros()).unwrap_or(i64::MAX);
        Gcra {
            interval_us: (period_us / i64::from(limit.max(1))).max(1),
            burst: burst.max(1),
        }
    }

    /// How far ahead of now a key's TAT may be for a start to conform.
    fn tolerance_us(&self) -> i64 {
        i64::from(self.burst - 1).saturating_mul(self.interval_us)
    }

    /// A start at `now_us` for a key whose TAT is `tat_us` (`i64::MIN` for a key never
    /// started): `Ok(new TAT)` when it conforms, `Err(when)` the earliest time it would.
    pub fn take(&self, tat_us: i64, now_us: i64) -> Result<i64, i64> {
        let tat = tat_us.max(now_us);
        let allowed = tat - self.tolerance_us();
        if allowed <= now_us {
            Ok(tat.saturating_add(self.interval_us))
        } else {
            Err(allowed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000;

    #[test]
    fn a_quiet_key_starts_its_burst_then_one_per_interval() {
        let g = Gcra::new(10, Duration::from_secs(1), 2);
        assert_eq!(g.interval_us, 100 * MS);
        let now = 1_000 * MS;
        let tat = g.take(i64::MIN, now).expect("first");
        let tat = g.take(tat, now).expect("second: the burst");
        assert_eq!(
            g.take(tat, now),
            Err(now + 100 * MS),
            "third: one interval on"
        );
        let tat = g.take(tat, now + 100 * MS).expect("after one interval");
        assert_eq!(g.take(tat, now + 100 * MS), Err(now + 200 * MS));
    }

    #[test]
    fn no_window_of_a_second_holds_more_than_burst_plus_limit_starts() {
        // Tries to start at every millisecond for 5 s: the starts in every closed 1 s window.
        let g = Gcra::new(10, Duration::from_secs(1), 2);
        let (mut tat, mut starts) = (i64::MIN, Vec::new());
        for ms in 0..5_000 {
            if let Ok(t) = g.take(tat, ms * MS) {
                tat = t;
                starts.push(ms * MS);
            }
        }
        let most = starts
            .iter()
            .map(|s| {
                starts
                    .iter()
                    .filter(|t| **t >= *s && **t <= s + 1_000 * MS)
                    .count()
            })
            .max()
            .unwrap();
        assert_eq!(most, 12);
        assert_eq!(starts.len(), 2 + 49, "the burst, then one per 100 ms");
    }

    #[test]
    fn a_burst_of_one_spaces_every_start() {
        let g = Gcra::new(100, Duration::from_secs(1), 1);
        let tat = g.take(i64::MIN, 0).unwrap();
        assert_eq!(g.take(tat, 0), Err(10 * MS));
        assert_eq!(g.take(tat, 10 * MS), Ok(20 * MS));
    }
}
