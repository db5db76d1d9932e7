//! The HTTP push client: one POST per attempt, classified into an [`AttemptReport`].

use crate::standard::StandardWebhooks;
use backstop_core::classify::{
    ResponseFacts, TransportFailure, classify_response, classify_transport,
};
use backstop_core::{AttemptReport, Outcome};
use reqwest::Method;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use std::error::Error as _;
use std::fmt::Write as _;
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

// Header names checked once, at compile time, rather than parsed on every attempt.
const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const BACKSTOP_KIND: HeaderName = HeaderName::from_static("backstop-kind");
const BACKSTOP_KEY: HeaderName = HeaderName::from_static("backstop-key");
const BACKSTOP_ATTEMPT: HeaderName = HeaderName::from_static("backstop-attempt");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// How long establishing a connection may take, independent of a delivery's own timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an error response's body is read for the error text.
const BODY_READ_LIMIT: usize = 1024;
/// How many characters of that body end up in the error text.
const EXCERPT_CHARS: usize = 512;

/// Why the delivery client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// reqwest refused the configuration (for example, no TLS backend could start).
    #[error("could not build the webhook HTTP client")]
    Build(#[source] reqwest::Error),
}

/// Delivers HTTP push attempts. Cheap to clone; clones share one connection pool.
#[derive(Clone, Debug)]
pub struct DeliveryClient {
    http: reqwest::Client,
}

/// One attempt to push a task to its target.
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    /// The target URL, parsed once per kind; the payload is POSTed here.
    pub url: &'a reqwest::Url,
    /// Signs the request with Standard Webhooks when given.
    pub signer: Option<&'a StandardWebhooks>,
    /// The task id: `webhook-id` and `idempotency-key`.
    pub task_id: &'a str,
    /// The task's kind: `backstop-kind`.
    pub kind: &'a str,
    /// The task's business key: `backstop-key`.
    pub key: &'a str,
    /// The attempt number: `backstop-attempt`.
    pub attempt: u32,
    /// W3C trace context to propagate, if any.
    pub traceparent: Option<&'a str>,
    /// The payload, sent byte for byte.
    pub body: &'a [u8],
    /// Bound on the whole attempt, from connecting to reading the error text.
    pub timeout: Duration,
}

impl DeliveryClient {
    /// Builds the client: no redirects, no proxy, a `backstop/<version>` user agent.
    pub fn new() -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            // A redirect is classified as a permanent failure; following it could reach a
            // host the operator never configured.
            .redirect(reqwest::redirect::Policy::none())
            // Targets are usually internal services; an ambient proxy would misroute them.
            .no_proxy()
            .user_agent(concat!("backstop/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(ClientError::Build)?;
        Ok(DeliveryClient { http })
    }

    /// Performs one attempt and classifies it; `now` is the signing time and resolves
    /// HTTP-date `Retry-After` values. Never fails: every problem becomes an outcome.
    pub async fn deliver(&self, d: &Delivery<'_>, now: jiff::Timestamp) -> AttemptReport {
        let deadline = Instant::now() + d.timeout;
        let headers = match build_headers(d, now.as_second()) {
            Ok(h) => h,
            Err(e) => return Outcome::fail(e).into(),
        };
        // The request is built whole rather than through a builder, whose `headers` merges
        // every header into a map of its own (measured: about 2 % of push delivery's CPU).
        let mut request = reqwest::Request::new(Method::POST, d.url.clone());
        *request.headers_mut() = headers;
        *request.body_mut() = Some(d.body.to_vec().into());

        let response = match timeout_at(deadline, self.http.execute(request)).await {
            Err(_) => return classify_transport(TransportFailure::Timeout, "no response").into(),
            Ok(Err(e)) => return transport_report(e),
            Ok(Ok(r)) => r,
        };

        let status = response.status().as_u16();
        let retry_after = header_str(response.headers(), RETRY_AFTER.as_str());
        let outcome_header = header_str(response.headers(), "backstop-outcome");
        let excerpt = read_excerpt(response, deadline).await;
        let facts = ResponseFacts {
            status,
            retry_after: retry_after.as_deref(),
            outcome_header: outcome_header.as_deref(),
            body_excerpt: &excerpt,
        };
        AttemptReport {
            outcome: classify_response(&facts, now),
            http_status: Some(status),
            note: None,
        }
    }
}

/// The request headers of an attempt; an id or kind that cannot be a header is permanent.
fn build_headers(d: &Delivery<'_>, timestamp: i64) -> Result<HeaderMap, String> {
    let required = |name: &str, value: &str| {
        HeaderValue::from_str(value).map_err(|_| format!("{name} is not a valid header value"))
    };
    let task_id = required("the task id", d.task_id)?;
    // Sized for every header an attempt can carry, so the map never grows.
    let mut h = HeaderMap::with_capacity(12);
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(WEBHOOK_ID, task_id.clone());
    h.insert(WEBHOOK_TIMESTAMP, HeaderValue::from(timestamp));
    if let Some(signer) = d.signer {
        let sig = signer.sign(d.task_id, timestamp, d.body);
        h.insert(WEBHOOK_SIGNATURE, required("the signature", &sig)?);
    }
    h.insert(IDEMPOTENCY_KEY, task_id);
    h.insert(BACKSTOP_KIND, required("the kind", d.kind)?);
    h.insert(BACKSTOP_KEY, key_header(d.key));
    h.insert(BACKSTOP_ATTEMPT, HeaderValue::from(d.attempt));
    // Trace context is advisory: a malformed one is dropped rather than failing the task.
    if let Some(tp) = d.traceparent.and_then(|t| HeaderValue::from_str(t).ok()) {
        h.insert(TRACEPARENT, tp);
    }
    Ok(h)
}

/// The business key as a header, always percent-encoded: every byte that is not visible ASCII,
/// and `%` itself, becomes `%XX`. Receivers always decode, so a key holding `%` or a space is
/// never ambiguous; plain keys (`order-1001`) read the same either way.
fn key_header(key: &str) -> HeaderValue {
    let mut out = String::with_capacity(key.len() * 3);
    for b in key.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
    HeaderValue::from_str(&out).expect("percent-encoded text is visible ASCII")
}

/// A response header as text, when it is visible ASCII.
fn header_str(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Reads up to [`BODY_READ_LIMIT`] bytes before `deadline`; a slow or broken body keeps
/// whatever arrived, since the status alone already decides the outcome.
async fn read_excerpt(mut response: reqwest::Response, deadline: Instant) -> String {
    let mut buf = Vec::new();
    let _ = timeout_at(deadline, async {
        while buf.len() < BODY_READ_LIMIT {
            match response.chunk().await {
                Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                _ => break,
            }
        }
    })
    .await;
    buf.truncate(BODY_READ_LIMIT);
    String::from_utf8_lossy(&buf)
        .chars()
        .take(EXCERPT_CHARS)
        .collect()
}

/// Classifies a request that got no response.
fn transport_report(e: reqwest::Error) -> AttemptReport {
    // The URL may carry credentials, so it stays out of the error text.
    let e = e.without_url();
    let detail = error_chain(&e);
    // A request reqwest could not even build (bad URL, unsupported scheme) will never work.
    if e.is_builder() {
        return Outcome::fail(format!("invalid request: {detail}")).into();
    }
    let failure = if e.is_timeout() {
        TransportFailure::Timeout
    } else if e.is_connect() {
        TransportFailure::Connect
    } else {
        TransportFailure::Other
    };
    classify_transport(failure, &detail).into()
}

/// The error and its causes on one line.
fn error_chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let _ = write!(text, ": {s}");
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_read_the_same() {
        assert_eq!(key_header("order-42_eu.x"), "order-42_eu.x");
    }

    #[test]
    fn keys_are_always_percent_encoded() {
        assert_eq!(key_header("100% off eu"), "100%25%20off%20eu");
        assert_eq!(key_header("été\n%"), "%C3%A9t%C3%A9%0A%25");
    }
}
