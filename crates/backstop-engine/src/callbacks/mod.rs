//! Inbound callbacks (`POST /v1/hooks/{source}` in the server): a configured source's
//! requests verified, recorded and turned into tasks, in the ledger's order:
//!
//! 1. the size limit (the HTTP layer reads at most [`CallbackSource::max_body`] bytes and
//!    reports a larger body with [`Engine::reject_oversized_callback`]);
//! 2. signature and timestamp, by the source's [`Verifier`](backstop_webhooks::verify::Verifier) (constant-time; any configured key
//!    may match during a rotation; a missing header is a rejection);
//! 3. the replay check and 4. the durable record and 5. the task: one store write
//!    ([`Store::record_callback`](backstop_core::Store::record_callback)) records the request
//!    and creates its task keyed by the provider's event id, unless that `(kind, key)` exists
//!    already, which makes the request a duplicate: acknowledged, nothing new created;
//! 6. the reply the provider expects, once that write is durable.
//!
//! Business processing never happens here: the task is delivered later by the dispatcher (or
//! leased by a worker), so a provider's request is answered in the time of one verification
//! and one (group) commit.

pub(crate) mod source;

pub use source::{CallbackSource, DEFAULT_MAX_CALLBACK_BODY};

use crate::context::Delivery;
use crate::engine::Engine;
use crate::enqueue::{self, EnqueueError, EnqueueRequest};
use backstop_core::{
    CallbackCheck, CallbackId, CallbackVerdict, RecordCallbackParams, StoreError, TaskId,
};
use backstop_webhooks::verify::{InboundRequest, Reply};
use http::{HeaderMap, StatusCode};
use jiff::Timestamp;

/// How much of a rejected request's body is kept: enough to see what was sent, not enough
/// for an unauthenticated caller to fill the ledger.
pub const REJECTED_BODY_EXCERPT: usize = 1024;

/// Longest header value kept in a record; longer ones are cut (with `…`).
const MAX_HEADER_VALUE: usize = 1024;

/// Headers never kept: credentials and connection details, none of which a provider's
/// signature covers.
const DROPPED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
];

/// One request as the HTTP layer received it.
#[derive(Debug, Clone, Copy)]
pub struct CallbackRequest<'a> {
    pub headers: &'a HeaderMap,
    /// The exact body bytes.
    pub body: &'a [u8],
    /// When the request arrived.
    pub received_at: Timestamp,
}

/// What became of a request, and what to answer.
#[derive(Debug, Clone)]
pub struct CallbackReceipt {
    /// The request's record.
    pub id: CallbackId,
    pub verdict: CallbackVerdict,
    /// The task created (accepted) or already holding the event (duplicate).
    pub task_id: Option<TaskId>,
    /// The provider's event id, when verified.
    pub event_id: Option<String>,
    /// Why it was rejected (or what differed in a duplicate).
    pub reason: Option<String>,
    /// The answer the provider expects: its success reply, or its failure reply.
    pub reply: Reply,
}

/// Why a request could not be handled at all (nothing was recorded).
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// No source of that name is configured.
    #[error("no inbound source {0:?} is configured")]
    UnknownSource(String),
    /// The ledger could not record it; the provider should send it again later.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Engine {
    /// The configured inbound source `name`.
    pub fn callback_source(&self, name: &str) -> Option<&CallbackSource> {
        self.parts.sources.get(name)
    }

    /// The names of the configured inbound sources, sorted.
    pub fn callback_sources(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.parts.sources.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Verifies, records and (when verified and new) turns into a task one request of
    /// `source`; returns when the record and the task are durable, with the reply to send.
    pub async fn accept_callback(
        &self,
        source: &str,
        request: CallbackRequest<'_>,
    ) -> Result<CallbackReceipt, CallbackError> {
        let src = self
            .callback_source(source)
            .ok_or_else(|| CallbackError::UnknownSource(source.to_string()))?;
        let verified = src.verifier.verify(&InboundRequest {
            headers: request.headers,
            body: request.body,
            now: request.received_at,
        });
        let (check, event_id, failure) = match verified {
            Err(rejection) => {
                let reply = src.verifier.rejection_reply(&rejection);
                (
                    CallbackCheck::Rejected(rejection.to_string()),
                    None,
                    Some(reply),
                )
            }
            Ok(v) => match self.callback_task(src, v.event_id.clone(), v.payload, &request) {
                Ok(task) => (CallbackCheck::Verified(task), v.event_id, None),
                Err(reason) => {
                    let reply = src.scheme().failure_reply(StatusCode::BAD_REQUEST, &reason);
                    (CallbackCheck::Rejected(reason), v.event_id, Some(reply))
                }
            },
        };
        let length = request.body.len() as u64;
        self.record(src, request, length, event_id, check, failure)
            .await
    }

    /// Records a request of `source` refused before it was read whole, its body over the
    /// source's limit: `excerpt` is what was read of it, `length` its announced or read size.
    pub async fn reject_oversized_callback(
        &self,
        source: &str,
        headers: &HeaderMap,
        excerpt: &[u8],
        length: u64,
        received_at: Timestamp,
    ) -> Result<CallbackReceipt, CallbackError> {
        let src = self
            .callback_source(source)
            .ok_or_else(|| CallbackError::UnknownSource(source.to_string()))?;
        let reason = format!(
            "the body is over the source's limit of {} bytes (sources.{}.max_body)",
            src.max_body, src.name
        );
        let reply = src
            .scheme()
            .failure_reply(StatusCode::PAYLOAD_TOO_LARGE, &reason);
        let request = CallbackRequest {
            headers,
            body: excerpt,
            received_at,
        };
        self.record(
            src,
            request,
            length,
            None,
            CallbackCheck::Rejected(reason),
            Some(reply),
        )
        .await
    }

    /// The task a verified callback becomes: keyed by the event id, its payload the verified
    /// payload (a JSON string when the body is text but not JSON). `Err` says why not.
    fn callback_task(
        &self,
        src: &CallbackSource,
        event_id: Option<String>,
        payload: Vec<u8>,
        request: &CallbackRequest<'_>,
    ) -> Result<backstop_core::NewTask, String> {
        let key = event_id.ok_or_else(|| {
            format!(
                "the request carries no event id for scheme {}; set `key` in [sources.{}] to \
                 say where it is",
                src.scheme(),
                src.name
            )
        })?;
        let payload = if serde_json::from_slice::<serde::de::IgnoredAny>(&payload).is_ok() {
            payload
        } else {
            let text = String::from_utf8(payload)
                .map_err(|_| "the verified body is neither JSON nor UTF-8 text".to_string())?;
            serde_json::to_vec(&text).expect("a string serializes")
        };
        enqueue::prepare(
            self.ctx.kinds.configs(),
            EnqueueRequest {
                kind: src.kind.clone(),
                key,
                payload,
                ..Default::default()
            },
            request.received_at,
            self.parts.opts.max_payload,
        )
        .map_err(|e: EnqueueError| format!("the callback cannot become a task: {e}"))
    }

    async fn record(
        &self,
        src: &CallbackSource,
        request: CallbackRequest<'_>,
        body_len: u64,
        event_id: Option<String>,
        check: CallbackCheck,
        failure: Option<Reply>,
    ) -> Result<CallbackReceipt, CallbackError> {
        let verified = matches!(check, CallbackCheck::Verified(_));
        let body = if verified {
            request.body.to_vec()
        } else {
            request.body[..request.body.len().min(REJECTED_BODY_EXCERPT)].to_vec()
        };
        let recorded = self
            .ctx
            .store
            .record_callback(RecordCallbackParams {
                id: CallbackId::new(),
                source: src.name.clone(),
                received_at: request.received_at,
                event_id: event_id.clone(),
                headers: kept_headers(request.headers),
                body,
                body_len,
                check,
            })
            .await?;
        metrics::counter!(
            crate::metrics::names::CALLBACKS,
            "source" => src.name.clone(),
            "verdict" => recorded.verdict.as_str()
        )
        .increment(1);
        if recorded.verdict == CallbackVerdict::Accepted {
            self.wake_kind(&src.kind);
        }
        let reply = match (recorded.verdict, failure) {
            (CallbackVerdict::Rejected, Some(reply)) => reply,
            (CallbackVerdict::Rejected, None) => src.scheme().failure_reply(
                StatusCode::BAD_REQUEST,
                recorded.reason.as_deref().unwrap_or("rejected"),
            ),
            _ => src.verifier.success_reply(),
        };
        Ok(CallbackReceipt {
            id: recorded.id,
            verdict: recorded.verdict,
            task_id: recorded.task_id,
            event_id,
            reason: recorded.reason,
            reply,
        })
    }

    /// Tells the kind's dispatcher (or waiting pull workers) that a task is due.
    fn wake_kind(&self, kind: &str) {
        let Some(k) = self.ctx.kinds.get(kind) else {
            return;
        };
        match k.delivery {
            Delivery::Dispatched => k.wake.notify_one(),
            Delivery::Pulled => self.ctx.kinds.pull_wake.notify_waiters(),
        }
        k.metrics.enqueued.increment(1);
    }
}

/// The headers worth keeping with a record, as a JSON array of `[name, value]` pairs in the
/// order received: all but credentials and connection details, values cut at 1 KiB.
pub fn kept_headers(headers: &HeaderMap) -> String {
    let pairs: Vec<[String; 2]> = headers
        .iter()
        .filter(|(name, _)| !DROPPED_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| {
            let text = String::from_utf8_lossy(value.as_bytes());
            let text = match text.char_indices().nth(MAX_HEADER_VALUE) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text.into_owned(),
            };
            [name.as_str().to_string(), text]
        })
        .collect();
    serde_json::to_string(&pairs).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_not_kept() {
        let mut h = HeaderMap::new();
        h.insert("webhook-id", "msg_1".parse().unwrap());
        h.insert("authorization", "Bearer secret".parse().unwrap());
        h.insert("cookie", "a=b".parse().unwrap());
        h.insert("x-long", "x".repeat(2000).parse().unwrap());
        let kept: Vec<[String; 2]> = serde_json::from_str(&kept_headers(&h)).unwrap();
        assert_eq!(kept[0], ["webhook-id".to_string(), "msg_1".to_string()]);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[1][1].chars().count(), MAX_HEADER_VALUE + 1);
    }
}
