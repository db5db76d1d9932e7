//! `[machines.NAME]`: the state machines whose entities callbacks drive (guarded state
//! transitions).
//!
//! ```toml
//! [machines.order]
//! initial = "pending"
//! transitions = { pending = ["paid", "closed"], paid = ["refunding", "refunded"], refunding = ["refunded"] }
//! ```

use super::{ConfigError, Invalid};
use backstop_core::Machine;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMachine {
    initial: Option<String>,
    #[serde(default)]
    transitions: BTreeMap<String, Vec<String>>,
}

/// Checks every machine; an error names the machine's key and the part that is wrong
/// (`machines."order".initial`, `machines."order".transitions.paid`).
pub(super) fn machines(
    raw: BTreeMap<String, RawMachine>,
    invalid: Invalid,
) -> Result<Vec<Machine>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, m) in raw {
        let key = format!("machines.{name:?}");
        let initial = m.initial.ok_or_else(|| {
            invalid(
                format!("{key}.initial"),
                "missing: the state a new entity starts in".into(),
            )
        })?;
        let machine = Machine::new(name, initial, m.transitions).map_err(|e| {
            let field = e.field();
            let at = if field.is_empty() {
                key.clone()
            } else {
                format!("{key}.{field}")
            };
            invalid(at, e.to_string())
        })?;
        out.push(machine);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn reads_the_machines() {
        let c = Config::parse(
            r#"
            [machines.order]
            initial = "pending"
            transitions = { pending = ["paid", "closed"], paid = ["refunding", "refunded"], refunding = ["refunded"] }

            [machines."refund.v2"]
            initial = "requested"
            transitions.requested = ["done"]
            "#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.machines.len(), 2);
        let order = &c.machines[0];
        assert_eq!(order.name(), "order");
        assert_eq!(order.initial(), "pending");
        assert!(order.allows("paid", "refunding"));
        assert_eq!(order.sources_of("refunded"), ["paid", "refunding"]);
        assert_eq!(c.machines[1].name(), "refund.v2");
        assert!(Config::parse("", "t.toml").unwrap().machines.is_empty());
    }

    #[test]
    fn the_example_configuration_has_the_order_machine() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/backstop.toml");
        let c = Config::load(std::path::Path::new(path)).unwrap();
        assert_eq!(c.machines.len(), 1);
        assert_eq!(c.machines[0].name(), "order");
        assert_eq!(c.machines[0].states().count(), 5);
    }

    #[test]
    fn errors_name_the_machine_and_the_part() {
        let cases = [
            (
                "[machines.order]\ntransitions = { pending = [\"paid\"] }",
                "t.toml: machines.\"order\".initial: missing",
            ),
            (
                "[machines.order]\ninitial = \"new\"\ntransitions = { pending = [\"paid\"] }",
                "t.toml: machines.\"order\".initial: \"new\" is not one of the machine's states (paid, pending)",
            ),
            (
                "[machines.order]\ninitial = \"pending\"\ntransitions = { pending = [\"paid\"], payed = [\"refunded\"] }",
                "machines.\"order\".transitions.payed: \"payed\" can never be reached",
            ),
            (
                "[machines.order]\ninitial = \"pending\"\ntransitions = { pending = [\"paid\", \"paid\"] }",
                "machines.\"order\".transitions.pending: \"paid\" is listed twice",
            ),
            (
                "[machines.order]\ninitial = \"pending\"\ntransitions = { pending = [\"paid out\"] }",
                "machines.\"order\".transitions.pending: \"paid out\" is not a state name",
            ),
            (
                "[machines.order]\ninitial = \"pending\"",
                "machines.\"order\".transitions: a machine needs at least one transition",
            ),
            (
                "[machines.\"my order\"]\ninitial = \"a\"\ntransitions = { a = [\"b\"] }",
                "machines.\"my order\": \"my order\" is not a machine name",
            ),
            (
                "[machines.order]\ninitial = \"a\"\ntransitions = { a = [\"b\"] }\nstates = [\"a\"]",
                "unknown field `states`",
            ),
        ];
        for (text, want) in cases {
            let err = Config::parse(text, "t.toml").unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
            assert!(err.starts_with("t.toml"), "{err}");
        }
    }
}
