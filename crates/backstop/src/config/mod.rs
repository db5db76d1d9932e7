//! `backstop.toml`: the kinds, their targets and policies, engine tuning, and the state machines
//! of guarded transitions. A wrong file is rejected at start with the file, the key and what is
//! wrong.

mod alerts;
mod machines;
pub mod sources;

use alerts::{RawReconciler, RawSink};
use backstop_core::duration::parse_duration;
use backstop_core::validate::{self, DEFAULT_MAX_PAYLOAD};
use backstop_core::{KindConfig, Machine, RetryPolicy, Target};
use backstop_engine::alerts::AlertOptions;
use backstop_engine::{EngineOptions, RetentionPolicy};
use backstop_server::{ApiToken, ConnectionLimits, Limits};
use machines::RawMachine;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
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
    pub api: ApiConfig,
    /// `[[alerts]]` sinks, with the window and failure rate from `[reconciler]`.
    pub alerts: AlertOptions,
    /// `[machines.NAME]`: the state machines of guarded transitions.
    pub machines: Vec<Machine>,
    /// `[sources.NAME]`: inbound callback sources.
    pub sources: Vec<sources::SourceConfig>,
}

/// The HTTP API: where it listens, who may call it, and its bounds.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    pub listen: SocketAddr,
    pub tokens: Vec<ApiToken>,
    pub limits: Limits,
    /// Header deadline and connection cap of the listener.
    pub connections: ConnectionLimits,
}

/// Where the API listens unless configured otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7300";

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            listen: DEFAULT_LISTEN.parse().expect("a socket address"),
            tokens: Vec::new(),
            limits: Limits::default(),
            connections: ConnectionLimits::default(),
        }
    }
}

impl ApiConfig {
    /// Refuses to expose an unauthenticated API beyond loopback.
    pub fn check_exposure(&self, listen: SocketAddr) -> Result<(), String> {
        if !listen.ip().is_loopback() && self.tokens.is_empty() {
            return Err(format!(
                "the API would listen on {listen}, beyond loopback, without a token: add [[api.tokens]] (see `backstop token new`)"
            ));
        }
        Ok(())
    }
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
    #[serde(default)]
    api: RawApi,
    #[serde(default)]
    retention: RawRetention,
    #[serde(default)]
    reconciler: RawReconciler,
    #[serde(default)]
    alerts: Vec<RawSink>,
    #[serde(default)]
    machines: BTreeMap<String, RawMachine>,
    #[serde(default)]
    sources: BTreeMap<String, sources::RawSource>,
}

/// `[retention]`: how long finished tasks are kept. `failed` is read only to refuse it.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    succeeded: Option<String>,
    compensated: Option<String>,
    failed: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawApi {
    listen: Option<String>,
    #[serde(default)]
    tokens: Vec<RawToken>,
    max_body: Option<usize>,
    max_batch: Option<usize>,
    max_lease_tasks: Option<usize>,
    max_lease: Option<String>,
    max_wait: Option<String>,
    max_list: Option<usize>,
    header_read_timeout: Option<String>,
    body_timeout: Option<String>,
    max_connections: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    name: String,
    sha256: String,
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
    leader_lease: Option<String>,
    leader_renew: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
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
            error: syntax_error(text, &e),
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
        if let Some(v) = &e.leader_lease {
            engine.leader_lease = nonzero(dur("engine.leader_lease".into(), v)?)
                .map_err(|m| invalid("engine.leader_lease".into(), m))?;
        }
        if let Some(v) = &e.leader_renew {
            engine.leader_renew = nonzero(dur("engine.leader_renew".into(), v)?)
                .map_err(|m| invalid("engine.leader_renew".into(), m))?;
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

        engine.retention = retention(&raw.retention, &invalid)?;

        let mut kinds = Vec::new();
        for (name, k) in raw.kinds {
            let at = |field: &str| format!("kinds.{name:?}.{field}");
            validate::kind(&name).map_err(|e| invalid(format!("kinds.{name:?}"), e.to_string()))?;
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
                "pull" => {
                    for (field, given) in [("url", k.url.is_some()), ("secret", k.secret.is_some())]
                    {
                        if given {
                            return Err(invalid(
                                at(field),
                                "a pull kind has no push target: workers lease its tasks over the API".into(),
                            ));
                        }
                    }
                    Target::Pull
                }
                other => {
                    return Err(invalid(
                        at("target"),
                        format!(
                            "{other:?} is not a target: use \"push\" (the default) or \"pull\""
                        ),
                    ));
                }
            };
            let mut kc = KindConfig::new(name.clone(), target);
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
            kc.paused = k.paused.unwrap_or(false);
            kinds.push(kc);
        }
        let api = api(raw.api, &invalid)?;
        let mut alerts = alerts::reconciler(&raw.reconciler, &mut engine, &invalid)?;
        alerts::sinks(raw.alerts, &mut alerts, &check_url, &invalid)?;
        let machines = machines::machines(raw.machines, &invalid)?;
        let base = Path::new(file).parent().unwrap_or(Path::new(""));
        let sources = sources::sources(raw.sources, &kinds, base, &invalid)?;
        Ok(Config {
            source: None,
            database: raw.database,
            kinds,
            engine,
            api,
            alerts,
            machines,
            sources,
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

fn retention(
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

fn api(
    raw: RawApi,
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<ApiConfig, ConfigError> {
    let mut api = ApiConfig::default();
    if let Some(l) = &raw.listen {
        api.listen = l.parse().map_err(|_| {
            invalid(
                "api.listen".into(),
                format!("{l:?} is not an address and port such as \"127.0.0.1:7300\""),
            )
        })?;
    }
    for (i, t) in raw.tokens.into_iter().enumerate() {
        let key = format!("api.tokens[{i}]");
        if t.name.trim().is_empty() {
            return Err(invalid(format!("{key}.name"), "must not be empty".into()));
        }
        if api.tokens.iter().any(|o| o.name == t.name) {
            return Err(invalid(
                format!("{key}.name"),
                format!("{:?} is used by two tokens", t.name),
            ));
        }
        let sha256 = parse_sha256(&t.sha256).ok_or_else(|| {
            invalid(
                format!("{key}.sha256"),
                "must be 64 hex digits: the SHA-256 of the token (`backstop token new NAME` prints both)".into(),
            )
        })?;
        api.tokens.push(ApiToken {
            name: t.name,
            sha256,
        });
    }
    let l = &mut api.limits;
    let count = |key: &str, v: Option<usize>, into: &mut usize| -> Result<(), ConfigError> {
        if let Some(n) = v {
            *into = positive(n).map_err(|m| invalid(format!("api.{key}"), m))?;
        }
        Ok(())
    };
    count("max_body", raw.max_body, &mut l.max_body)?;
    count("max_batch", raw.max_batch, &mut l.max_batch)?;
    count(
        "max_lease_tasks",
        raw.max_lease_tasks,
        &mut l.max_lease_tasks,
    )?;
    count("max_list", raw.max_list, &mut l.max_list)?;
    let c = &mut api.connections;
    count(
        "max_connections",
        raw.max_connections,
        &mut c.max_connections,
    )?;
    for (key, v, into) in [
        ("max_lease", &raw.max_lease, &mut l.max_lease),
        ("max_wait", &raw.max_wait, &mut l.max_wait),
        ("body_timeout", &raw.body_timeout, &mut l.body_timeout),
        (
            "header_read_timeout",
            &raw.header_read_timeout,
            &mut c.header_read_timeout,
        ),
    ] {
        if let Some(v) = v {
            *into = parse_duration(v).map_err(|e| invalid(format!("api.{key}"), e.to_string()))?;
        }
    }
    for (key, d) in [
        ("body_timeout", l.body_timeout),
        ("header_read_timeout", c.header_read_timeout),
    ] {
        if d.is_zero() {
            return Err(invalid(
                format!("api.{key}"),
                "must be longer than 0s: a request needs time to arrive".into(),
            ));
        }
    }
    api.check_exposure(api.listen)
        .map_err(|m| invalid("api.listen".into(), m))?;
    Ok(api)
}

/// One line: where, the line itself, and what is wrong in words (serde says `expected u32`
/// for "a whole number").
fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    let mut what = e.message().trim().replace('\n', " ");
    for (rust, words) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected usize", "expected a whole number of 0 or more"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
    ] {
        what = what.replace(rust, words);
    }
    let Some(span) = e.span() else {
        return what;
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    let shown = text.lines().nth(line - 1).unwrap_or("").trim();
    format!("line {line}, column {column} (`{shown}`): {what}")
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
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
    fn reconciler_thresholds_and_alert_sinks_are_read_and_checked() {
        let c = Config::parse(
            "[reconciler]\noverdue = \"2m\"\nstalled = \"45s\"\nbacklog_alert = 5000\nalert_window = \"30s\"\nfailure_rate = 0.25\n\n[[alerts]]\nname = \"ops\"\nurl = \"https://hooks.slack.com/services/T/B/x\"\nformat = \"slack\"\nevents = [\"task.failed\", \"reconciler.stalled\"]\n\n[[alerts]]\nurl = \"http://127.0.0.1:9/alerts\"\n\n[kinds.\"sms.send\"]\nurl = \"http://127.0.0.1:9/sms\"\npaused = true\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.engine.overdue_after, Duration::from_secs(120));
        assert_eq!(c.engine.stalled_after, Duration::from_secs(45));
        assert_eq!(c.engine.backlog_alert, Some(5000));
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
    fn reads_pull_kinds_and_the_api_section() {
        let hash = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";
        let c = Config::parse(
            &format!(
                r#"
            [api]
            listen = "0.0.0.0:7400"
            max_batch = 10
            max_wait = "5s"
            header_read_timeout = "3s"
            body_timeout = "7s"
            max_connections = 64
            [[api.tokens]]
            name = "ops"
            sha256 = "{hash}"
            [kinds."report.render"]
            target = "pull"
            max_attempts = 3
            "#
            ),
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.kinds[0].target, Target::Pull);
        assert_eq!(c.api.listen.to_string(), "0.0.0.0:7400");
        assert_eq!(c.api.limits.max_batch, 10);
        assert_eq!(c.api.limits.max_wait, Duration::from_secs(5));
        assert_eq!(c.api.limits.body_timeout, Duration::from_secs(7));
        assert_eq!(
            c.api.connections.header_read_timeout,
            Duration::from_secs(3)
        );
        assert_eq!(c.api.connections.max_connections, 64);
        assert_eq!(c.api.tokens[0].name, "ops");
        // The hash of "password".
        assert_eq!(c.api.tokens[0].sha256, backstop_server::sha256(b"password"));
    }

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
                "[kinds.a]\nsecret = \"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nurl = \"http://x\"",
                "kinds.\"a\".secret: webhook secret does not start with `whsec_`",
            ),
            (
                "[[alerts]]\nurl = \"http://x\"\nsecret = \"raw-secret\"",
                "alerts[0].secret: webhook secret does not start with `whsec_`",
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
                "[kinds.a]\nurl = \"http://x\"\nmax_attempts = \"x\"",
                "t.toml: line 3, column 16 (`max_attempts = \"x\"`): invalid type: string \"x\", expected a whole number from 0 to 4294967295",
            ),
            (
                "[api]\nmax_list = -1",
                "t.toml: line 2, column 12 (`max_list = -1`): invalid value: integer `-1`, expected a whole number of 0 or more",
            ),
            (
                "[kinds.a]\ntarget = \"pull\"\nurl = \"http://x\"",
                "kinds.\"a\".url: a pull kind",
            ),
            ("[kinds.a]\ntarget = \"poll\"", "kinds.\"a\".target"),
            ("[api]\nlisten = \"7300\"", "api.listen"),
            ("[api]\nlisten = \"0.0.0.0:7300\"", "beyond loopback"),
            (
                "[[api.tokens]]\nname = \"ops\"\nsha256 = \"abc\"",
                "api.tokens[0].sha256",
            ),
            ("[api]\nmax_wait = \"forever\"", "api.max_wait"),
            (
                "[api]\nbody_timeout = \"0s\"",
                "api.body_timeout: must be longer",
            ),
            (
                "[api]\nheader_read_timeout = \"soon\"",
                "api.header_read_timeout",
            ),
            ("[api]\nmax_connections = 0", "api.max_connections"),
            (
                "[engine]\nleader_lease = \"2s\"\nleader_renew = \"2s\"",
                "engine.leader_renew: must be shorter than engine.leader_lease",
            ),
            ("[engine]\nleader_lease = \"0s\"", "engine.leader_lease"),
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
