//! `backstop.toml`: the kinds, their targets and policies, and engine tuning. A wrong file is
//! rejected at start with the file, the key and what is wrong.

use backstop_core::duration::parse_duration;
use backstop_core::validate::{self, DEFAULT_MAX_PAYLOAD};
use backstop_core::{KindConfig, RetryPolicy, Target};
use backstop_engine::EngineOptions;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The checked configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    /// `database` from the file.
    pub database: Option<String>,
    pub kinds: Vec<KindConfig>,
    pub engine: EngineOptions,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {error}")]
    Read { file: String, error: String },
    #[error("{file}: {error}")]
    Syntax { file: String, error: String },
    #[error("{file}: {key}: {error}")]
    Invalid {
        file: String,
        key: String,
        error: String,
    },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    database: Option<String>,
    #[serde(default)]
    engine: RawEngine,
    #[serde(default)]
    kinds: BTreeMap<String, RawKind>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    claim_batch: Option<usize>,
    complete_batch: Option<usize>,
    poll_interval: Option<String>,
    rescue_interval: Option<String>,
    grace: Option<String>,
    max_payload: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
    url: Option<String>,
    secret: Option<String>,
    max_attempts: Option<u32>,
    backoff: Option<RawBackoff>,
    timeout: Option<String>,
    concurrency: Option<usize>,
    expires_in: Option<String>,
    lease: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBackoff {
    base: Option<String>,
    cap: Option<String>,
    jitter: Option<f64>,
    schedule: Option<Vec<String>>,
}

impl Config {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            file: file.clone(),
            error: e.to_string(),
        })?;
        let mut c = Config::parse(&text, &file)?;
        c.source = Some(path.to_path_buf());
        Ok(c)
    }

    /// Parses TOML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            file: file.into(),
            error: e.to_string().trim().replace('\n', " "),
        })?;
        let invalid = |key: String, error: String| ConfigError::Invalid {
            file: file.into(),
            key,
            error,
        };
        let dur = |key: String, v: &str| parse_duration(v).map_err(|e| invalid(key, e.to_string()));

        let mut engine = EngineOptions::default();
        let e = &raw.engine;
        if let Some(n) = e.claim_batch {
            engine.claim_batch =
                positive(n).map_err(|m| invalid("engine.claim_batch".into(), m))?;
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

        let mut kinds = Vec::new();
        for (name, k) in raw.kinds {
            let at = |field: &str| format!("kinds.{name:?}.{field}");
            validate::kind(&name).map_err(|e| invalid(format!("kinds.{name:?}"), e.to_string()))?;
            let url = k.url.ok_or_else(|| {
                invalid(
                    at("url"),
                    "missing: every kind needs the URL its tasks are pushed to".into(),
                )
            })?;
            check_url(&url).map_err(|m| invalid(at("url"), m))?;
            if let Some(s) = &k.secret {
                backstop_webhooks::StandardWebhooks::from_secret(s)
                    .map_err(|e| invalid(at("secret"), e.to_string()))?;
            }
            let mut kc = KindConfig::new(
                name.clone(),
                Target::HttpPush {
                    url,
                    secret: k.secret,
                },
            );
            if let Some(n) = k.max_attempts {
                validate::max_attempts(n)
                    .map_err(|e| invalid(at("max_attempts"), e.to_string()))?;
                kc.max_attempts = n;
            }
            if let Some(b) = k.backoff {
                kc.retry = backoff(b, &|f| at(&format!("backoff.{f}")))
                    .map_err(|(key, m)| invalid(key, m))?;
            }
            if let Some(v) = &k.timeout {
                kc.timeout =
                    nonzero(dur(at("timeout"), v)?).map_err(|m| invalid(at("timeout"), m))?;
            }
            if let Some(n) = k.concurrency {
                kc.concurrency = positive(n).map_err(|m| invalid(at("concurrency"), m))?;
            }
            if let Some(v) = &k.expires_in {
                kc.expires_in = Some(
                    nonzero(dur(at("expires_in"), v)?).map_err(|m| invalid(at("expires_in"), m))?,
                );
            }
            if let Some(v) = &k.lease {
                kc.lease = nonzero(dur(at("lease"), v)?).map_err(|m| invalid(at("lease"), m))?;
            }
            kinds.push(kc);
        }
        Ok(Config {
            source: None,
            database: raw.database,
            kinds,
            engine,
        })
    }
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

fn positive(n: usize) -> Result<usize, String> {
    if n == 0 {
        Err("must be at least 1".into())
    } else {
        Ok(n)
    }
}

fn nonzero(d: Duration) -> Result<Duration, String> {
    if d.is_zero() {
        Err("must be greater than zero".into())
    } else {
        Ok(d)
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("{url:?} is not an http:// or https:// URL"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{url:?} has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn errors_name_the_file_the_key_and_the_problem() {
        let cases = [
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
                "[kinds.\"bad kind\"]\nurl = \"http://x\"",
                "may contain only",
            ),
        ];
        for (text, want) in cases {
            let err = Config::parse(text, "t.toml").unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
            assert!(err.starts_with("t.toml"), "{err}");
        }
    }
}
