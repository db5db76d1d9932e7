//! Inbound callbacks as the ledger records them: every request a source receives, with its
//! verdict, and for an accepted one the task it became.
//!
//! A verified callback is recorded and its task created in one transaction
//! ([`Callbacks::record_callback`](crate::store::Callbacks::record_callback)), so that the
//! provider is told "received" only once both are durable, and a resend of the same event
//! (the same task `(kind, key)`) is recognised in that same transaction and creates nothing.

use crate::task::{NewTask, TaskId};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A recorded request's identity: a UUIDv7, so ids sort by receive time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallbackId(pub uuid::Uuid);

impl CallbackId {
    /// A new time-ordered id.
    pub fn new() -> Self {
        CallbackId(uuid::Uuid::now_v7())
    }
}

impl Default for CallbackId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for CallbackId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for CallbackId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s).map(CallbackId)
    }
}

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallbackVerdict {
    /// Verified, recorded, and its task created.
    Accepted,
    /// Verified, but its event was already accepted: acknowledged, nothing new created.
    Duplicate,
    /// Refused (signature, timestamp, size, format); carries no task.
    Rejected,
}

impl CallbackVerdict {
    /// Every verdict.
    pub const ALL: [CallbackVerdict; 3] = [
        CallbackVerdict::Accepted,
        CallbackVerdict::Duplicate,
        CallbackVerdict::Rejected,
    ];

    /// The storage and wire name: `accepted`, `duplicate`, `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallbackVerdict::Accepted => "accepted",
            CallbackVerdict::Duplicate => "duplicate",
            CallbackVerdict::Rejected => "rejected",
        }
    }
}

impl fmt::Display for CallbackVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict name that is not one of [`CallbackVerdict::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown callback verdict {0:?}: expected accepted, duplicate or rejected")]
pub struct UnknownVerdict(pub String);

impl FromStr for CallbackVerdict {
    type Err = UnknownVerdict;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CallbackVerdict::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVerdict(s.to_string()))
    }
}

/// What the verifier decided about a request before it is recorded.
// One per inbound request, never held in bulk: the size of the verified task is no cost.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum CallbackCheck {
    /// Verified: create this task (keyed by the provider's event id), unless its
    /// `(kind, key)` exists already, which makes the request a duplicate.
    Verified(NewTask),
    /// Refused, for this reason.
    Rejected(String),
}

/// Records one inbound request; for a verified one, also creates its task, in the same
/// transaction.
#[derive(Clone, Debug)]
pub struct RecordCallbackParams {
    /// The new record's id.
    pub id: CallbackId,
    /// The configured source that received it.
    pub source: String,
    /// When it was received; also the task's creation time.
    pub received_at: Timestamp,
    /// The provider's event id, when the verifier found one.
    pub event_id: Option<String>,
    /// The headers kept, as a JSON array of `[name, value]` pairs.
    pub headers: String,
    /// The exact body bytes (for rejected requests, a bounded excerpt).
    pub body: Vec<u8>,
    /// The body's length as received (may exceed `body.len()` for an excerpt).
    pub body_len: u64,
    /// The verifier's decision.
    pub check: CallbackCheck,
}

/// What [`Callbacks::record_callback`](crate::store::Callbacks::record_callback) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCallback {
    /// The record's id.
    pub id: CallbackId,
    /// Accepted (task created), duplicate (task existed), or rejected.
    pub verdict: CallbackVerdict,
    /// The created task, or for a duplicate the task the event already became.
    pub task_id: Option<TaskId>,
    /// Why it was rejected, or what differed for a duplicate whose payload changed.
    pub reason: Option<String>,
}

/// One recorded request, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallbackRecord {
    pub id: CallbackId,
    pub source: String,
    pub received_at: Timestamp,
    pub verdict: CallbackVerdict,
    pub reason: Option<String>,
    pub event_id: Option<String>,
    pub task_id: Option<TaskId>,
    /// JSON array of `[name, value]` pairs.
    pub headers: String,
    pub body: Vec<u8>,
    pub body_len: u64,
}

/// Lists one source's recorded requests, newest first.
#[derive(Clone, Debug)]
pub struct ListCallbacksParams {
    pub source: String,
    pub limit: usize,
    /// Only records older than this one (cursor pagination).
    pub before: Option<CallbackId>,
}

/// What a duplicate's reason says when its payload differs from the accepted one.
pub fn changed_payload_reason(existing: TaskId) -> String {
    format!(
        "the event was accepted before (task {existing}) with a different payload; the first \
         one stands"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_round_trip() {
        for v in CallbackVerdict::ALL {
            assert_eq!(v.as_str().parse::<CallbackVerdict>(), Ok(v));
        }
        assert!("ok".parse::<CallbackVerdict>().is_err());
    }
}
