//! `[kinds.NAME]`: each kind's target (push or pull), its retry policy, timeout and bounds.

use super::broker_target::{BrokerFields, broker_target};
use super::{ConfigError, Invalid, check_url, nonzero, positive};
use backstop_core::duration::parse_duration;
use backstop_core::validate;
use backstop_core::{KindConfig, RetryPolicy, Target};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKind {
    target: Option<String>,
    url: Option<String>,
    secret: Option<String>,
    max_attempts: Option<u32>,
    backoff: Option<RawBackoff>,
    timeout: Option<String>,
    concurrency: Option<usize>,
    expires_in: Option<String>,
    lease: Option<String>,
    paused: Option<bool>,
    ordering: Option<super::ordering::RawOrdering>,
    breaker: Option<super::breaker::RawBreaker>,
    pause_on_retry_after: Option<bool>,
    requires: Option<super::requires::RawRequires>,
    limits: Option<super::limits::RawLimits>,
    broker: Option<String>,
    exchange: Option<String>,
    routing_key: Option<String>,
    list: Option<String>,
    stream: Option<String>,
    topic: Option<String>,
    subject: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBackoff {
    base: Option<String>,
    cap: Option<String>,
    jitter: Option<f64>,
    schedule: Option<Vec<String>>,
}

/// Checks every kind; an error names the kind's key and the field (`kinds."sms.send".url`).
pub(super) fn kinds(
    raw: BTreeMap<String, RawKind>,
    invalid: Invalid,
) -> Result<Vec<KindConfig>, ConfigError> {
    let dur = |key: String, v: &str| parse_duration(v).map_err(|e| invalid(key, e.to_string()));
    let mut kinds = Vec::new();
    for (name, k) in raw {
        let at = |field: &str| format!("kinds.{name:?}.{field}");
        validate::kind(&name).map_err(|e| invalid(format!("kinds.{name:?}"), e.to_string()))?;
        let broker = BrokerFields {
            broker: k.broker.clone(),
            exchange: k.exchange.clone(),
            routing_key: k.routing_key.clone(),
            list: k.list.clone(),
            stream: k.stream.clone(),
            topic: k.topic.clone(),
            subject: k.subject.clone(),
        };
        let target = match k.target.as_deref().unwrap_or("push") {
            "push" => {
                let url = k.url.ok_or_else(|| {
                    invalid(
                        at("url"),
                        "missing: a push kind needs the URL its tasks are pushed to (or set target = \"pull\")".into(),
                    )
                })?;
                check_url(&url).map_err(|m| invalid(at("url"), m))?;
                if let Some(s) = &k.secret {
                    backstop_webhooks::StandardWebhooks::from_secret(s)
                        .map_err(|e| invalid(at("secret"), e.to_string()))?;
                }
                Target::HttpPush {
                    url,
                    secret: k.secret,
                }
            }
            "rabbitmq" | "redis" | "kafka" | "nats" => {
                for (field, given) in [("url", k.url.is_some()), ("secret", k.secret.is_some())] {
                    if given {
                        return Err(invalid(
                            at(field),
                            "a broker target publishes to its broker: give broker and its destination, not url or secret".into(),
                        ));
                    }
                }
                broker_target(k.target.as_deref().unwrap_or_default(), &broker, &at)
                    .map_err(|(key, m)| invalid(key, m))?
            }
            "pull" => {
                for (field, given) in [("url", k.url.is_some()), ("secret", k.secret.is_some())] {
                    if given {
                        return Err(invalid(
                            at(field),
                            "a pull kind has no push target: workers lease its tasks over the API"
                                .into(),
                        ));
                    }
                }
                Target::Pull
            }
            other => {
                return Err(invalid(
                    at("target"),
                    format!(
                        "{other:?} is not a target: use \"push\" (the default), \"pull\", \"rabbitmq\", \"redis\", \"kafka\" or \"nats\""
                    ),
                ));
            }
        };
        if !matches!(
            k.target.as_deref(),
            Some("rabbitmq" | "redis" | "kafka" | "nats")
        ) && let Some(field) = broker.given()
        {
            return Err(invalid(
                at(field),
                "only a broker target (target = \"rabbitmq\", \"redis\", \"kafka\" or \"nats\") has a broker destination".into(),
            ));
        }
        let mut kc = KindConfig::new(name.clone(), target);
        if let Some(n) = k.max_attempts {
            validate::max_attempts(n).map_err(|e| invalid(at("max_attempts"), e.to_string()))?;
            kc.max_attempts = n;
        }
        if let Some(b) = k.backoff {
            kc.retry =
                backoff(b, &|f| at(&format!("backoff.{f}"))).map_err(|(key, m)| invalid(key, m))?;
        }
        if let Some(v) = &k.timeout {
            kc.timeout = nonzero(dur(at("timeout"), v)?).map_err(|m| invalid(at("timeout"), m))?;
        }
        if let Some(n) = k.concurrency {
            kc.concurrency = positive(n).map_err(|m| invalid(at("concurrency"), m))?;
        }
        if let Some(v) = &k.expires_in {
            kc.expires_in =
                Some(nonzero(dur(at("expires_in"), v)?).map_err(|m| invalid(at("expires_in"), m))?);
        }
        if let Some(v) = &k.lease {
            kc.lease = nonzero(dur(at("lease"), v)?).map_err(|m| invalid(at("lease"), m))?;
        }
        kc.paused = k.paused.unwrap_or(false);
        if let Some(o) = k.ordering {
            kc.ordering = Some(
                super::ordering::ordering(o)
                    .map_err(|(f, m)| invalid(at(&format!("ordering.{f}")), m))?,
            );
        }
        if let Some(b) = k.breaker {
            if matches!(kc.target, Target::Pull) {
                return Err(invalid(
                    at("breaker"),
                    "a pull kind's attempts run in its workers, which back off on their own: a breaker applies to push, broker and in-process kinds".into(),
                ));
            }
            kc.breaker = Some(
                super::breaker::breaker(b)
                    .map_err(|(f, m)| invalid(at(&format!("breaker.{f}")), m))?,
            );
        }
        if let Some(p) = k.pause_on_retry_after {
            kc.pause_on_retry_after = p;
        }
        if let Some(r) = k.requires {
            kc.requires = Some(
                super::requires::requires(r)
                    .map_err(|(f, m)| invalid(at(&format!("requires.{f}")), m))?,
            );
        }
        if let Some(l) = k.limits {
            let l = super::limits::limits(l)
                .map_err(|(f, m)| invalid(at(&format!("limits.{f}")), m))?;
            kc.concurrency_limit = l.concurrency;
            kc.rate_limit = l.rate;
        }
        kinds.push(kc);
    }
    Ok(kinds)
}

fn backoff(b: RawBackoff, at: &dyn Fn(&str) -> String) -> Result<RetryPolicy, (String, String)> {
    let d = |f: &str, v: &str| parse_duration(v).map_err(|e| (at(f), e.to_string()));
    if let Some(schedule) = b.schedule {
        if b.base.is_some() || b.cap.is_some() || b.jitter.is_some() {
            return Err((
                at("schedule"),
                "give either schedule or base/cap/jitter, not both".into(),
            ));
        }
        if schedule.is_empty() {
            return Err((at("schedule"), "must list at least one delay".into()));
        }
        let delays = schedule
            .iter()
            .map(|v| d("schedule", v))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(RetryPolicy::Schedule(delays));
    }
    let RetryPolicy::Exponential {
        base: dbase,
        cap: dcap,
        jitter: djitter,
    } = RetryPolicy::default()
    else {
        unreachable!("the default policy is exponential")
    };
    let base = b
        .base
        .as_deref()
        .map(|v| d("base", v))
        .transpose()?
        .unwrap_or(dbase);
    let cap = b
        .cap
        .as_deref()
        .map(|v| d("cap", v))
        .transpose()?
        .unwrap_or(dcap);
    let jitter = b.jitter.unwrap_or(djitter);
    if base.is_zero() {
        return Err((at("base"), "must be greater than zero".into()));
    }
    if cap < base {
        return Err((at("cap"), "must not be smaller than base".into()));
    }
    if !(0.0..=1.0).contains(&jitter) {
        return Err((
            at("jitter"),
            format!("must be between 0 and 1, got {jitter}"),
        ));
    }
    Ok(RetryPolicy::Exponential { base, cap, jitter })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use backstop_core::RetryPolicy;
    use std::time::Duration;

    #[test]
    fn reads_a_full_kind() {
        let c = Config::parse(
            r#"
            [kinds."sms.send"]
            url = "http://127.0.0.1:8080/hooks/sms"
            secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            max_attempts = 5
            backoff = { base = "1s", cap = "1m", jitter = 0.1 }
            timeout = "10s"
            concurrency = 4
            expires_in = "48h"
            [kinds.refund]
            url = "https://pay.internal/refund"
            backoff = { schedule = ["5s", "1m", "10m"] }
            "#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.kinds.len(), 2);
        let r = &c.kinds[0];
        assert_eq!(r.name, "refund");
        assert_eq!(
            r.retry,
            RetryPolicy::Schedule(vec![
                Duration::from_secs(5),
                Duration::from_secs(60),
                Duration::from_secs(600)
            ])
        );
        let s = &c.kinds[1];
        assert_eq!(s.name, "sms.send");
        assert_eq!(s.max_attempts, 5);
        assert_eq!(s.concurrency, 4);
        assert_eq!(s.expires_in, Some(Duration::from_secs(48 * 3600)));
    }

    #[test]
    fn errors_name_the_file_the_kind_and_the_problem() {
        assert_refused(&[
            (
                r#"[kinds."sms.send"]
url = "http://x/"
timeout = "10x""#,
                r#"t.toml: kinds."sms.send".timeout: invalid duration "10x""#,
            ),
            ("[kinds.a]\nurl = \"ftp://x\"", "kinds.\"a\".url"),
            (
                "[kinds.a]\nsecret = \"whsec_\"\nurl = \"http://x\"",
                "kinds.\"a\".secret",
            ),
            (
                "[kinds.a]\nsecret = \"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nurl = \"http://x\"",
                "kinds.\"a\".secret: webhook secret does not start with `whsec_`",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nmax_attempts = 0",
                "kinds.\"a\".max_attempts",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nbackoff = { base = \"2s\", jitter = 3.0 }",
                "kinds.\"a\".backoff.jitter",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nconcurency = 3",
                "unknown field `concurency`",
            ),
            ("[kinds.a]\n", "kinds.\"a\".url: missing"),
            (
                "[kinds.a]\ntarget = \"pull\"\nurl = \"http://x\"",
                "kinds.\"a\".url: a pull kind",
            ),
            ("[kinds.a]\ntarget = \"poll\"", "kinds.\"a\".target"),
            (
                "[kinds.\"bad kind\"]\nurl = \"http://x\"",
                "may contain only",
            ),
        ]);
    }
}
