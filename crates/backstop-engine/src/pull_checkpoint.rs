//! Checkpoints and suspensions of pull leases: a worker in any language saves its cursor under
//! its lease token, and gives a resumable task back at shutdown without spending the attempt.

use crate::checkpoint::check_cursor;
use crate::engine::Engine;
use crate::lease_token::LeaseToken;
use crate::pull::PullError;
use backstop_core::store::{CheckpointParams, Checkpointed, SuspendParams};

impl Engine {
    /// Saves `cursor` (JSON text) for the attempt a token names, fenced by its lease: durable
    /// when this returns, and what the task's next lease carries. A lost lease is
    /// [`PullError::LeaseLost`], and the rejected checkpoint is on the task's timeline.
    pub async fn checkpoint_lease(&self, token: &str, cursor: String) -> Result<(), PullError> {
        let t = LeaseToken::decode(token)?;
        check_cursor(&cursor).map_err(|e| PullError::Invalid(format!("cursor: {e}")))?;
        let r = self
            .ctx
            .store
            .checkpoint(CheckpointParams {
                lease: t.lease,
                attempt: t.attempt,
                worker: t.owner,
                cursor,
                now: self.ctx.clock.now(),
            })
            .await?;
        match r {
            Checkpointed::Saved => Ok(()),
            Checkpointed::Rejected => Err(PullError::LeaseLost),
        }
    }

    /// Gives the task a token names back without spending its attempt (a resumable task at
    /// shutdown), saving `cursor` first when given: it is due again at once and resumes from
    /// its last cursor.
    pub async fn suspend_lease(
        &self,
        token: &str,
        cursor: Option<String>,
    ) -> Result<(), PullError> {
        let t = LeaseToken::decode(token)?;
        if let Some(c) = &cursor {
            check_cursor(c).map_err(|e| PullError::Invalid(format!("cursor: {e}")))?;
        }
        let r = self
            .ctx
            .store
            .suspend(SuspendParams {
                lease: t.lease,
                attempt: t.attempt,
                worker: t.owner,
                cursor,
                started_at: t.started_at,
                now: self.ctx.clock.now(),
            })
            .await?;
        match r {
            Checkpointed::Saved => {
                self.ctx.kinds.pull_wake.notify_waiters();
                Ok(())
            }
            Checkpointed::Rejected => Err(PullError::LeaseLost),
        }
    }
}
