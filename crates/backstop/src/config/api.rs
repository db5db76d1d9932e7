//! `[api]` and `[[api.tokens]]`: where the HTTP API listens, who may call it, and its bounds.

use super::{ConfigError, positive};
use backstop_core::duration::parse_duration;
use backstop_server::{ApiToken, ConnectionLimits, Limits};
use serde::Deserialize;
use std::net::SocketAddr;

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

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApi {
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

pub(super) fn api(
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

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::config::tests::assert_refused;
    use backstop_core::Target;
    use std::time::Duration;

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
    fn errors_name_the_file_the_api_key_and_the_problem() {
        assert_refused(&[
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
        ]);
    }
}
