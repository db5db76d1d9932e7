//! `[engine]`: batch sizes, intervals, the largest payload and the leader's lease timing.

use super::{ConfigError, Invalid, nonzero, positive};
use backstop_core::duration::parse_duration;
use backstop_core::validate::DEFAULT_MAX_PAYLOAD;
use backstop_engine::EngineOptions;
use serde::Deserialize;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngine {
    claim_batch: Option<usize>,
    complete_batch: Option<usize>,
    poll_interval: Option<String>,
    rescue_interval: Option<String>,
    grace: Option<String>,
    max_payload: Option<usize>,
    leader_lease: Option<String>,
    leader_renew: Option<String>,
    bridge_beat: Option<String>,
    bridge_down_alert: Option<String>,
    bridge_ack_delay: Option<String>,
    pause_watch: Option<String>,
}

/// Reads `[engine]` over the default options.
pub(super) fn engine(e: &RawEngine, invalid: Invalid) -> Result<EngineOptions, ConfigError> {
    let dur = |key: String, v: &str| parse_duration(v).map_err(|e| invalid(key, e.to_string()));
    let mut engine = EngineOptions::default();
    if let Some(n) = e.claim_batch {
        engine.claim_batch = positive(n).map_err(|m| invalid("engine.claim_batch".into(), m))?;
    }
    if let Some(n) = e.complete_batch {
        engine.complete_batch =
            positive(n).map_err(|m| invalid("engine.complete_batch".into(), m))?;
    }
    if let Some(v) = &e.poll_interval {
        engine.poll_interval = dur("engine.poll_interval".into(), v)?;
    }
    if let Some(v) = &e.rescue_interval {
        engine.rescue_interval = dur("engine.rescue_interval".into(), v)?;
    }
    if let Some(v) = &e.grace {
        engine.grace = dur("engine.grace".into(), v)?;
    }
    engine.max_payload = e.max_payload.unwrap_or(DEFAULT_MAX_PAYLOAD);
    if let Some(v) = &e.leader_lease {
        engine.leader_lease = nonzero(dur("engine.leader_lease".into(), v)?)
            .map_err(|m| invalid("engine.leader_lease".into(), m))?;
    }
    if let Some(v) = &e.leader_renew {
        engine.leader_renew = nonzero(dur("engine.leader_renew".into(), v)?)
            .map_err(|m| invalid("engine.leader_renew".into(), m))?;
    }
    if let Some(v) = &e.bridge_beat {
        engine.bridge_beat = nonzero(dur("engine.bridge_beat".into(), v)?)
            .map_err(|m| invalid("engine.bridge_beat".into(), m))?;
    }
    if let Some(v) = &e.bridge_down_alert {
        engine.bridge_down_alert = dur("engine.bridge_down_alert".into(), v)?;
    }
    if let Some(v) = &e.bridge_ack_delay {
        engine.bridge_ack_delay = dur("engine.bridge_ack_delay".into(), v)?;
    }
    if let Some(v) = &e.pause_watch {
        engine.pause_watch = nonzero(dur("engine.pause_watch".into(), v)?)
            .map_err(|m| invalid("engine.pause_watch".into(), m))?;
    }
    if engine.leader_renew >= engine.leader_lease {
        return Err(invalid(
            "engine.leader_renew".into(),
            format!(
                "must be shorter than engine.leader_lease ({:?}): the leader renews its lease before it runs out",
                engine.leader_lease
            ),
        ));
    }

    Ok(engine)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use std::time::Duration;

    #[test]
    fn reads_leadership_timing() {
        let c = Config::parse(
            "[engine]\nleader_lease = \"10s\"\nleader_renew = \"2s\"",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.engine.leader_lease, Duration::from_secs(10));
        assert_eq!(c.engine.leader_renew, Duration::from_secs(2));
        let d = Config::parse("", "t.toml").unwrap();
        assert!(d.engine.leader_renew < d.engine.leader_lease);
    }

    #[test]
    fn errors_name_the_file_the_engine_key_and_the_problem() {
        assert_refused(&[
            (
                "[engine]\nleader_lease = \"2s\"\nleader_renew = \"2s\"",
                "engine.leader_renew: must be shorter than engine.leader_lease",
            ),
            ("[engine]\nleader_lease = \"0s\"", "engine.leader_lease"),
        ]);
    }
}
