//! `limits.concurrency = { key = "/tenant_id", max = 5, missing_key = "reject" }` on a kind: at
//! most `max` of its attempts run at once per value of the payload's key, counted from live
//! leases (see `backstop_core::limit`).

use backstop_core::limit::{ConcurrencyLimit, MissingKey};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    concurrency: Option<RawConcurrency>,
    /// Read only to say it is not built yet, rather than "unknown field".
    rate: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConcurrency {
    key: Option<String>,
    max: Option<i64>,
    missing_key: Option<String>,
}

/// Checks a kind's `limits`; an error is the field (under `limits.`) and what to fix.
pub(super) fn limits(raw: RawLimits) -> Result<Option<ConcurrencyLimit>, (&'static str, String)> {
    if raw.rate.is_some() {
        return Err((
            "rate",
            "rate limits per key are not available in this release: remove limits.rate (limits.concurrency is)".into(),
        ));
    }
    let Some(c) = raw.concurrency else {
        return Ok(None);
    };
    let key = match c.key {
        Some(k) if k.starts_with('/') => k,
        Some(k) => {
            return Err((
                "concurrency.key",
                format!("{k:?} is not a JSON pointer into the payload: write it as \"/tenant_id\""),
            ));
        }
        None => {
            return Err((
                "concurrency.key",
                "missing: name the payload's key to count by, e.g. key = \"/tenant_id\"".into(),
            ));
        }
    };
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
    Ok(Some(ConcurrencyLimit {
        key,
        max,
        missing_key,
    }))
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
                concat!(
                    kind!(),
                    "limits.rate = { key = \"/t\", limit = 100, period = \"1s\" }"
                ),
                "kinds.\"a\".limits.rate: rate limits per key are not available",
            ),
        ]);
    }
}
