//! State machines of business entities (an order, a refund): which states may follow which.
//!
//! Callbacks about one entity arrive twice, late and out of order; a machine says which
//! transitions make sense, and [`crate::entity::Guard`] decides each request against it. A
//! machine is checked when it is made, so that every [`Machine`] is usable: its initial state
//! is one of its states, and every state can be reached from it.

use crate::validate::{self, MAX_KIND_LEN};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Longest accepted state name, in bytes.
pub const MAX_STATE_LEN: usize = 64;

/// A checked state machine. Its states are the keys of `transitions` and every state they
/// list; a state no key names (`refunded` below) is final.
///
/// ```
/// use backstop_core::machine::Machine;
///
/// let order = Machine::new(
///     "order",
///     "pending",
///     [
///         ("pending", vec!["paid", "closed"]),
///         ("paid", vec!["refunding", "refunded"]),
///         ("refunding", vec!["refunded"]),
///     ],
/// )
/// .unwrap();
/// assert!(order.allows("paid", "refunding"));
/// assert!(!order.allows("refunding", "paid"));
/// assert_eq!(order.sources_of("refunded"), ["paid", "refunding"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    name: String,
    initial: String,
    transitions: BTreeMap<String, Vec<String>>,
    states: BTreeSet<String>,
}

/// Why a machine definition cannot be used. [`MachineError::field`] says which part of the
/// definition is wrong (`initial`, `transitions.paid`), for configuration errors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// The machine's name is empty, too long or has other characters than
    /// `A-Z a-z 0-9 . _ -` (the rules of kind names).
    #[error(
        "{0:?} is not a machine name: use 1 to {MAX_KIND_LEN} letters, digits, '.', '_' or '-'"
    )]
    Name(String),
    /// A state name is empty, too long or has other characters than `A-Z a-z 0-9 . _ -`.
    #[error(
        "{state:?} is not a state name: use 1 to {MAX_STATE_LEN} letters, digits, '.', '_' or '-'"
    )]
    StateName { field: String, state: String },
    /// No transitions at all.
    #[error("a machine needs at least one transition")]
    NoTransitions,
    /// The initial state is none of the machine's states.
    #[error("{initial:?} is not one of the machine's states ({states})")]
    UnknownInitial { initial: String, states: String },
    /// A state lists the same next state twice.
    #[error("{target:?} is listed twice")]
    DuplicateTarget { from: String, target: String },
    /// A state that no path from the initial state reaches: a typo, most likely.
    #[error("{state:?} can never be reached from the initial state {initial:?}")]
    Unreachable { state: String, initial: String },
}

impl MachineError {
    /// The part of the definition that is wrong: empty for the name, `initial`,
    /// `transitions`, or `transitions.<state>`.
    pub fn field(&self) -> String {
        match self {
            MachineError::Name(_) => String::new(),
            MachineError::StateName { field, .. } => field.clone(),
            MachineError::NoTransitions => "transitions".into(),
            MachineError::UnknownInitial { .. } => "initial".into(),
            MachineError::DuplicateTarget { from, .. } => format!("transitions.{from}"),
            MachineError::Unreachable { state, .. } => format!("transitions.{state}"),
        }
    }
}

/// Checks a state name.
pub fn check_state(state: &str) -> bool {
    !state.is_empty()
        && state.len() <= MAX_STATE_LEN
        && state
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Machine {
    /// Checks and builds a machine: `transitions` maps each state to the states that may
    /// follow it.
    pub fn new<S, T>(
        name: impl Into<String>,
        initial: impl Into<String>,
        transitions: impl IntoIterator<Item = (S, Vec<T>)>,
    ) -> Result<Machine, MachineError>
    where
        S: Into<String>,
        T: Into<String>,
    {
        let name = name.into();
        let initial = initial.into();
        if validate::kind(&name).is_err() {
            return Err(MachineError::Name(name));
        }
        let mut map = BTreeMap::new();
        let mut states = BTreeSet::new();
        for (from, to) in transitions {
            let from: String = from.into();
            let field = format!("transitions.{from}");
            let bad = |state: &str| MachineError::StateName {
                field: field.clone(),
                state: state.to_string(),
            };
            if !check_state(&from) {
                return Err(bad(&from));
            }
            let mut targets: Vec<String> = Vec::new();
            for t in to {
                let t: String = t.into();
                if !check_state(&t) {
                    return Err(bad(&t));
                }
                if targets.contains(&t) {
                    return Err(MachineError::DuplicateTarget { from, target: t });
                }
                targets.push(t);
            }
            states.insert(from.clone());
            states.extend(targets.iter().cloned());
            map.insert(from, targets);
        }
        if map.is_empty() {
            return Err(MachineError::NoTransitions);
        }
        if !states.contains(&initial) {
            return Err(MachineError::UnknownInitial {
                initial,
                states: states.iter().cloned().collect::<Vec<_>>().join(", "),
            });
        }
        let machine = Machine {
            name,
            initial,
            transitions: map,
            states,
        };
        machine.check_reachable()?;
        Ok(machine)
    }

    /// Every state is reached by some path from the initial state.
    fn check_reachable(&self) -> Result<(), MachineError> {
        let mut seen = BTreeSet::from([self.initial.as_str()]);
        let mut queue = VecDeque::from([self.initial.as_str()]);
        while let Some(s) = queue.pop_front() {
            for next in self.next_states(s) {
                if seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        match self.states.iter().find(|s| !seen.contains(s.as_str())) {
            Some(state) => Err(MachineError::Unreachable {
                state: state.clone(),
                initial: self.initial.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The machine's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The state a new entity starts in.
    pub fn initial(&self) -> &str {
        &self.initial
    }

    /// Each state that has next states, with them, in the order given.
    pub fn transitions(&self) -> &BTreeMap<String, Vec<String>> {
        &self.transitions
    }

    /// Every state, sorted.
    pub fn states(&self) -> impl Iterator<Item = &str> {
        self.states.iter().map(String::as_str)
    }

    /// Whether `state` is one of the machine's states.
    pub fn has_state(&self, state: &str) -> bool {
        self.states.contains(state)
    }

    /// The states that may follow `state` (none for a final state).
    pub fn next_states(&self, state: &str) -> impl Iterator<Item = &str> {
        self.transitions
            .get(state)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Whether `to` may follow `from`.
    pub fn allows(&self, from: &str, to: &str) -> bool {
        self.next_states(from).any(|s| s == to)
    }

    /// The states `to` may follow, sorted: what a store checks an entity's current state
    /// against.
    pub fn sources_of(&self, to: &str) -> Vec<String> {
        self.transitions
            .iter()
            .filter(|(_, next)| next.iter().any(|s| s == to))
            .map(|(from, _)| from.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> Machine {
        Machine::new(
            "order",
            "pending",
            [
                ("pending", vec!["paid", "closed"]),
                ("paid", vec!["refunding", "refunded"]),
                ("refunding", vec!["refunded"]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn states_are_the_keys_and_every_target() {
        let m = order();
        assert_eq!(
            m.states().collect::<Vec<_>>(),
            ["closed", "paid", "pending", "refunded", "refunding"]
        );
        assert!(m.has_state("closed") && !m.has_state("shipped"));
        assert_eq!(m.next_states("refunded").count(), 0, "a final state");
        assert_eq!(m.sources_of("paid"), ["pending"]);
        assert!(m.sources_of("pending").is_empty());
    }

    #[test]
    fn bad_definitions_name_what_is_wrong() {
        let err = |initial: &str, t: Vec<(&str, Vec<&str>)>| {
            let e = Machine::new("order", initial, t).unwrap_err();
            (e.field(), e.to_string())
        };
        let (field, msg) = err("new", vec![("pending", vec!["paid"])]);
        assert_eq!(field, "initial");
        assert!(
            msg.contains("\"new\"") && msg.contains("paid, pending"),
            "{msg}"
        );
        let (field, msg) = err(
            "pending",
            vec![("pending", vec!["paid"]), ("payed", vec!["x"])],
        );
        assert_eq!(field, "transitions.payed");
        assert!(msg.contains("never be reached"), "{msg}");
        let (field, _) = err("pending", vec![("pending", vec!["paid", "paid"])]);
        assert_eq!(field, "transitions.pending");
        let (field, msg) = err("pending", vec![("pending", vec!["paid now"])]);
        assert_eq!(field, "transitions.pending");
        assert!(msg.contains("\"paid now\""), "{msg}");
        let (field, _) = err("pending", vec![]);
        assert_eq!(field, "transitions");
        assert!(matches!(
            Machine::new("my order", "a", [("a", vec!["b"])]),
            Err(MachineError::Name(_))
        ));
        let long = "s".repeat(MAX_STATE_LEN + 1);
        assert!(Machine::new("m", "a", [("a", vec![long.as_str()])]).is_err());
    }

    #[test]
    fn loops_and_returns_to_the_initial_state_are_allowed() {
        let m = Machine::new(
            "m",
            "open",
            [("open", vec!["open", "shut"]), ("shut", vec!["open"])],
        )
        .unwrap();
        assert!(m.allows("open", "open") && m.allows("shut", "open"));
        assert_eq!(m.sources_of("open"), ["open", "shut"]);
    }
}
