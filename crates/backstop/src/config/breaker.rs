//! `breaker = { failures = 20, cool_down = "30s" }` on a kind: after that many transient
//! failures in a row (or a failure rate over a window) its dispatch pauses for a cool-down
//! that doubles on each trip in a row, then probes (see `backstop_core::breaker`).

use backstop_core::breaker::{BreakerConfig, FailureRate};
use backstop_core::duration::parse_duration;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBreaker {
    failures: Option<u32>,
    cool_down: Option<String>,
    max_cool_down: Option<String>,
    probes: Option<u32>,
    failure_rate: Option<f64>,
    window: Option<String>,
    min_attempts: Option<u32>,
}

/// Checks a kind's `breaker`; an error is the field (under `breaker.`) and what to fix.
pub(super) fn breaker(raw: RawBreaker) -> Result<BreakerConfig, (&'static str, String)> {
    let dur = |f: &'static str, v: &str| -> Result<Duration, (&'static str, String)> {
        let d = parse_duration(v).map_err(|e| (f, e.to_string()))?;
        if d.is_zero() {
            return Err((f, "must be longer than zero".into()));
        }
        Ok(d)
    };
    let cool_down = match &raw.cool_down {
        Some(v) => dur("cool_down", v)?,
        None => Duration::from_secs(30),
    };
    let rate = match (raw.failure_rate, &raw.window, raw.min_attempts) {
        (None, None, None) => None,
        (Some(ratio), window, min) => {
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err((
                    "failure_rate",
                    format!("{ratio} is not a share of attempts: give one in (0, 1], e.g. 0.5"),
                ));
            }
            Some(FailureRate {
                ratio,
                window: match window {
                    Some(w) => dur("window", w)?,
                    None => Duration::from_secs(60),
                },
                min_attempts: min.unwrap_or(20).max(1),
            })
        }
        (None, _, _) => {
            return Err((
                "failure_rate",
                "window and min_attempts belong to a failure rate: give failure_rate too (e.g. 0.5)"
                    .into(),
            ));
        }
    };
    let failures = match (raw.failures, &rate) {
        (Some(0), None) => {
            return Err((
                "failures",
                "0 with no failure_rate would never trip: give a count of failures in a row (e.g. 20)".into(),
            ));
        }
        (Some(n), _) => n,
        (None, Some(_)) => 0,
        (None, None) => 20,
    };
    let mut cfg = BreakerConfig::new(failures, cool_down);
    cfg.rate = rate;
    if let Some(v) = &raw.max_cool_down {
        let max = dur("max_cool_down", v)?;
        if max < cool_down {
            return Err((
                "max_cool_down",
                format!(
                    "{v} is shorter than cool_down: the longest cool-down cannot be shorter than the first"
                ),
            ));
        }
        cfg.max_cool_down = max;
    }
    if let Some(p) = raw.probes {
        if p == 0 {
            return Err((
                "probes",
                "must be at least 1: a probe that succeeds is what closes the breaker".into(),
            ));
        }
        cfg.probes = p;
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use crate::config::tests::assert_refused;
    use std::time::Duration;

    #[test]
    fn a_kind_reads_its_breaker() {
        let c = crate::config::Config::parse(
            "[kinds.a]\nurl = \"http://x\"\nbreaker = { failures = 5, cool_down = \"10s\", probes = 2, failure_rate = 0.5, window = \"30s\", min_attempts = 10 }",
            "t.toml",
        )
        .unwrap();
        let b = c.kinds[0].breaker.clone().expect("breaker");
        assert_eq!(b.failures, 5);
        assert_eq!(b.cool_down, Duration::from_secs(10));
        assert_eq!(b.max_cool_down, Duration::from_secs(320));
        assert_eq!(b.probes, 2);
        let r = b.rate.expect("rate");
        assert_eq!(
            (r.ratio, r.window, r.min_attempts),
            (0.5, Duration::from_secs(30), 10)
        );
        assert!(c.kinds[0].pause_on_retry_after);
        let c = crate::config::Config::parse(
            "[kinds.a]\nurl = \"http://x\"\npause_on_retry_after = false",
            "t.toml",
        )
        .unwrap();
        assert!(c.kinds[0].breaker.is_none());
        assert!(!c.kinds[0].pause_on_retry_after);
    }

    #[test]
    fn bad_breakers_name_their_field() {
        assert_refused(&[
            (
                "[kinds.a]\nurl = \"http://x\"\nbreaker = { failures = 0 }",
                "kinds.\"a\".breaker.failures: 0 with no failure_rate would never trip",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nbreaker = { cool_down = \"0s\" }",
                "kinds.\"a\".breaker.cool_down: must be longer than zero",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nbreaker = { probes = 0 }",
                "kinds.\"a\".breaker.probes: must be at least 1",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nbreaker = { failure_rate = 1.5 }",
                "kinds.\"a\".breaker.failure_rate: 1.5 is not a share of attempts",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nbreaker = { window = \"1m\" }",
                "kinds.\"a\".breaker.failure_rate: window and min_attempts belong to a failure rate",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nbreaker = { cool_down = \"1m\", max_cool_down = \"30s\" }",
                "kinds.\"a\".breaker.max_cool_down: 30s is shorter than cool_down",
            ),
            (
                "[kinds.a]\ntarget = \"pull\"\nbreaker = { failures = 3 }",
                "kinds.\"a\".breaker: a pull kind's attempts run in its workers",
            ),
        ]);
    }
}
