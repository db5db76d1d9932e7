//! `[[alerts]]`: where alerts go, in which format, for which events.

use super::{ConfigError, Invalid};
use backstop_engine::alerts::{AlertName, AlertOptions, AlertSink};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSink {
    name: Option<String>,
    url: String,
    format: Option<String>,
    events: Option<Vec<String>>,
    secret: Option<String>,
}

/// Reads the `[[alerts]]` sinks into `alerts`.
pub(super) fn sinks(
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

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use std::time::Duration;

    #[test]
    fn alert_sinks_are_read_and_checked() {
        let c = Config::parse(
            "[reconciler]\noverdue = \"2m\"\nstalled = \"45s\"\nbacklog_alert = 5000\nalert_window = \"30s\"\nfailure_rate = 0.25\n\n[[alerts]]\nname = \"ops\"\nurl = \"https://hooks.slack.com/services/T/B/x\"\nformat = \"slack\"\nevents = [\"task.failed\", \"reconciler.stalled\"]\n\n[[alerts]]\nurl = \"http://127.0.0.1:9/alerts\"\n\n[kinds.\"sms.send\"]\nurl = \"http://127.0.0.1:9/sms\"\npaused = true\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.alerts.window, Duration::from_secs(30));
        assert_eq!(c.alerts.failure_rate.unwrap().threshold, 0.25);
        assert_eq!(c.alerts.sinks.len(), 2);
        assert_eq!(c.alerts.sinks[0].events.len(), 2);
        assert_eq!(c.alerts.sinks[1].name, "sink2");
        assert!(c.kinds[0].paused);
        for (toml, key) in [
            ("[[alerts]]\nurl = \"ftp://x\"", "alerts[0].url"),
            (
                "[[alerts]]\nurl = \"http://x\"\nformat = \"teams\"",
                "alerts[0].format",
            ),
            (
                "[[alerts]]\nurl = \"http://x\"\nevents = [\"task.lost\"]",
                "alerts[0].events",
            ),
            (
                "[[alerts]]\nurl = \"http://x\"\nname = \"a b\"",
                "alerts[0].name",
            ),
        ] {
            let e = Config::parse(toml, "t.toml").unwrap_err().to_string();
            assert!(e.contains(key), "{toml}: {e}");
        }
    }

    #[test]
    fn errors_name_the_file_the_sink_and_the_field() {
        assert_refused(&[(
            "[[alerts]]\nurl = \"http://x\"\nsecret = \"raw-secret\"",
            "alerts[0].secret: webhook secret does not start with `whsec_`",
        )]);
    }
}
