//! `[hosts."warehouse.internal"]`: a target host's limit and breaker, shared by every push kind
//! whose `url` names it, in every process (`backstop_core::limit::host`,
//! `backstop_core::breaker::HostBreaker`).
//!
//! ```toml
//! [hosts."warehouse.internal"]
//! concurrency = 8                                  # at most 8 attempts at once across its kinds
//! breaker = { failures = 20, cool_down = "30s" }   # their failures counted together
//! ```
//!
//! A host is named as in its kinds' URLs, in lower case, with `:port` when a URL gives a port
//! other than its scheme's default (`127.0.0.1:8080`).

use super::{ConfigError, Invalid};
use backstop_core::breaker::HostBreaker;
use backstop_core::kind::{KindConfig, Target};
use backstop_core::limit::{HostMax, host_of};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    concurrency: Option<i64>,
    breaker: Option<super::breaker::RawBreaker>,
}

/// Checks every host and gives each push kind on it the host's limit and breaker; an error
/// names the host's key and the field (`hosts."warehouse.internal".concurrency`).
pub(super) fn hosts(
    raw: BTreeMap<String, RawHost>,
    kinds: &mut [KindConfig],
    invalid: Invalid,
) -> Result<(), ConfigError> {
    let host_of_kind = |k: &KindConfig| match &k.target {
        Target::HttpPush { url, .. } => host_of(url),
        _ => None,
    };
    for (name, h) in raw {
        let key = format!("hosts.{name:?}");
        let max = match h.concurrency {
            Some(n) if n >= 1 => Some(u32::try_from(n).map_err(|_| {
                invalid(
                    format!("{key}.concurrency"),
                    format!("{n} is too large: give at most {}", u32::MAX),
                )
            })?),
            Some(n) => {
                return Err(invalid(
                    format!("{key}.concurrency"),
                    format!("{n} would never let an attempt start: give at least 1"),
                ));
            }
            None => None,
        };
        let breaker = match h.breaker {
            Some(b) => Some(
                super::breaker::breaker(b)
                    .map_err(|(f, m)| invalid(format!("{key}.breaker.{f}"), m))?,
            ),
            None => None,
        };
        if max.is_none() && breaker.is_none() {
            return Err(invalid(
                format!("{key}.concurrency"),
                "missing: give the most attempts at once across the host's kinds, or a breaker"
                    .into(),
            ));
        }
        let on_host: Vec<String> = kinds
            .iter()
            .filter(|k| host_of_kind(k).as_deref() == Some(name.as_str()))
            .map(|k| k.name.clone())
            .collect();
        if on_host.is_empty() {
            let mut known: Vec<String> = kinds.iter().filter_map(host_of_kind).collect();
            known.sort();
            known.dedup();
            let known = if known.is_empty() {
                "no push kind is configured".to_string()
            } else {
                format!("the push kinds' hosts are {}", known.join(", "))
            };
            return Err(invalid(
                key,
                format!(
                    "no push kind's url names this host ({known}); name it in lower case, with :port when not the scheme's default"
                ),
            ));
        }
        let limit = max.map(|max| HostMax {
            host: name.clone(),
            kinds: on_host.clone(),
            max,
        });
        let breaker = breaker.map(|config| HostBreaker {
            host: name.clone(),
            kinds: on_host.clone(),
            config,
        });
        for k in kinds.iter_mut().filter(|k| on_host.contains(&k.name)) {
            k.host_limit = limit.clone();
            k.host_breaker = breaker.clone();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const KINDS: &str = r#"
[kinds."stock.sync"]
url = "https://Warehouse.Internal/stock"
[kinds."order.ship"]
url = "https://warehouse.internal:443/ship"
[kinds."sms.send"]
url = "http://127.0.0.1:8080/sms"
"#;

    #[test]
    fn a_host_limit_is_shared_by_every_kind_on_the_host() {
        let c = Config::parse(
            &format!("{KINDS}\n[hosts.\"warehouse.internal\"]\nconcurrency = 8\n"),
            "t.toml",
        )
        .unwrap();
        let limit_of = |name: &str| {
            c.kinds
                .iter()
                .find(|k| k.name == name)
                .unwrap()
                .host_limit
                .clone()
        };
        let l = limit_of("stock.sync").expect("limited");
        assert_eq!(l.max, 8);
        assert_eq!(l.kinds, ["order.ship", "stock.sync"]);
        assert_eq!(limit_of("order.ship"), Some(l));
        assert_eq!(limit_of("sms.send"), None);
    }

    #[test]
    fn a_host_breaker_is_shared_by_every_kind_on_the_host() {
        let c = Config::parse(
            &format!(
                "{KINDS}\n[hosts.\"warehouse.internal\"]\nbreaker = {{ failures = 5, cool_down = \"10s\" }}\n"
            ),
            "t.toml",
        )
        .unwrap();
        let of = |name: &str| c.kinds.iter().find(|k| k.name == name).unwrap();
        let b = of("stock.sync").host_breaker.clone().expect("a breaker");
        assert_eq!(b.host, "warehouse.internal");
        assert_eq!(b.kinds, ["order.ship", "stock.sync"]);
        assert_eq!(b.config.failures, 5);
        assert_eq!(b.config.cool_down, std::time::Duration::from_secs(10));
        assert_eq!(of("order.ship").host_breaker, Some(b));
        // A breaker alone is no limit, and the kind's own breaker is untouched.
        assert_eq!(of("stock.sync").host_limit, None);
        assert_eq!(of("stock.sync").breaker, None);
        assert_eq!(of("sms.send").host_breaker, None);
    }

    #[test]
    fn a_bad_host_limit_names_the_field() {
        for (hosts, key, says) in [
            (
                "[hosts.\"warehouse.internal\"]\nconcurrency = 0",
                "hosts.\"warehouse.internal\".concurrency",
                "at least 1",
            ),
            (
                "[hosts.\"warehouse.internal\"]\n",
                "hosts.\"warehouse.internal\".concurrency",
                "missing",
            ),
            (
                "[hosts.\"warehouse.internal\"]\nbreaker = { probes = 0 }",
                "hosts.\"warehouse.internal\".breaker.probes",
                "at least 1",
            ),
            (
                "[hosts.\"127.0.0.1\"]\nconcurrency = 2",
                "hosts.\"127.0.0.1\"",
                "127.0.0.1:8080, warehouse.internal",
            ),
        ] {
            let Err(e) = Config::parse(&format!("{KINDS}\n{hosts}\n"), "t.toml") else {
                panic!("{hosts} was accepted");
            };
            let e = e.to_string();
            assert!(e.contains(key) && e.contains(says), "{e}");
        }
        let Err(e) = Config::parse(
            &format!("{KINDS}\n[hosts.\"warehouse.internal\"]\nconcurency = 2\n"),
            "t.toml",
        ) else {
            panic!("a misspelt field was accepted");
        };
        let e = e.to_string();
        assert!(e.contains("concurency"), "{e}");
    }
}
