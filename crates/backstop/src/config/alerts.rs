//! `[reconciler]` and `[[alerts]]`: the reconciler's thresholds, and where alerts go.

use super::ConfigError;
use backstop_core::duration::parse_duration;
use backstop_engine::EngineOptions;
use backstop_engine::alerts::{AlertName, AlertOptions, AlertSink, FailureRate};
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReconciler {
    overdue: Option<String>,
    stalled: Option<String>,
    audit_batch: Option<usize>,
    backlog_alert: Option<u64>,
    alert_window: Option<String>,
    failure_rate: Option<f64>,
    failure_min_attempts: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSink {
    name: Option<String>,
    url: String,
    format: Option<String>,
    events: Option<Vec<String>>,
    secret: Option<String>,
}

type Invalid<'a> = &'a dyn Fn(String, String) -> ConfigError;

/// Applies `[reconciler]` to the engine options; returns the alert window and failure rate.
pub(crate) fn reconciler(
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

/// Reads the `[[alerts]]` sinks into `alerts`.
pub(crate) fn sinks(
    raw: Vec<RawSink>,
    alerts: &mut AlertOptions,
    check_url: &dyn Fn(&str) -> Result<(), String>,
    invalid: Invalid,
) -> Result<(), ConfigError> {
    for (i, s) in raw.into_iter().enumerate() {
        let at = |f: &str| format!("alerts[{i}].{f}");
        let name = s.name.unwrap_or_else(|| format!("sink{}", i + 1));
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(invalid(
                at("name"),
                format!(
                    "{name:?}: use letters, digits, '-' and '_' (it names the sink's internal kind)"
                ),
            ));
        }
        if alerts.sinks.iter().any(|o| o.name == name) {
            return Err(invalid(at("name"), format!("{name:?} is used twice")));
        }
        check_url(&s.url).map_err(|m| invalid(at("url"), m))?;
        let format = s.format.as_deref().unwrap_or("generic").parse().map_err(
            |e: backstop_engine::alerts::UnknownFormat| invalid(at("format"), e.to_string()),
        )?;
        let events = s
            .events
            .unwrap_or_default()
            .iter()
            .map(|e| e.parse::<AlertName>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(at("events"), e.to_string()))?;
        if let Some(secret) = &s.secret {
            backstop_webhooks::StandardWebhooks::from_secret(secret)
                .map_err(|e| invalid(at("secret"), e.to_string()))?;
        }
        alerts.sinks.push(AlertSink {
            name,
            url: s.url,
            format,
            events,
            secret: s.secret,
        });
    }
    Ok(())
}
