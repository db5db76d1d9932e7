//! Skip what the business no longer wants: a kind may name a guarded entity and the states in
//! which its tasks still make sense (`requires = { machine = "order", id = "/order_id",
//! states = ["paid", "shipped"] }`). Before every attempt the entity's state is read; outside
//! those states the task is compensated with a reason naming the entity and its state, and
//! nothing is sent. An entity never seen is in its machine's initial state.

use crate::pointer::{NotAKey, key_at};

/// A kind's guard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requires {
    /// The state machine of the entity (`[machines.order]`).
    pub machine: String,
    /// A JSON pointer into the payload naming the entity's id.
    pub id: String,
    /// The states in which the kind's tasks still make sense.
    pub states: Vec<String>,
}

/// What the guard says about one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The entity is in one of the states: attempt it.
    Wanted,
    /// It is not: compensate with this reason ("order 1001 is closed").
    NotWanted(String),
}

impl Requires {
    /// The entity's id in `payload`.
    pub fn entity_id(&self, payload: &[u8]) -> Result<String, NotAKey> {
        let v: serde_json::Value =
            serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
        key_at(&v, &self.id)
    }

    /// The verdict for entity `id` in `state` (`None`: never seen, so `initial`).
    pub fn judge(&self, id: &str, state: Option<&str>, initial: &str) -> Verdict {
        let state = state.unwrap_or(initial);
        if self.states.iter().any(|s| s == state) {
            Verdict::Wanted
        } else {
            Verdict::NotWanted(format!("{} {id} is {state}", self.machine))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coupon() -> Requires {
        Requires {
            machine: "order".into(),
            id: "/order_id".into(),
            states: vec!["paid".into(), "shipped".into()],
        }
    }

    #[test]
    fn an_entity_outside_the_states_is_not_wanted_with_its_state_named() {
        let r = coupon();
        assert_eq!(r.judge("1001", Some("paid"), "pending"), Verdict::Wanted);
        assert_eq!(
            r.judge("1001", Some("closed"), "pending"),
            Verdict::NotWanted("order 1001 is closed".into())
        );
    }

    #[test]
    fn an_entity_never_seen_is_in_the_initial_state() {
        let r = coupon();
        assert_eq!(
            r.judge("7", None, "pending"),
            Verdict::NotWanted("order 7 is pending".into())
        );
        assert_eq!(r.judge("7", None, "paid"), Verdict::Wanted);
    }

    #[test]
    fn the_id_comes_from_the_payload() {
        let r = coupon();
        assert_eq!(r.entity_id(br#"{"order_id": 1001}"#).unwrap(), "1001");
        assert_eq!(r.entity_id(br#"{"x": 1}"#).unwrap_err().found, "missing");
        assert_eq!(r.entity_id(b"not json").unwrap_err().found, "missing");
    }
}
