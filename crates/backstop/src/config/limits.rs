//! `limits.concurrency = { key = "/tenant_id", max = 5, missing_key = "reject" }` on a kind: at
//! most `max` of its attempts run at once per value of the payload's key, counted from live
//! leases; `limits.rate = { key = "/tenant_id", limit = 100, period = "1s", burst = 10 }`: at
//! most `limit` starts per `period` per value, `burst` at once (see `backstop_core::limit`).

use backstop_core::duration::parse_duration;
use backstop_core::limit::{ConcurrencyLimit, MissingKey, RateLimit};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    concurrency: Option<RawConcurrency>,
    rate: Option<RawRate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRate {
    key: Option<String>,
    limit: Option<i64>,
    period: Option<String>,
    burst: Option<i64>,
    missing_key: Option<String>,
}

/// A kind's limits, checked.
pub(super) struct Limits {
    pub(super) concurrency: Option<ConcurrencyLimit>,
    pub(super) rate: Option<RateLimit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConcurrency {
    key: Option<String>,
    max: Option<i64>,
    missing_key: Option<String>,
}

/// Checks a kind's `limits`; an error is the field (under `limits.`) and what to fix.
pub(super) fn limits(raw: RawLimits) -> Result<Limits, (&'static str, String)> {
    Ok(Limits {
        concurrency: raw.concurrency.map(concurrency).transpose()?,
        rate: raw.rate.map(rate).transpose()?,
    })
}

/// A limit's `key`: a JSON pointer (`field` names it in errors).
fn pointer(key: Option<String>, field: &'static str) -> Result<String, (&'static str, String)> {
    match key {
        Some(k) if k.starts_with('/') => Ok(k),
        Some(k) => Err((
            field,
            format!("{k:?} is not a JSON pointer into the payload: write it as \"/tenant_id\""),
        )),
        None => Err((
            field,
            "missing: name the payload's key to count by, e.g. key = \"/tenant_id\"".into(),
        )),
    }
}

fn rate(r: RawRate) -> Result<RateLimit, (&'static str, String)> {
    let key = pointer(r.key, "rate.key")?;
    let limit = match r.limit {
        Some(n) if n >= 1 => u32::try_from(n).map_err(|_| {
            (
                "rate.limit",
                format!("{n} is too large: give at most {}", u32::MAX),
            )
        })?,
        Some(n) => {
            return Err((
                "rate.limit",
                format!("{n} would never let a task start: give at least 1"),
            ));
        }
        None => {
            return Err((
                "rate.limit",
                "missing: give the starts allowed per period per key, e.g. limit = 100".into(),
            ));
        }
    };
    let period = match r.period.as_deref() {
        None => std::time::Duration::from_secs(1),
        Some(p) => parse_duration(p).map_err(|e| ("rate.period", e.to_string()))?,
    };
    if period.is_zero() {
        return Err(("rate.period", "0s is no period: give e.g. \"1s\"".into()));
    }
    if period.as_micros() / u128::from(limit) == 0 {
        return Err((
            "rate.limit",
            format!(
                "{limit} per {} is more than one start per microsecond",
                r.period.unwrap_or_default()
            ),
        ));
    }
    let burst = match r.burst {
        None => 1,
        Some(b) if b >= 1 => u32::try_from(b).map_err(|_| {
            (
                "rate.burst",
                format!("{b} is too large: give at most {}", u32::MAX),
            )
        })?,
        Some(b) => {
            return Err((
                "rate.burst",
                format!("{b} would never let a task start: give at least 1"),
            ));
        }
    };
    let missing_key = match r.missing_key.as_deref() {
        None => MissingKey::default(),
        Some(s) => s.parse().map_err(|m| ("rate.missing_key", m))?,
    };
    Ok(RateLimit {
        key,
        limit,
        period,
        burst,
        missing_key,
    })
}

fn concurrency(c: RawConcurrency) -> Result<ConcurrencyLimit, (&'static str, String)> {
    let key = pointer(c.key, "concurrency.key")?;
    let max = match c.max {
        Some(n) if n >= 1 => u32::try_from(n).map_err(|_| {
            (
                "concurrency.max",
                format!("{n} is too large: give at most {}", u32::MAX),
            )
        })?,
        Some(n) => {
            return Err((
                "concurrency.max",
                format!("{n} would never let a task run: give at least 1"),
            ));
        }
        None => {
            return Err((
                "concurrency.max",
                "missing: give the most attempts running at once per key, e.g. max = 5".into(),
            ));
        }
    };
    let missing_key = match c.missing_key.as_deref() {
        None => MissingKey::default(),
        Some(s) => s.parse().map_err(|m| ("concurrency.missing_key", m))?,
    };
    Ok(ConcurrencyLimit {
        key,
        max,
        missing_key,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::assert_refused;
    use backstop_core::limit::MissingKey;

    #[test]
    fn a_kind_reads_its_concurrency_limit() {
        let c = crate::config::Config::parse(
            "[kinds.a]\nurl = \"http://x\"\nlimits.concurrency = { key = \"/tenant_id\", max = 5, missing_key = \"shared\" }",
            "t.toml",
        )
        .unwrap();
        let l = c.kinds[0].concurrency_limit.clone().expect("limit");
        assert_eq!(l.key, "/tenant_id");
        assert_eq!(l.max, 5);
        assert_eq!(l.missing_key, MissingKey::Shared);
    }

    macro_rules! kind {
        () => {
            "[kinds.a]\nurl = \"http://x\"\n"
        };
    }

    #[test]
    fn bad_limits_name_their_field() {
        assert_refused(&[
            (
                concat!(kind!(), "limits.concurrency = { key = \"/t\", max = 0 }"),
                "kinds.\"a\".limits.concurrency.max: 0 would never let a task run",
            ),
            (
                concat!(kind!(), "limits.concurrency = { key = \"/t\", max = -2 }"),
                "kinds.\"a\".limits.concurrency.max: -2 would never let a task run",
            ),
            (
                concat!(
                    kind!(),
                    "limits.concurrency = { key = \"tenant\", max = 2 }"
                ),
                "kinds.\"a\".limits.concurrency.key: \"tenant\" is not a JSON pointer",
            ),
            (
                concat!(kind!(), "limits.concurrency = { max = 2 }"),
                "kinds.\"a\".limits.concurrency.key: missing",
            ),
            (
                concat!(
                    kind!(),
                    "limits.concurrency = { key = \"/t\", max = 2, missing_key = \"drop\" }"
                ),
                "kinds.\"a\".limits.concurrency.missing_key: missing_key \"drop\" is not one of",
            ),
            (
                concat!(kind!(), "limits.rate = { key = \"/t\", limit = 0 }"),
                "kinds.\"a\".limits.rate.limit: 0 would never let a task start",
            ),
            (
                concat!(
                    kind!(),
                    "limits.rate = { key = \"/t\", limit = 10, burst = 0 }"
                ),
                "kinds.\"a\".limits.rate.burst: 0 would never let a task start",
            ),
            (
                concat!(
                    kind!(),
                    "limits.rate = { key = \"/t\", limit = 10, period = \"soon\" }"
                ),
                "kinds.\"a\".limits.rate.period:",
            ),
            (
                concat!(
                    kind!(),
                    "limits.rate = { key = \"/t\", limit = 10, period = \"0s\" }"
                ),
                "kinds.\"a\".limits.rate.period: 0s is no period",
            ),
            (
                concat!(kind!(), "limits.rate = { limit = 10 }"),
                "kinds.\"a\".limits.rate.key: missing",
            ),
            (
                concat!(kind!(), "limits.rate = { key = \"/t\" }"),
                "kinds.\"a\".limits.rate.limit: missing",
            ),
            (
                concat!(
                    kind!(),
                    "limits.rate = { key = \"/t\", limit = 10, per = \"1s\" }"
                ),
                "unknown field `per`",
            ),
        ]);
    }

    #[test]
    fn a_kind_reads_its_rate_limit_with_a_burst_of_one_by_default() {
        let c = crate::config::Config::parse(
            "[kinds.a]\nurl = \"http://x\"\nlimits.rate = { key = \"/tenant_id\", limit = 100, period = \"1m\" }\n[kinds.b]\nurl = \"http://x\"\nlimits.rate = { key = \"/t\", limit = 10, burst = 2 }",
            "t.toml",
        )
        .unwrap();
        let a = c.kinds.iter().find(|k| k.name == "a").unwrap();
        let l = a.rate_limit.clone().expect("limit");
        assert_eq!(
            (l.key.as_str(), l.limit, l.period, l.burst),
            ("/tenant_id", 100, std::time::Duration::from_secs(60), 1)
        );
        let b = c.kinds.iter().find(|k| k.name == "b").unwrap();
        let l = b.rate_limit.clone().expect("limit");
        assert_eq!((l.period, l.burst), (std::time::Duration::from_secs(1), 2));
    }
}
