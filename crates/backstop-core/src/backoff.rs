//! Retry policy: exponential backoff with a cap and jitter, or an explicit schedule.

use std::time::Duration;

/// How long to wait before the next attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum RetryPolicy {
    /// `base · 2^(n-1)`, capped at `cap`, then spread by ±`jitter` (a fraction) and capped again.
    Exponential {
        base: Duration,
        cap: Duration,
        jitter: f64,
    },
    /// The n-th retry waits `delays[n-1]`; past the end, the last delay repeats.
    Schedule(Vec<Duration>),
}

impl Default for RetryPolicy {
    /// Base 2 s, cap 5 min, ±20 % jitter, as DESIGN.md sets.
    fn default() -> Self {
        RetryPolicy::Exponential {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(300),
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// The delay before the next attempt after `failed_attempts` (≥ 1) attempts have failed.
    /// `unit` is a uniform random number in `[0, 1)`; the caller supplies it so this stays
    /// pure and testable.
    pub fn delay(&self, failed_attempts: u32, unit: f64) -> Duration {
        let n = failed_attempts.max(1);
        match self {
            RetryPolicy::Exponential { base, cap, jitter } => {
                let shift = (n - 1).min(62);
                let raw = base.as_secs_f64() * (1u64 << shift) as f64;
                let capped = raw.min(cap.as_secs_f64());
                let spread = 1.0 + jitter.clamp(0.0, 1.0) * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
                Duration::from_secs_f64((capped * spread).min(cap.as_secs_f64()).max(0.0))
            }
            RetryPolicy::Schedule(delays) => {
                let i = (n as usize - 1).min(delays.len().saturating_sub(1));
                delays.get(i).copied().unwrap_or_default()
            }
        }
    }

    /// The longest wait this policy allows; a target's `Retry-After` is bounded by it.
    pub fn cap(&self) -> Duration {
        match self {
            RetryPolicy::Exponential { cap, .. } => *cap,
            RetryPolicy::Schedule(delays) => delays.iter().copied().max().unwrap_or_default(),
        }
    }

    /// The delay to use when the target asked for `requested` (e.g. `Retry-After`):
    /// honoured, but never longer than the cap.
    pub fn bounded(&self, requested: Duration) -> Duration {
        requested.min(self.cap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(base_ms: u64, cap_ms: u64, jitter: f64) -> RetryPolicy {
        RetryPolicy::Exponential {
            base: Duration::from_millis(base_ms),
            cap: Duration::from_millis(cap_ms),
            jitter,
        }
    }

    #[test]
    fn doubles_until_the_cap() {
        let p = policy(2000, 300_000, 0.0);
        let got: Vec<u64> = (1..=10)
            .map(|n| p.delay(n, 0.5).as_millis() as u64)
            .collect();
        assert_eq!(
            got,
            [
                2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000, 300000, 300000
            ]
        );
    }

    #[test]
    fn schedule_repeats_its_last_delay() {
        let p = RetryPolicy::Schedule(vec![Duration::from_secs(5), Duration::from_secs(60)]);
        assert_eq!(p.delay(1, 0.3), Duration::from_secs(5));
        assert_eq!(p.delay(2, 0.3), Duration::from_secs(60));
        assert_eq!(p.delay(9, 0.3), Duration::from_secs(60));
        assert_eq!(p.cap(), Duration::from_secs(60));
    }

    #[test]
    fn retry_after_is_bounded_by_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(p.bounded(Duration::from_secs(7)), Duration::from_secs(7));
        assert_eq!(
            p.bounded(Duration::from_secs(3600)),
            Duration::from_secs(300)
        );
    }

    proptest! {
        #[test]
        fn every_delay_is_within_the_jitter_band_and_never_above_the_cap(
            base_ms in 1u64..60_000,
            cap_ms in 1u64..3_600_000,
            jitter in 0.0f64..=1.0,
            n in 1u32..200,
            unit in 0.0f64..1.0,
        ) {
            let p = policy(base_ms, cap_ms, jitter);
            let d = p.delay(n, unit).as_secs_f64();
            let cap = cap_ms as f64 / 1000.0;
            let nominal = (base_ms as f64 / 1000.0 * 2f64.powi((n - 1).min(62) as i32)).min(cap);
            prop_assert!(d <= cap + 1e-9, "delay {d} above cap {cap}");
            prop_assert!(d >= nominal * (1.0 - jitter) - 1e-6, "delay {d} below band of {nominal}");
            prop_assert!(d <= nominal * (1.0 + jitter) + 1e-6, "delay {d} above band of {nominal}");
        }
    }
}
