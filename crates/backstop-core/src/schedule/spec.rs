//! A schedule as configured (`[schedules.NAME]` in backstop.toml, or the API's JSON), checked
//! into a [`Schedule`] the planner can use.

use super::cron::{CronError, CronTimes};
use super::plan::ROWS_PER_PASS;
use crate::duration::{BadDuration, parse_duration};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

/// What a tick does when the schedule's previous tick is still pending or running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// It is a `compensated` row with reason `overlap: <id> still running` (the default).
    #[default]
    Skip,
    /// It runs beside the previous one.
    Allow,
    /// One tick waits for the previous to finish; a further one while one waits is skipped.
    QueueOne,
}

impl Overlap {
    /// The name as configured (`skip`, `allow`, `queue_one`).
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
            Overlap::QueueOne => "queue_one",
        }
    }
}

/// What the planner does with instants that passed while no planner ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Every missed instant is a `compensated` row (`missed: …`) (the default).
    #[default]
    Skip,
    /// The most recent missed instant runs; the rest are compensated.
    Latest,
    /// Missed instants run in order, up to `catchup_max`; those beyond are compensated.
    All,
}

impl CatchUp {
    /// The name as configured (`skip`, `latest`, `all`).
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Skip => "skip",
            CatchUp::Latest => "latest",
            CatchUp::All => "all",
        }
    }
}

/// The schedule as written: every field a user may set, with serde defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDef {
    /// 5 fields, 6 with `seconds = true`, or an alias (`@hourly` …).
    pub cron: String,
    /// Whether `cron` has a leading seconds field.
    #[serde(default)]
    pub seconds: bool,
    /// IANA time zone the expression is read in; UTC when absent.
    #[serde(default)]
    pub timezone: Option<String>,
    /// The configured kind each tick is a task of.
    pub kind: String,
    /// A JSON object; each tick's payload is this with `scheduled_for` added.
    #[serde(default)]
    pub payload: Option<Value>,
    #[serde(default)]
    pub overlap: Overlap,
    #[serde(default)]
    pub catch_up: CatchUp,
    /// Missed instants older than this are compensated whatever `catch_up` says.
    #[serde(default)]
    pub catchup_window: Option<String>,
    /// At most this many missed instants run in one catch-up (`all`).
    #[serde(default)]
    pub catchup_max: Option<u32>,
    /// Each tick may start up to this long after its instant (the same delay for an instant
    /// whoever plans it), so many schedules on one minute do not start at once.
    #[serde(default)]
    pub jitter: Option<String>,
    /// A tick running longer than this raises `tick.overrun`.
    #[serde(default)]
    pub max_runtime: Option<String>,
    /// A tick not started this long after it was due raises `tick.late` (default 1 minute).
    #[serde(default)]
    pub late_after: Option<String>,
    /// Configured paused: no instant runs (each is a `compensated` row `paused`).
    #[serde(default)]
    pub paused: bool,
}

/// `catchup_max` when none is given.
pub const DEFAULT_CATCHUP_MAX: u32 = 100;

/// `late_after` when none is given: a tick not started a minute after it was due is late.
pub const DEFAULT_LATE_AFTER: Duration = Duration::from_secs(60);

/// A checked schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Its name, the first part of every tick key.
    pub name: String,
    /// When it fires.
    pub times: CronTimes,
    /// The kind of its ticks.
    pub kind: String,
    /// The payload object every tick carries.
    pub payload: Map<String, Value>,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub catchup_window: Option<Duration>,
    pub catchup_max: u32,
    pub jitter: Duration,
    /// A tick whose attempt runs longer than this overruns (`tick.overrun`); none when unset.
    pub max_runtime: Option<Duration>,
    /// A tick still not started this long after it was due is late (`tick.late`).
    pub late_after: Duration,
    /// Paused by its configuration (a pause by hand is kept in the store).
    pub paused: bool,
    /// The definition it was built from, as the API shows it.
    pub def: ScheduleDef,
}

/// A schedule that cannot be used: which one, which field, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schedule {schedule:?}: `{field}`: {problem}")]
pub struct ScheduleError {
    pub schedule: String,
    pub field: &'static str,
    pub problem: String,
}

impl ScheduleDef {
    /// Checks the definition of schedule `name`; `kind_known` says whether a kind is
    /// configured.
    pub fn build(
        self,
        name: &str,
        kind_known: impl Fn(&str) -> bool,
    ) -> Result<Schedule, ScheduleError> {
        let err = |field: &'static str, problem: String| ScheduleError {
            schedule: name.to_string(),
            field,
            problem,
        };
        check_name(name).map_err(|p| err("name", p))?;
        let zone = self.timezone.as_deref().unwrap_or("UTC");
        let times = CronTimes::parse(&self.cron, self.seconds, zone).map_err(|e| match e {
            CronError::TimeZone { .. } => err("timezone", e.to_string()),
            CronError::Expression { .. } => err("cron", e.to_string()),
        })?;
        if !kind_known(&self.kind) {
            return Err(err(
                "kind",
                format!(
                    "{:?} is not a configured kind (add [kinds.{:?}])",
                    self.kind, self.kind
                ),
            ));
        }
        let payload = match &self.payload {
            None => Map::new(),
            Some(Value::Object(m)) => {
                if m.contains_key("scheduled_for") {
                    return Err(err(
                        "payload",
                        "`scheduled_for` is set by backstop on each tick; remove it".into(),
                    ));
                }
                m.clone()
            }
            Some(_) => return Err(err("payload", "expected a table (a JSON object)".into())),
        };
        let duration = |field: &'static str, v: &Option<String>| {
            v.as_deref()
                .map(parse_duration)
                .transpose()
                .map_err(|e: BadDuration| err(field, e.to_string()))
        };
        let catchup_window = duration("catchup_window", &self.catchup_window)?;
        let jitter = duration("jitter", &self.jitter)?.unwrap_or_default();
        let max_runtime = duration("max_runtime", &self.max_runtime)?;
        if max_runtime == Some(Duration::ZERO) {
            return Err(err("max_runtime", "must be more than 0".into()));
        }
        let late_after = duration("late_after", &self.late_after)?.unwrap_or(DEFAULT_LATE_AFTER);
        if late_after == Duration::ZERO {
            return Err(err(
                "late_after",
                "must be more than 0 (a tick needs a moment to be claimed)".into(),
            ));
        }
        let catchup_max = self.catchup_max.unwrap_or(DEFAULT_CATCHUP_MAX);
        if catchup_max == 0 || catchup_max as usize > ROWS_PER_PASS {
            return Err(err(
                "catchup_max",
                format!("must be from 1 to {ROWS_PER_PASS} (use catch_up = \"skip\" to run none)"),
            ));
        }
        Ok(Schedule {
            name: name.to_string(),
            times,
            kind: self.kind.clone(),
            payload,
            overlap: self.overlap,
            catch_up: self.catch_up,
            catchup_window,
            catchup_max,
            jitter,
            max_runtime,
            late_after,
            paused: self.paused,
            def: self,
        })
    }
}

/// Schedule names: 1–100 of `A-Z a-z 0-9 . _ -`; never `@`, which ends the name in a key.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a schedule name: use 1 to 100 of A-Z a-z 0-9 . _ -"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(toml_like: serde_json::Value) -> ScheduleDef {
        serde_json::from_value(toml_like).unwrap()
    }

    fn build(d: ScheduleDef) -> Result<Schedule, ScheduleError> {
        d.build("nightly-report", |k| k == "report.render")
    }

    #[test]
    fn defaults() {
        let s = build(def(
            serde_json::json!({"cron": "0 2 * * *", "kind": "report.render"}),
        ))
        .unwrap();
        assert_eq!(s.times.zone_name(), "UTC");
        assert_eq!(s.overlap, Overlap::Skip);
        assert_eq!(s.catch_up, CatchUp::Skip);
        assert_eq!(s.catchup_max, DEFAULT_CATCHUP_MAX);
        assert_eq!(s.late_after, DEFAULT_LATE_AFTER);
        assert_eq!(s.max_runtime, None);
        assert!(s.payload.is_empty());
        assert!(!s.paused);
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases = [
            (
                serde_json::json!({"cron": "61 * * * *", "kind": "report.render"}),
                "`cron`",
            ),
            (
                serde_json::json!({"cron": "* * * *", "kind": "report.render"}),
                "`cron`",
            ),
            (
                serde_json::json!({"cron": "@often", "kind": "report.render"}),
                "`cron`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "timezone": "Asia/Shangai"}),
                "`timezone`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "nope"}),
                "`kind`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "payload": [1]}),
                "`payload`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "jitter": "5x"}),
                "`jitter`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "catchup_max": 0}),
                "`catchup_max`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "max_runtime": "0s"}),
                "`max_runtime`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "late_after": "later"}),
                "`late_after`",
            ),
            (
                serde_json::json!({"cron": "0 2 * * *", "kind": "report.render", "late_after": "0s"}),
                "`late_after`",
            ),
        ];
        for (d, field) in cases {
            let e = build(def(d.clone())).unwrap_err().to_string();
            assert!(e.starts_with("schedule \"nightly-report\": "), "{e}");
            assert!(e.contains(field), "{d}: {e}");
        }
        let e = def(serde_json::json!({"cron": "0 2 * * *", "kind": "report.render"}))
            .build("bad@name", |_| true)
            .unwrap_err();
        assert_eq!(e.field, "name");
    }

    #[test]
    fn names_are_the_configured_ones() {
        for o in [Overlap::Skip, Overlap::Allow, Overlap::QueueOne] {
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
        for c in [CatchUp::Skip, CatchUp::Latest, CatchUp::All] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = serde_json::from_value::<ScheduleDef>(
            serde_json::json!({"cron": "0 2 * * *", "kind": "k", "overlapp": "skip"}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overlapp"), "{e}");
        let e = serde_json::from_value::<ScheduleDef>(
            serde_json::json!({"cron": "0 2 * * *", "kind": "k", "late_afterr": "1m"}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("late_afterr") && e.contains("late_after"), "{e}");
        let e = serde_json::from_value::<ScheduleDef>(
            serde_json::json!({"cron": "0 2 * * *", "kind": "k", "overlap": "never"}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("skip") && e.contains("queue_one"), "{e}");
    }
}
