//! How a target's HTTP response becomes an [`Outcome`], per DESIGN.md: 2xx success; 410 or
//! `backstop-outcome: skip` compensate; 408, 425, 429 and 5xx transient; every other status
//! (redirects included, as none is followed) permanent.

use crate::outcome::Outcome;
use jiff::Timestamp;
use std::time::Duration;

/// What a target answered.
#[derive(Clone, Debug, Default)]
pub struct ResponseFacts<'a> {
    pub status: u16,
    /// The raw `Retry-After` header, if any.
    pub retry_after: Option<&'a str>,
    /// The `backstop-outcome` header, if any.
    pub outcome_header: Option<&'a str>,
    /// The start of the response body, for the error text.
    pub body_excerpt: &'a str,
}

/// Classifies a response; `now` resolves an HTTP-date `Retry-After`.
pub fn classify_response(r: &ResponseFacts<'_>, now: Timestamp) -> Outcome {
    let skip_header = r
        .outcome_header
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("skip"));
    let detail = |what: &str| {
        let body = r.body_excerpt.trim();
        if body.is_empty() {
            format!("HTTP {}: {what}", r.status)
        } else {
            format!("HTTP {}: {what}: {body}", r.status)
        }
    };
    match r.status {
        410 => Outcome::skip(detail("gone")),
        _ if skip_header => Outcome::skip(detail("target asked to skip")),
        200..=299 => Outcome::Success,
        408 | 425 | 429 | 500..=599 => Outcome::Retry {
            error: detail("transient"),
            after: r.retry_after.and_then(|v| parse_retry_after(v, now)),
        },
        300..=399 => Outcome::fail(detail("redirect not followed")),
        _ => Outcome::fail(detail("permanent")),
    }
}

/// Why a request got no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    Timeout,
    Connect,
    Other,
}

/// A request that got no response is always transient: the target may never have seen it,
/// and the idempotency key makes a repeat safe.
pub fn classify_transport(failure: TransportFailure, detail: &str) -> Outcome {
    let what = match failure {
        TransportFailure::Timeout => "timed out",
        TransportFailure::Connect => "connection failed",
        TransportFailure::Other => "request failed",
    };
    Outcome::retry(format!("{what}: {detail}"))
}

/// Reads `Retry-After` as delta-seconds or an HTTP-date.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(v)
        .ok()?;
    let d = at.duration_since(now);
    Some(Duration::try_from(d).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16) -> Outcome {
        classify_response(
            &ResponseFacts {
                status,
                ..Default::default()
            },
            Timestamp::UNIX_EPOCH,
        )
    }

    #[test]
    fn every_status_class_is_classified() {
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(classify(s), Outcome::Success, "{s}");
        }
        assert!(matches!(classify(410), Outcome::Skip { .. }));
        for s in [408, 425, 429, 500, 502, 503, 504, 599] {
            assert!(matches!(classify(s), Outcome::Retry { .. }), "{s}");
        }
        for s in [100, 301, 302, 307, 308, 400, 401, 403, 404, 409, 422] {
            assert!(matches!(classify(s), Outcome::Fail { .. }), "{s}");
        }
    }

    #[test]
    fn skip_header_compensates_even_a_2xx() {
        let o = classify_response(
            &ResponseFacts {
                status: 200,
                outcome_header: Some("Skip"),
                ..Default::default()
            },
            Timestamp::UNIX_EPOCH,
        );
        assert!(matches!(o, Outcome::Skip { .. }));
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 2026 00:01:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        let o = classify_response(
            &ResponseFacts {
                status: 429,
                retry_after: Some("12"),
                ..Default::default()
            },
            now,
        );
        assert_eq!(
            o,
            Outcome::Retry {
                error: "HTTP 429: transient".into(),
                after: Some(Duration::from_secs(12))
            }
        );
    }

    #[test]
    fn transport_failures_are_transient() {
        for f in [
            TransportFailure::Timeout,
            TransportFailure::Connect,
            TransportFailure::Other,
        ] {
            assert!(matches!(classify_transport(f, "x"), Outcome::Retry { .. }));
        }
    }
}
