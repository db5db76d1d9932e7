//! Business entities that callbacks drive through their state machines.

use super::{BoxFuture, StoreError};
use crate::entity::{Answer, Entity, EntityDecision};
use jiff::Timestamp;

/// Decides one transition request about an entity, in one transaction that holds the
/// entity's lock (so requests about one entity are decided one at a time), and records the
/// decision in its history whatever it is. An entity not seen before is created in
/// `initial` first. The answer follows [`crate::entity::Guard`].
#[derive(Clone, Debug)]
pub struct TransitionParams {
    /// The machine's name.
    pub machine: String,
    /// The entity's business id.
    pub entity_id: String,
    /// The requested state.
    pub to: String,
    /// The id of the event that asks; each is applied at most once per entity.
    pub event_id: String,
    /// The sender's version of the entity, if it has one.
    pub version: Option<i64>,
    /// The states `to` may follow (the caller reads them from the machine).
    pub allowed_from: Vec<String>,
    /// The machine's initial state, for a new entity.
    pub initial: String,
    /// The caller's clock.
    pub now: Timestamp,
}

/// How a transition request was decided, and the entity afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionOutcome {
    /// The decision's answer.
    pub answer: Answer,
    /// The entity after the decision (changed only when applied).
    pub entity: Entity,
    /// The decision as its history records it.
    pub decision: EntityDecision,
}

/// Reads one entity of a machine.
#[derive(Clone, Debug)]
pub struct EntityParams {
    /// The machine's name.
    pub machine: String,
    /// The entity's business id.
    pub id: String,
}

/// An entity with its whole history, oldest decision first; the history holds exactly the
/// entity's `decisions`, even while requests are being decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityHistory {
    /// The entity now.
    pub entity: Entity,
    /// Every decision about it, oldest first.
    pub decisions: Vec<EntityDecision>,
}

/// Entities and their decided transitions.
pub trait Entities: Send + Sync {
    /// Decides a transition request about an entity and records the decision.
    fn transition_entity(
        &self,
        p: TransitionParams,
    ) -> BoxFuture<'_, Result<TransitionOutcome, StoreError>>;

    /// An entity with its history; `None` when no request about it was ever decided.
    fn entity(&self, p: EntityParams) -> BoxFuture<'_, Result<Option<EntityHistory>, StoreError>>;
}
