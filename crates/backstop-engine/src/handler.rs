//! In-process handlers: Rust functions registered for a kind.

use backstop_core::store::{BoxFuture, ClaimedTask};
use backstop_core::{Outcome, TaskId};
use jiff::Timestamp;
use std::future::Future;
use std::sync::Arc;

/// What a handler is given for one attempt.
#[derive(Clone, Debug)]
pub struct TaskContext {
    pub id: TaskId,
    pub kind: String,
    pub key: String,
    /// The exact bytes given at enqueue time.
    pub payload: Vec<u8>,
    /// This attempt's number, from 1.
    pub attempt: u32,
    pub max_attempts: u32,
    pub expires_at: Option<Timestamp>,
    pub traceparent: Option<String>,
    /// When the task entered the ledger.
    pub enqueued_at: Timestamp,
}

impl From<ClaimedTask> for TaskContext {
    fn from(t: ClaimedTask) -> Self {
        TaskContext {
            id: t.id,
            kind: t.kind,
            key: t.key,
            payload: t.payload,
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            expires_at: t.expires_at,
            traceparent: t.traceparent,
            enqueued_at: t.created_at,
        }
    }
}

impl TaskContext {
    /// The payload parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

/// A registered handler: one attempt in, one [`Outcome`] out.
pub type Handler = Arc<dyn Fn(TaskContext) -> BoxFuture<'static, Outcome> + Send + Sync>;

/// Wraps an async function as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(TaskContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    Arc::new(move |ctx| Box::pin(f(ctx)))
}
