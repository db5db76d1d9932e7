//! From a caller's request to a [`NewTask`]: validation and the kind's defaults.

use backstop_core::clock::add;
use backstop_core::validate::{self, InvalidInput};
use backstop_core::{KindConfig, NewTask, StoreError, TaskId};
use jiff::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

/// One task to enqueue, as a caller describes it.
#[derive(Clone, Debug, Default)]
pub struct EnqueueRequest {
    pub kind: String,
    pub key: String,
    /// JSON bytes, kept exactly.
    pub payload: Vec<u8>,
    /// Run no earlier than this long from now.
    pub delay: Option<Duration>,
    /// Run no earlier than this instant (wins over `delay`).
    pub run_at: Option<Timestamp>,
    /// Business validity: never run after this instant.
    pub expires_at: Option<Timestamp>,
    /// Business validity relative to now (used when `expires_at` is not given).
    pub expires_in: Option<Duration>,
    /// Overrides the kind's attempt budget.
    pub max_attempts: Option<u32>,
    /// W3C trace context to carry to every attempt.
    pub traceparent: Option<String>,
}

/// Why an enqueue was refused.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    #[error("unknown kind {0:?} (configured kinds: {1})")]
    UnknownKind(String, String),
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("expires_at {expires_at} is not after run_at {run_at}: the task could never run")]
    ExpiresBeforeRun {
        run_at: Timestamp,
        expires_at: Timestamp,
    },
    #[error("task {kind}/{key} already exists with a different payload (id {existing})")]
    Conflict {
        kind: String,
        key: String,
        existing: TaskId,
    },
    /// One request of a batch was refused; nothing of the batch was written.
    #[error("item {index}: {error}")]
    Item {
        index: usize,
        error: Box<EnqueueError>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The accepted task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enqueued {
    pub id: TaskId,
    /// False when the same `(kind, key)` and payload already existed.
    pub created: bool,
}

/// Validates a request against the configured kinds and fills in their defaults.
pub fn prepare(
    kinds: &HashMap<String, KindConfig>,
    r: EnqueueRequest,
    now: Timestamp,
    max_payload: usize,
) -> Result<NewTask, EnqueueError> {
    validate::kind(&r.kind)?;
    validate::key(&r.key)?;
    let Some(kind) = kinds.get(&r.kind) else {
        let mut names: Vec<&str> = kinds.keys().map(String::as_str).collect();
        names.sort();
        return Err(EnqueueError::UnknownKind(r.kind, names.join(", ")));
    };
    validate::json_payload(&r.payload, max_payload)?;
    let max_attempts = r.max_attempts.unwrap_or(kind.max_attempts);
    validate::max_attempts(max_attempts)?;
    let run_at = r
        .run_at
        .or_else(|| r.delay.map(|d| add(now, d)))
        .unwrap_or(now);
    let expires_at = r
        .expires_at
        .or_else(|| r.expires_in.or(kind.expires_in).map(|d| add(now, d)));
    if let Some(expires_at) = expires_at
        && expires_at <= run_at
    {
        return Err(EnqueueError::ExpiresBeforeRun { run_at, expires_at });
    }
    Ok(NewTask {
        id: TaskId::new(),
        kind: r.kind,
        key: r.key,
        payload: r.payload,
        max_attempts,
        run_at,
        expires_at,
        traceparent: r.traceparent,
    })
}
