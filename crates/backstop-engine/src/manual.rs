//! Manual actions on one task (retry, resolve, cancel, redrive), taken by a person through
//! the API or the CLI. They live here so that both edges translate only: the rules (a retry renews the
//! attempt budget by the kind's current limit; every action is stamped by the engine's clock
//! and names who asked) are written once.

use crate::engine::Engine;
use backstop_core::store::GetParams;
use backstop_core::store::ManualParams;
use backstop_core::{StoreError, Task, TaskId};

/// Who asks for a manual action, and why.
#[derive(Clone, Debug)]
pub struct ManualRequest {
    pub id: TaskId,
    /// A token name, `cli`, a rule: recorded on the timeline.
    pub actor: String,
    /// Recorded on the timeline; required to resolve.
    pub reason: Option<String>,
}

impl Engine {
    /// A `failed` or `compensated` task back to `pending`, due now, its attempt budget renewed:
    /// its kind's current `max_attempts` more attempts (the task's own limit when the kind is
    /// no longer configured).
    pub async fn retry(&self, r: ManualRequest) -> Result<Task, StoreError> {
        let budget = self.budget(r.id).await?;
        self.ctx.store.retry(self.manual(r, budget)).await
    }

    /// A `succeeded` task back to `pending`, due now, its attempt budget renewed as by
    /// [`Engine::retry`]: the provider says it never got the request.
    pub async fn redrive(&self, r: ManualRequest) -> Result<Task, StoreError> {
        let budget = self.budget(r.id).await?;
        self.ctx.store.redrive(self.manual(r, budget)).await
    }

    /// The renewed attempt budget of a task: its kind's current `max_attempts`.
    async fn budget(&self, id: TaskId) -> Result<Option<u32>, StoreError> {
        Ok(match self.ctx.store.get(GetParams { id }).await? {
            Some(t) => self.kinds().get(&t.kind).map(|k| k.max_attempts),
            None => None,
        })
    }

    /// A `failed` task to `compensated`, with the reason given.
    pub async fn resolve(&self, r: ManualRequest) -> Result<Task, StoreError> {
        self.ctx.store.resolve(self.manual(r, None)).await
    }

    /// A `pending` task to `compensated` with reason `canceled`.
    pub async fn cancel(&self, r: ManualRequest) -> Result<Task, StoreError> {
        self.ctx.store.cancel(self.manual(r, None)).await
    }

    fn manual(&self, r: ManualRequest, max_attempts: Option<u32>) -> ManualParams {
        ManualParams {
            id: r.id,
            actor: r.actor,
            reason: r.reason,
            max_attempts,
            now: self.ctx.clock.now(),
        }
    }
}
