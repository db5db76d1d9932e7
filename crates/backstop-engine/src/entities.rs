//! Guarded state transitions: callbacks about a business entity (an order, a refund) move it
//! through a configured [`Machine`], and arrive twice, late and out of order. Each request is
//! checked against the machine here and decided by the store under the entity's lock (see
//! [`backstop_core::entity`] for the rule: duplicate, stale, rejected or applied).

use crate::engine::Engine;
use crate::metrics;
use backstop_core::StoreError;
use backstop_core::machine::Machine;
use backstop_core::store::{EntityHistory, EntityParams, TransitionOutcome, TransitionParams};
use backstop_core::validate::{self, InvalidInput};
use std::collections::HashMap;

/// A request that one entity of a machine move to a state.
#[derive(Clone, Debug, Default)]
pub struct TransitionRequest {
    /// A configured machine.
    pub machine: String,
    /// The entity's business id (1 to 512 bytes, no control characters).
    pub id: String,
    /// The requested state: one of the machine's.
    pub to: String,
    /// The id of the event that asks (1 to 255 bytes, no control characters); each event is
    /// applied at most once per entity.
    pub event_id: String,
    /// The sender's version of the entity: when given, it must be greater than every version
    /// applied before, or the request is stale.
    pub version: Option<i64>,
}

/// Why a transition request or an entity read was refused before the ledger decided anything.
#[derive(Debug, thiserror::Error)]
pub enum TransitionError {
    #[error("unknown machine {0:?} (configured machines: {1})")]
    UnknownMachine(String, String),
    #[error("{state:?} is not a state of machine {machine:?} (states: {states})")]
    UnknownState {
        machine: String,
        state: String,
        states: String,
    },
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The machine named `name`, or the error that lists the configured ones.
fn machine<'a>(
    machines: &'a HashMap<String, Machine>,
    name: &str,
) -> Result<&'a Machine, TransitionError> {
    machines.get(name).ok_or_else(|| {
        let mut names: Vec<&str> = machines.keys().map(String::as_str).collect();
        names.sort();
        let names = if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        };
        TransitionError::UnknownMachine(name.to_string(), names)
    })
}

impl Engine {
    /// The configured state machines, by name.
    pub fn machines(&self) -> &HashMap<String, Machine> {
        &self.parts.machines
    }

    /// Decides a transition request about an entity (created in the machine's initial state
    /// when first seen) and records the decision in its history, whatever it is. Requests
    /// about one entity are decided one at a time, in every process on the database.
    pub async fn transition(
        &self,
        r: TransitionRequest,
    ) -> Result<TransitionOutcome, TransitionError> {
        let m = machine(&self.parts.machines, &r.machine)?;
        validate::entity_id(&r.id)?;
        validate::event_id(&r.event_id)?;
        if !m.has_state(&r.to) {
            return Err(TransitionError::UnknownState {
                machine: r.machine,
                state: r.to,
                states: m.states().collect::<Vec<_>>().join(", "),
            });
        }
        let out = self
            .ctx
            .store
            .transition_entity(TransitionParams {
                allowed_from: m.sources_of(&r.to),
                initial: m.initial().to_string(),
                machine: r.machine,
                entity_id: r.id,
                to: r.to,
                event_id: r.event_id,
                version: r.version,
                now: self.ctx.clock.now(),
            })
            .await?;
        metrics::transition(&out.entity.machine, out.answer);
        Ok(out)
    }

    /// An entity of a machine with its whole history, oldest decision first; `None` when no
    /// request about it was ever decided.
    pub async fn entity(
        &self,
        machine_name: &str,
        id: &str,
    ) -> Result<Option<EntityHistory>, TransitionError> {
        machine(&self.parts.machines, machine_name)?;
        validate::entity_id(id)?;
        Ok(self
            .ctx
            .store
            .entity(EntityParams {
                machine: machine_name.to_string(),
                id: id.to_string(),
            })
            .await?)
    }
}
