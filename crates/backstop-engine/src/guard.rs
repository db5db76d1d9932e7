//! A kind's `requires` before an attempt: the guarded entity's state is read, and a task that
//! no longer makes sense is compensated with a reason naming the entity and its state, nothing
//! sent ([`backstop_core::requires`]). Only kinds with `requires` pay the read.

use crate::context::Kind;
use backstop_core::decide::{Decision, decide, not_wanted};
use backstop_core::requires::Verdict;
use backstop_core::store::{ClaimedTask, Entities, EntityParams};
use backstop_core::{Clock, Outcome};

/// What the guard decides for `task` instead of an attempt; `None`: attempt it.
pub(crate) async fn refuse(
    entities: &dyn Entities,
    clock: &dyn Clock,
    kind: &Kind,
    task: &ClaimedTask,
) -> Option<Decision> {
    let guard = kind.guard.as_ref()?;
    let r = &guard.requires;
    let instead = |outcome: Outcome| {
        decide(
            task.attempt,
            task.max_attempts,
            &outcome,
            &kind.config.retry,
            clock.now(),
            rand::random::<f64>(),
        )
    };
    let id = match r.entity_id(&task.payload) {
        Ok(id) => id,
        // A person must look: the task names no entity, so nobody can say it is wanted.
        Err(e) => {
            return Some(instead(Outcome::fail(format!(
                "requires {}: {e}",
                r.machine
            ))));
        }
    };
    let state = match entities
        .entity(EntityParams {
            machine: r.machine.clone(),
            id: id.clone(),
        })
        .await
    {
        Ok(h) => h.map(|h| h.entity.state),
        Err(e) => {
            return Some(instead(Outcome::retry(format!(
                "requires: reading {} {id} failed: {e}",
                r.machine
            ))));
        }
    };
    match r.judge(&id, state.as_deref(), &guard.initial) {
        Verdict::Wanted => None,
        Verdict::NotWanted(reason) => {
            tracing::info!(task = %task.id, kind = %kind.config.name, %reason, "compensated by its guard: nothing sent");
            Some(not_wanted(reason))
        }
    }
}
