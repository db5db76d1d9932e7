//! In-process handlers: Rust functions registered for a kind.

use crate::checkpoint::{AttemptControl, CheckpointError};
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
    /// The last cursor an attempt of this task saved ([`TaskContext::checkpoint`]), as JSON
    /// text: where this attempt resumes. `None` on a first run.
    pub cursor: Option<String>,
    /// The running attempt's lease, for checkpoints; `None` on a context built by hand.
    control: Option<Arc<AttemptControl>>,
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
            cursor: t.checkpoint,
            control: None,
        }
    }
}

impl TaskContext {
    /// The payload parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }

    /// The context of a running attempt, with its lease.
    pub(crate) fn running(t: ClaimedTask, control: AttemptControl) -> Self {
        let mut ctx = TaskContext::from(t);
        ctx.control = Some(Arc::new(control));
        ctx
    }

    /// The last saved cursor parsed as `T`; `None` on a first run.
    pub fn resume_from<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Option<Result<T, serde_json::Error>> {
        self.cursor.as_deref().map(serde_json::from_str)
    }

    /// Saves `cursor` as where a later attempt of this task resumes. Durable when it returns
    /// and fenced by this attempt's lease: when the lease was lost (a newer attempt holds the
    /// task), nothing is written, the rejection goes on the task's timeline and this returns
    /// [`CheckpointError::LeaseLost`]: stop working then. A checkpoint does not extend the
    /// lease; the engine heartbeats a running attempt by itself.
    pub async fn checkpoint<T: serde::Serialize + ?Sized>(
        &self,
        cursor: &T,
    ) -> Result<(), CheckpointError> {
        let control = self.control.as_ref().ok_or(CheckpointError::Detached)?;
        let json =
            serde_json::to_string(cursor).map_err(|source| CheckpointError::NotJson { source })?;
        control.save(json).await
    }

    /// Whether the worker is shutting down. A resumable handler checks this between units of
    /// work; when it is, it saves its cursor and returns [`Outcome::Suspend`]: the task goes
    /// back to pending at once and this attempt is not counted.
    pub fn is_stopping(&self) -> bool {
        self.control.as_ref().is_some_and(|c| c.is_stopping())
    }

    /// Resolves once the worker is shutting down (never, on a context built by hand).
    pub async fn stopping(&self) {
        match &self.control {
            Some(c) => c.stopping().await,
            None => std::future::pending().await,
        }
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
