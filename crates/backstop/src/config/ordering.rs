//! `ordering = { group = "/order_id", on_failure = "block" }` on a kind: its tasks run one
//! at a time per group, in the order their enqueues commit (see `backstop_core::group`).

use backstop_core::group::{OnFailure, Ordering};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOrdering {
    /// A JSON pointer into the payload naming the group.
    group: Option<String>,
    /// `block` (the default) or `skip`.
    on_failure: Option<String>,
}

/// Checks a kind's `ordering`; an error is the field (under `ordering.`) and what to fix.
pub(super) fn ordering(raw: RawOrdering) -> Result<Ordering, (&'static str, String)> {
    if let Some(p) = &raw.group
        && !p.starts_with('/')
    {
        return Err((
            "group",
            format!(
                "{p:?} is not a JSON pointer into the payload: write it as \"/order_id\" (or leave it out and give a group at enqueue)"
            ),
        ));
    }
    let on_failure = match raw.on_failure.as_deref() {
        None => OnFailure::default(),
        Some(s) => s.parse().map_err(|m| ("on_failure", m))?,
    };
    Ok(Ordering {
        group: raw.group,
        on_failure,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::assert_refused;

    #[test]
    fn a_kind_reads_its_ordering() {
        let c = crate::config::Config::parse(
            "[kinds.a]\nurl = \"http://x\"\nordering = { group = \"/order_id\", on_failure = \"skip\" }",
            "t.toml",
        )
        .unwrap();
        let o = c.kinds[0].ordering.clone().expect("ordering");
        assert_eq!(o.group.as_deref(), Some("/order_id"));
        assert_eq!(o.on_failure, backstop_core::group::OnFailure::Skip);
    }

    #[test]
    fn bad_ordering_names_its_field() {
        assert_refused(&[
            (
                "[kinds.a]\nurl = \"http://x\"\nordering = { group = \"order_id\" }",
                "kinds.\"a\".ordering.group: \"order_id\" is not a JSON pointer",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nordering = { on_failure = \"retry\" }",
                "kinds.\"a\".ordering.on_failure: on_failure \"retry\" is not one of",
            ),
            (
                "[kinds.a]\nurl = \"http://x\"\nordering = { groop = \"/x\" }",
                "unknown field `groop`",
            ),
        ]);
    }
}
