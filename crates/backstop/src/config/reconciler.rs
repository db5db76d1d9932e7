//! `[reconciler]`: when a task counts as overdue or stalled, the audit batch, and the thresholds
//! of the alerts the reconciler raises.

use super::{ConfigError, Invalid};
use backstop_core::duration::parse_duration;
use backstop_engine::EngineOptions;
use backstop_engine::alerts::{AlertOptions, FailureRate};
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReconciler {
    overdue: Option<String>,
    stalled: Option<String>,
    audit_batch: Option<usize>,
    backlog_alert: Option<u64>,
    alert_window: Option<String>,
    failure_rate: Option<f64>,
    failure_min_attempts: Option<u64>,
}

/// Applies `[reconciler]` to the engine options; returns the alert window and failure rate.
pub(super) fn reconciler(
    r: &RawReconciler,
    engine: &mut EngineOptions,
    invalid: Invalid,
) -> Result<AlertOptions, ConfigError> {
    let dur = |key: &str, v: &str| {
        parse_duration(v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                invalid(
                    format!("reconciler.{key}"),
                    format!("{v:?} is not a positive duration such as \"30s\" or \"5m\""),
                )
            })
    };
    if let Some(v) = &r.overdue {
        engine.overdue_after = dur("overdue", v)?;
    }
    if let Some(v) = &r.stalled {
        engine.stalled_after = dur("stalled", v)?;
    }
    if let Some(n) = r.audit_batch {
        if n == 0 {
            return Err(invalid(
                "reconciler.audit_batch".into(),
                "must be at least 1".into(),
            ));
        }
        engine.audit_batch = n;
    }
    engine.backlog_alert = r.backlog_alert;
    let mut alerts = AlertOptions::default();
    if let Some(v) = &r.alert_window {
        alerts.window = dur("alert_window", v)?;
    }
    if let Some(t) = r.failure_rate {
        if !(0.0..=1.0).contains(&t) {
            return Err(invalid(
                "reconciler.failure_rate".into(),
                format!("{t} is not a share between 0 and 1"),
            ));
        }
        let min = alerts.failure_rate.map_or(20, |f| f.min_attempts);
        alerts.failure_rate = Some(FailureRate {
            threshold: t,
            min_attempts: min,
        });
    }
    if let (Some(n), Some(f)) = (r.failure_min_attempts, alerts.failure_rate.as_mut()) {
        f.min_attempts = n;
    }
    Ok(alerts)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::time::Duration;

    #[test]
    fn reconciler_thresholds_are_read_and_checked() {
        let c = Config::parse(
            "[reconciler]\noverdue = \"2m\"\nstalled = \"45s\"\nbacklog_alert = 5000\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.engine.overdue_after, Duration::from_secs(120));
        assert_eq!(c.engine.stalled_after, Duration::from_secs(45));
        assert_eq!(c.engine.backlog_alert, Some(5000));
        for (toml, key) in [
            (
                "[reconciler]\nfailure_rate = 2.0",
                "reconciler.failure_rate",
            ),
            ("[reconciler]\nstalled = \"0s\"", "reconciler.stalled"),
        ] {
            let e = Config::parse(toml, "t.toml").unwrap_err().to_string();
            assert!(e.contains(key), "{toml}: {e}");
        }
    }
}
