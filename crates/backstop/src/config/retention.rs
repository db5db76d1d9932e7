//! `[retention]`: how long finished tasks are kept.

use super::{ConfigError, nonzero};
use backstop_core::duration::parse_duration;
use backstop_engine::RetentionPolicy;
use serde::Deserialize;
use std::time::Duration;

/// `[retention]`: how long finished tasks are kept. `failed` is read only to refuse it.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetention {
    succeeded: Option<String>,
    compensated: Option<String>,
    failed: Option<toml::Value>,
}

pub(super) fn retention(
    raw: &RawRetention,
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<RetentionPolicy, ConfigError> {
    if raw.failed.is_some() {
        return Err(invalid(
            "retention.failed".into(),
            "failed tasks are never pruned: they stay until retried or resolved (`backstop dead list`)".into(),
        ));
    }
    let keep = |key: &str, v: &Option<String>| -> Result<Option<Duration>, ConfigError> {
        let key = format!("retention.{key}");
        v.as_deref()
            .map(|v| {
                let d = parse_duration(v).map_err(|e| invalid(key.clone(), e.to_string()))?;
                nonzero(d).map_err(|m| invalid(key.clone(), m))
            })
            .transpose()
    };
    Ok(RetentionPolicy {
        succeeded: keep("succeeded", &raw.succeeded)?,
        compensated: keep("compensated", &raw.compensated)?,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use std::time::Duration;

    #[test]
    fn reads_retention() {
        let c = Config::parse(
            "[retention]\nsucceeded = \"30d\"\ncompensated = \"90d\"",
            "t.toml",
        )
        .unwrap();
        let day = Duration::from_secs(86_400);
        assert_eq!(c.engine.retention.succeeded, Some(30 * day));
        assert_eq!(c.engine.retention.compensated, Some(90 * day));
        let only = Config::parse("[retention]\nsucceeded = \"7d\"", "t.toml").unwrap();
        assert_eq!(only.engine.retention.compensated, None);
        assert!(
            Config::parse("", "t.toml")
                .unwrap()
                .engine
                .retention
                .keeps_everything()
        );
    }

    #[test]
    fn errors_name_the_file_the_retention_key_and_the_problem() {
        assert_refused(&[
            (
                "[retention]\nfailed = \"30d\"",
                "retention.failed: failed tasks are never pruned",
            ),
            ("[retention]\nsucceeded = \"0s\"", "retention.succeeded"),
            (
                "[retention]\ncompensated = \"soon\"",
                "retention.compensated",
            ),
            ("[retention]\npending = \"1d\"", "unknown field `pending`"),
        ]);
    }
}
