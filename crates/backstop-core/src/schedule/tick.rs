//! A tick: the task one schedule creates for one instant, keyed so that whoever plans the
//! instant writes the same row.

use jiff::Timestamp;
use jiff::fmt::strtime;
use serde_json::{Map, Value};

/// The task key of schedule `name` at `at`: `<name>@<RFC 3339 UTC, seconds, Z>`, e.g.
/// `nightly-report@2026-12-01T18:00:00Z`. Sub-seconds are dropped (cron has none).
pub fn tick_key(name: &str, at: Timestamp) -> String {
    format!("{name}@{}", rfc3339_seconds(at))
}

/// `at` as RFC 3339 UTC with whole seconds and `Z`, the form tick keys use.
pub fn rfc3339_seconds(at: Timestamp) -> String {
    strtime::format("%Y-%m-%dT%H:%M:%SZ", at).expect("a timestamp formats")
}

/// The key of a manual run of `name` started at `at` (`trigger`): outside the instants'
/// key range, so it never takes a planned instant's row.
pub fn manual_key(name: &str, at: Timestamp) -> String {
    format!("{name}@manual:{}", at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

/// The instant a tick key names, when it is a planned tick of `name` (not a manual run).
pub fn instant_of(name: &str, key: &str) -> Option<Timestamp> {
    let rest = key.strip_prefix(name)?.strip_prefix('@')?;
    if rest.len() != 20 || !rest.ends_with('Z') {
        return None;
    }
    rest.parse().ok()
}

/// How a tick came to be, as its payload records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickCause {
    /// Planned for its instant.
    Planned {
        /// The instant's wall-clock time did not exist (a spring-forward gap).
        shifted: bool,
    },
    /// `backstop schedules trigger`: run now, by hand.
    Manual,
}

/// The tick's payload: the schedule's payload object with `scheduled_for` (and `shifted` or
/// `manual` when true) added. The same instant always gives the same bytes, so a second
/// planner's insert is an idempotent repeat, never a conflict.
pub fn tick_payload(
    base: &Map<String, Value>,
    scheduled_for: Timestamp,
    cause: TickCause,
) -> Vec<u8> {
    let mut p = base.clone();
    p.insert(
        "scheduled_for".into(),
        Value::String(rfc3339_seconds(scheduled_for)),
    );
    match cause {
        TickCause::Planned { shifted: true } => {
            p.insert("shifted".into(), Value::Bool(true));
        }
        TickCause::Planned { shifted: false } => {}
        TickCause::Manual => {
            p.insert("manual".into(), Value::Bool(true));
        }
    }
    serde_json::to_vec(&Value::Object(p)).expect("a JSON object serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_rfc3339_seconds_utc() {
        let at: Timestamp = "2026-12-01T18:00:00.789Z".parse().unwrap();
        assert_eq!(
            tick_key("nightly-report", at),
            "nightly-report@2026-12-01T18:00:00Z"
        );
        assert_eq!(
            instant_of("nightly-report", "nightly-report@2026-12-01T18:00:00Z"),
            Some("2026-12-01T18:00:00Z".parse().unwrap())
        );
        assert_eq!(
            instant_of("nightly", "nightly-report@2026-12-01T18:00:00Z"),
            None
        );
        let manual = manual_key("nightly-report", at);
        assert_eq!(manual, "nightly-report@manual:2026-12-01T18:00:00.789000Z");
        assert_eq!(instant_of("nightly-report", &manual), None);
    }

    #[test]
    fn the_payload_carries_the_instant() {
        let base: Map<String, Value> = serde_json::from_str(r#"{"report":"daily"}"#).unwrap();
        let at: Timestamp = "2026-12-01T18:00:00Z".parse().unwrap();
        let p = tick_payload(&base, at, TickCause::Planned { shifted: false });
        assert_eq!(
            String::from_utf8(p).unwrap(),
            r#"{"report":"daily","scheduled_for":"2026-12-01T18:00:00Z"}"#
        );
        let p = tick_payload(&base, at, TickCause::Planned { shifted: true });
        assert!(String::from_utf8(p).unwrap().contains(r#""shifted":true"#));
    }
}
