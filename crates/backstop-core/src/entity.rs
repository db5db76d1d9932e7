//! Entities driven through a [`Machine`](crate::machine::Machine) by callbacks, and the one
//! definition of how each transition request is decided, which every store applies under the
//! entity's lock.
//!
//! A request asks that entity `id` of a machine move to state `to`, naming the event that
//! asks (`event_id`) and optionally the sender's `version` of the entity. It is answered:
//!
//! 1. [`Answer::Duplicate`] when an earlier request with the same event id was *applied* to
//!    this entity (only applied ones count: an event that was rejected or stale may be sent
//!    again and apply later);
//! 2. otherwise [`Answer::Stale`] when it carries a version and the entity's version (the
//!    highest applied so far) is equal or greater: versions must strictly increase;
//! 3. otherwise [`Answer::Rejected`] when the machine does not allow `to` from the current
//!    state;
//! 4. otherwise [`Answer::Applied`]: the entity moves to `to`, and its version becomes the
//!    request's (a request without a version keeps the entity's).
//!
//! Only an applied request changes the entity. Every request, whatever its answer, is
//! recorded in the entity's history.

use crate::store::{TransitionOutcome, TransitionParams};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How a transition request was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// The entity moved to the requested state.
    Applied,
    /// That event id was already applied to this entity; nothing changed.
    Duplicate,
    /// The machine does not allow the requested state from the current one; nothing changed.
    Rejected,
    /// A version equal to or newer than the request's was already applied; nothing changed.
    Stale,
}

impl Answer {
    /// Every answer.
    pub const ALL: [Answer; 4] = [
        Answer::Applied,
        Answer::Duplicate,
        Answer::Rejected,
        Answer::Stale,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Applied => "applied",
            Answer::Duplicate => "duplicate",
            Answer::Rejected => "rejected",
            Answer::Stale => "stale",
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored answer that is none of the four.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown answer {0:?}")]
pub struct UnknownAnswer(pub String);

impl FromStr for Answer {
    type Err = UnknownAnswer;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Answer::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownAnswer(s.to_string()))
    }
}

/// One entity of a machine, as its applied transitions left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entity {
    /// The machine's name.
    pub machine: String,
    /// The entity's business id (an order number).
    pub id: String,
    /// Its current state.
    pub state: String,
    /// The highest version applied so far; `None` until a request with a version applies.
    pub version: Option<i64>,
    /// How many requests were decided about it (the length of its history).
    pub decisions: u64,
    /// When the first request about it arrived.
    pub created_at: Timestamp,
    /// When its state or version last changed (its creation, or the last applied request).
    pub updated_at: Timestamp,
}

/// One decided request, as the entity's history keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityDecision {
    /// The event that asked.
    pub event_id: String,
    /// The entity's state when the request was decided.
    pub from: String,
    /// The state the request asked for.
    pub to: String,
    pub answer: Answer,
    /// The version the request carried.
    pub version: Option<i64>,
    /// When it was decided.
    pub at: Timestamp,
}

/// What a store knows when it decides a request, read under the entity's lock.
#[derive(Clone, Copy, Debug)]
pub struct Guard<'a> {
    /// The entity's state before the request.
    pub state: &'a str,
    /// The entity's version before the request.
    pub version: Option<i64>,
    /// Whether a request with this event id was already applied to the entity.
    pub event_applied: bool,
    /// The states the requested state may follow.
    pub allowed_from: &'a [String],
    /// The requested state.
    pub to: &'a str,
    /// The request's version.
    pub requested_version: Option<i64>,
}

impl Guard<'_> {
    /// The answer (see the module's documentation for the order of the checks).
    pub fn answer(&self) -> Answer {
        if self.event_applied {
            return Answer::Duplicate;
        }
        if let (Some(requested), Some(current)) = (self.requested_version, self.version)
            && requested <= current
        {
            return Answer::Stale;
        }
        if !self.allowed_from.iter().any(|s| s == self.state) {
            return Answer::Rejected;
        }
        Answer::Applied
    }

    /// The entity's state after `answer`.
    pub fn state_after(&self, answer: Answer) -> &str {
        match answer {
            Answer::Applied => self.to,
            _ => self.state,
        }
    }

    /// The entity's version after `answer`.
    pub fn version_after(&self, answer: Answer) -> Option<i64> {
        match answer {
            Answer::Applied => self.requested_version.or(self.version),
            _ => self.version,
        }
    }
}

/// Decides `p` about the entity as the store read it under its lock (`before`, created in
/// the initial state if it was new), given whether `p.event_id` was already applied to it:
/// the answer, the entity as it must be written back (its `decisions` counted, and changed
/// only when applied) and the decision to append to its history.
pub fn decide(p: &TransitionParams, before: Entity, event_applied: bool) -> TransitionOutcome {
    let guard = Guard {
        state: &before.state,
        version: before.version,
        event_applied,
        allowed_from: &p.allowed_from,
        to: &p.to,
        requested_version: p.version,
    };
    let answer = guard.answer();
    let decision = EntityDecision {
        event_id: p.event_id.clone(),
        from: before.state.clone(),
        to: p.to.clone(),
        answer,
        version: p.version,
        at: p.now,
    };
    let applied = answer == Answer::Applied;
    let entity = Entity {
        state: guard.state_after(answer).to_string(),
        version: guard.version_after(answer),
        decisions: before.decisions + 1,
        updated_at: if applied { p.now } else { before.updated_at },
        ..before
    };
    TransitionOutcome {
        answer,
        entity,
        decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard<'a>(state: &'a str, version: Option<i64>, allowed: &'a [String]) -> Guard<'a> {
        Guard {
            state,
            version,
            event_applied: false,
            allowed_from: allowed,
            to: "paid",
            requested_version: None,
        }
    }

    #[test]
    fn the_four_answers_in_their_order() {
        let from_pending = vec!["pending".to_string()];
        let g = guard("pending", None, &from_pending);
        assert_eq!(g.answer(), Answer::Applied);
        assert_eq!(g.state_after(Answer::Applied), "paid");
        assert_eq!(
            guard("refunding", None, &from_pending).answer(),
            Answer::Rejected
        );
        let stale = Guard {
            requested_version: Some(3),
            ..guard("refunding", Some(3), &from_pending)
        };
        assert_eq!(stale.answer(), Answer::Stale, "stale wins over rejected");
        let dup = Guard {
            event_applied: true,
            ..stale
        };
        assert_eq!(dup.answer(), Answer::Duplicate, "duplicate wins over all");
        assert_eq!(dup.state_after(Answer::Duplicate), "refunding");
    }

    #[test]
    fn versions_must_strictly_increase_and_are_kept_without_one() {
        let from_pending = vec!["pending".to_string()];
        let at = |current, requested| Guard {
            requested_version: requested,
            ..guard("pending", current, &from_pending)
        };
        assert_eq!(at(Some(4), Some(4)).answer(), Answer::Stale);
        assert_eq!(at(Some(4), Some(3)).answer(), Answer::Stale);
        assert_eq!(at(Some(4), Some(5)).answer(), Answer::Applied);
        assert_eq!(at(Some(4), Some(5)).version_after(Answer::Applied), Some(5));
        assert_eq!(at(None, Some(-1)).answer(), Answer::Applied);
        assert_eq!(at(Some(4), None).answer(), Answer::Applied);
        assert_eq!(at(Some(4), None).version_after(Answer::Applied), Some(4));
        assert_eq!(at(Some(4), Some(9)).version_after(Answer::Stale), Some(4));
    }

    #[test]
    fn answers_round_trip_their_names() {
        for a in Answer::ALL {
            assert_eq!(a.as_str().parse::<Answer>(), Ok(a));
            assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{a}\""));
        }
        assert!("maybe".parse::<Answer>().is_err());
    }
}
