//! The timeline of a task: what happened to it, in order.

use crate::outcome::AttemptOutcome;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What kind of thing happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// The task entered the ledger.
    Created,
    /// One attempt, with its outcome.
    Attempt,
    /// A person or rule put a dead letter or compensated task back to pending.
    Retried,
    /// A person resolved a dead letter.
    Resolved,
    /// A pending task was canceled.
    Canceled,
    /// A pending task passed `expires_at` and was compensated without running.
    Expired,
    /// A completion arrived from a worker whose lease had been lost; it was rejected.
    StaleCompletion,
    /// Statement reconciliation put a `succeeded` task the provider has no record of back to
    /// pending; the actor names the run.
    Redriven,
    /// A source delivered the same `(kind, key)` and payload again (a broker redelivery);
    /// the event's `origin` says how it came.
    Redelivered,
    /// A resumable attempt stopped (a worker shutting down) with its cursor saved: the task
    /// went back to pending and the attempt was not counted.
    Suspended,
    /// A checkpoint arrived from an attempt whose lease had been lost; it was not saved.
    CheckpointRejected,
    /// The kind's rate limit for the task's key forbade a start when it was due: it was moved
    /// to when it may start, spending no attempt; the reason names the key and the time.
    RateLimited,
}

impl EventType {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Created => "created",
            EventType::Attempt => "attempt",
            EventType::Retried => "retried",
            EventType::Resolved => "resolved",
            EventType::Canceled => "canceled",
            EventType::Expired => "expired",
            EventType::StaleCompletion => "stale_completion",
            EventType::Redriven => "redriven",
            EventType::Redelivered => "redelivered",
            EventType::Suspended => "suspended",
            EventType::CheckpointRejected => "checkpoint_rejected",
            EventType::RateLimited => "rate_limited",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        use EventType::*;
        [
            Created,
            Attempt,
            Retried,
            Resolved,
            Canceled,
            Expired,
            StaleCompletion,
            Redriven,
            Redelivered,
            Suspended,
            CheckpointRejected,
            RateLimited,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

/// One entry on a task's timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    #[serde(with = "crate::wire_time")]
    pub at: Timestamp,
    /// Attempt number (attempts and stale completions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AttemptOutcome>,
    /// An attempt's error; on a succeeded attempt, its target's note (a JetStream retry
    /// deduplicated, or stored again past the stream's duplicate window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The worker (lease owner) that made the attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Who asked, for manual actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the task came from (on `created`) or how it came again (on `redelivered`): a
    /// JSON object, e.g. a broker's queue, message id and delivery metadata.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<serde_json::Value>,
}

impl Event {
    /// An event of `kind` at `at` with no other facts.
    pub fn new(kind: EventType, at: Timestamp) -> Self {
        Event {
            kind,
            at,
            attempt: None,
            outcome: None,
            error: None,
            http_status: None,
            duration_ms: None,
            worker: None,
            actor: None,
            reason: None,
            origin: None,
        }
    }

    /// An `origin` as a store reads it back from its stored text: the JSON value the text
    /// holds or, when the text is not JSON (a row written by hand, say), that text as a JSON
    /// string, so that one bad row never makes a timeline unreadable.
    pub fn origin_from_text(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_read_as_json_or_else_as_its_text() {
        assert_eq!(
            Event::origin_from_text(r#"{"queue":"orders","delivery_count":2}"#),
            serde_json::json!({"queue": "orders", "delivery_count": 2})
        );
        assert_eq!(
            Event::origin_from_text("not json {"),
            serde_json::Value::String("not json {".into())
        );
    }
}
