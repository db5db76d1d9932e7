//! `[schedules.NAME]`: cron schedules whose every instant becomes a task of a configured kind.
//! The definition and its checks live in `backstop_core::schedule::spec`; here each error is
//! given its key (`schedules."nightly-report".cron`).

use super::{ConfigError, Invalid};
use backstop_core::KindConfig;
use backstop_core::schedule::{Schedule, ScheduleDef};
use std::collections::BTreeMap;

/// Checks every schedule against the configured kinds.
pub(super) fn schedules(
    raw: BTreeMap<String, ScheduleDef>,
    kinds: &[KindConfig],
    invalid: Invalid,
) -> Result<Vec<Schedule>, ConfigError> {
    raw.into_iter()
        .map(|(name, def)| {
            def.build(&name, |k| kinds.iter().any(|c| c.name == k))
                .map_err(|e| invalid(format!("schedules.{name:?}.{}", e.field), e.problem))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use backstop_core::schedule::{CatchUp, Overlap};

    const KIND: &str = "[kinds.\"report.render\"]\nurl = \"http://127.0.0.1:9/\"\n";

    #[test]
    fn a_schedule_is_read_with_every_field() {
        let text = format!(
            "{KIND}[schedules.nightly-report]\ncron = \"0 2 * * *\"\ntimezone = \"Asia/Shanghai\"\n\
             kind = \"report.render\"\npayload = {{ report = \"daily\" }}\noverlap = \"queue_one\"\n\
             catch_up = \"latest\"\ncatchup_window = \"1h\"\ncatchup_max = 10\njitter = \"30s\"\n\
             max_runtime = \"2h\"\nlate_after = \"5m\"\npaused = true\n"
        );
        let c = Config::parse(&text, "t.toml").unwrap();
        let [s] = c.schedules.as_slice() else {
            panic!("one schedule")
        };
        assert_eq!(s.name, "nightly-report");
        assert_eq!(s.times.zone_name(), "Asia/Shanghai");
        assert_eq!(s.overlap, Overlap::QueueOne);
        assert_eq!(s.catch_up, CatchUp::Latest);
        assert_eq!(s.catchup_max, 10);
        assert_eq!(s.max_runtime, Some(std::time::Duration::from_secs(7200)));
        assert_eq!(s.late_after, std::time::Duration::from_secs(300));
        assert!(s.paused);
        assert_eq!(s.payload["report"], "daily");
        let next = s
            .times
            .next_after("2026-12-01T00:00:00Z".parse().unwrap())
            .unwrap();
        assert_eq!(next.at.to_string(), "2026-12-01T18:00:00Z");
    }

    #[test]
    fn bad_schedules_name_the_schedule_the_field_and_what_was_expected() {
        let s = |body: &str| format!("{KIND}[schedules.nightly]\nkind = \"report.render\"\n{body}");
        assert_refused(&[
            (
                &s("cron = \"61 * * * *\""),
                "t.toml: schedules.\"nightly\".cron: \"61 * * * *\" is not a cron expression",
            ),
            (&s("cron = \"* * * *\""), "expected 5 fields"),
            (&s("cron = \"@sometimes\""), "unknown alias @sometimes"),
            (
                &s("cron = \"0 2 * * *\"\ntimezone = \"Europe/Berln\""),
                "schedules.\"nightly\".timezone: \"Europe/Berln\" is not an IANA time zone",
            ),
            (
                &format!("{KIND}[schedules.nightly]\ncron = \"0 2 * * *\"\nkind = \"report.send\""),
                "schedules.\"nightly\".kind: \"report.send\" is not a configured kind",
            ),
            (
                &s("cron = \"0 2 * * *\"\noverlap = \"never\""),
                "unknown variant `never`",
            ),
            (
                &s("cron = \"0 2 * * *\"\njitter = \"soon\""),
                "schedules.\"nightly\".jitter",
            ),
            (
                &s("cron = \"0 2 * * *\"\nlate_after = \"0s\""),
                "schedules.\"nightly\".late_after: must be more than 0",
            ),
            (
                &s("cron = \"0 2 * * *\"\nlate_afterr = \"1m\""),
                "unknown field `late_afterr`",
            ),
        ]);
    }
}
