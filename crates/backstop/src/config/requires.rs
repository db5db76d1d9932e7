//! `requires = { machine = "order", id = "/order_id", states = ["paid", "shipped"] }` on a
//! kind: before every attempt the entity's state is read, and outside those states the task
//! is compensated, nothing sent (see `backstop_core::requires`).

use super::{ConfigError, Invalid};
use backstop_core::requires::Requires;
use backstop_core::{KindConfig, Machine};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequires {
    machine: String,
    id: String,
    states: Vec<String>,
}

/// Checks a kind's `requires` on its own; an error is the field (under `requires.`) and what
/// to fix. Whether the machine and its states exist is [`check`]'s.
pub(super) fn requires(raw: RawRequires) -> Result<Requires, (&'static str, String)> {
    if !raw.id.starts_with('/') {
        return Err((
            "id",
            format!(
                "{:?} is not a JSON pointer into the payload: write it as \"/order_id\"",
                raw.id
            ),
        ));
    }
    if raw.states.is_empty() {
        return Err((
            "states",
            "must list at least one state in which the kind's tasks still make sense".into(),
        ));
    }
    Ok(Requires {
        machine: raw.machine,
        id: raw.id,
        states: raw.states,
    })
}

/// Checks that each kind's `requires` names a configured machine and its states.
pub(super) fn check(
    kinds: &[KindConfig],
    machines: &[Machine],
    invalid: Invalid,
) -> Result<(), ConfigError> {
    for k in kinds {
        let Some(r) = &k.requires else { continue };
        let at = |f: &str| format!("kinds.{:?}.requires.{f}", k.name);
        let Some(m) = machines.iter().find(|m| m.name() == r.machine) else {
            let names: Vec<&str> = machines.iter().map(|m| m.name()).collect();
            return Err(invalid(
                at("machine"),
                format!(
                    "{:?} is not a configured machine (configured: {})",
                    r.machine,
                    if names.is_empty() {
                        "none; add [machines.NAME]".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        };
        if let Some(s) = r.states.iter().find(|s| !m.has_state(s)) {
            let states: Vec<&str> = m.states().collect();
            return Err(invalid(
                at("states"),
                format!(
                    "{s:?} is not a state of machine {:?} (its states: {})",
                    r.machine,
                    states.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::tests::assert_refused;

    const ORDER: &str = "[machines.order]\ninitial = \"pending\"\ntransitions = { pending = [\"paid\", \"closed\"], paid = [\"shipped\"] }\n";

    #[test]
    fn a_kind_reads_its_guard() {
        let c = crate::config::Config::parse(
            &format!("{ORDER}[kinds.coupon]\nurl = \"http://x\"\nrequires = {{ machine = \"order\", id = \"/order_id\", states = [\"paid\", \"shipped\"] }}"),
            "t.toml",
        )
        .unwrap();
        let r = c.kinds[0].requires.clone().expect("requires");
        assert_eq!(
            (r.machine.as_str(), r.id.as_str(), r.states),
            (
                "order",
                "/order_id",
                vec!["paid".to_string(), "shipped".into()]
            )
        );
    }

    #[test]
    fn bad_guards_name_their_field() {
        assert_refused(&[
            (
                &format!(
                    "{ORDER}[kinds.coupon]\nurl = \"http://x\"\nrequires = {{ machine = \"order\", id = \"order_id\", states = [\"paid\"] }}"
                ),
                "kinds.\"coupon\".requires.id: \"order_id\" is not a JSON pointer",
            ),
            (
                &format!(
                    "{ORDER}[kinds.coupon]\nurl = \"http://x\"\nrequires = {{ machine = \"order\", id = \"/order_id\", states = [] }}"
                ),
                "kinds.\"coupon\".requires.states: must list at least one state",
            ),
            (
                &format!(
                    "{ORDER}[kinds.coupon]\nurl = \"http://x\"\nrequires = {{ machine = \"ordr\", id = \"/order_id\", states = [\"paid\"] }}"
                ),
                "kinds.\"coupon\".requires.machine: \"ordr\" is not a configured machine (configured: order)",
            ),
            (
                &format!(
                    "{ORDER}[kinds.coupon]\nurl = \"http://x\"\nrequires = {{ machine = \"order\", id = \"/order_id\", states = [\"payed\"] }}"
                ),
                "kinds.\"coupon\".requires.states: \"payed\" is not a state of machine \"order\"",
            ),
        ]);
    }
}
