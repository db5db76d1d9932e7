//! Ordering per business key: the tasks of one group of one kind run one at a time, in the
//! order their enqueues committed.
//!
//! How the ledger keeps it (every store the same way; PostgreSQL and MySQL/MariaDB number
//! rows in an insert trigger so that an outbox `INSERT` gets it too, SQLite in its code, see
//! docs/ordering.md):
//!
//! - **A sequence per group, assigned at commit.** A grouped task takes the next number of its
//!   `(kind, group)` from a row that its transaction locks until it commits, so producers of one
//!   group in concurrent transactions queue on that row: numbers follow commit order, and a
//!   rolled-back enqueue takes its number back (no gap, no reorder).
//! - **Open tasks block.** A grouped task is *open* while `pending` or `running`, and while
//!   `failed` unless its kind says `on_failure = "skip"` (the claim writes the kind's choice on
//!   the row). Only a group's first open task may be claimed.
//! - **Parked, not scanned.** A task enqueued behind an open task is stored **parked**: still
//!   `pending`, its `run_at` set to [`PARKED_RUN_AT`] (its own kept aside), so claims, the
//!   due count and the overdue check pass over it through the index they already use. A
//!   million tasks waiting in group A cost a claim of group B nothing.
//! - **Promotion on every end.** Whenever a grouped task stops being open (succeeded,
//!   compensated, failed when skipping), the same transaction unparks its group's first open
//!   task, if that one is parked. Nothing else is kept per group, so millions of groups need
//!   no cleanup.

use jiff::Timestamp;

/// The `run_at` of a parked task: far enough that no clock reaches it, and within what every
/// backend's column and `jiff` can hold.
/// 9999-01-01T00:00:00Z.
pub const PARKED_RUN_AT: Timestamp = Timestamp::constant(253_370_764_800, 0);

/// Longest group name accepted, in bytes (UTF-8).
pub const MAX_GROUP_BYTES: usize = 512;

/// What a failed task does to the rest of its group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// The group waits until the failed task is retried and succeeds, or is resolved.
    #[default]
    Block,
    /// The failed task stays failed (a dead letter as ever) and the group goes on.
    Skip,
}

impl OnFailure {
    /// The name used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Block => "block",
            OnFailure::Skip => "skip",
        }
    }
}

impl std::str::FromStr for OnFailure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "block" => Ok(OnFailure::Block),
            "skip" => Ok(OnFailure::Skip),
            other => Err(format!(
                "on_failure {other:?} is not one of \"block\" or \"skip\""
            )),
        }
    }
}

/// A kind's ordering: where its tasks' group comes from and what a failure does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ordering {
    /// A JSON pointer into the payload (`/order_id`) naming the group; `None`: only a group
    /// given at enqueue orders a task.
    pub group: Option<String>,
    /// What a failed task does to its group.
    pub on_failure: OnFailure,
}

/// A group name that cannot be stored.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadGroup {
    /// Empty.
    #[error("a group is an empty string")]
    Empty,
    /// Longer than [`MAX_GROUP_BYTES`].
    #[error("a group is {0} bytes long; the most is {MAX_GROUP_BYTES}")]
    TooLong(usize),
    /// The payload's value at the kind's pointer is not a string or an integer.
    #[error("the payload's {pointer} is {found}, not a string or an integer")]
    NotAString {
        /// The kind's pointer.
        pointer: String,
        /// What was found there (`an object`, `missing` …).
        found: &'static str,
    },
}

/// Checks a group name given at enqueue.
pub fn check(group: &str) -> Result<(), BadGroup> {
    if group.is_empty() {
        return Err(BadGroup::Empty);
    }
    if group.len() > MAX_GROUP_BYTES {
        return Err(BadGroup::TooLong(group.len()));
    }
    Ok(())
}

/// The group a payload names at `pointer`: a string as it is, an integer in decimal (order
/// numbers are often numbers). Anything else, including a missing value, is an error: a task
/// of an ordered kind without its group would run out of order silently.
pub fn from_payload(payload: &serde_json::Value, pointer: &str) -> Result<String, BadGroup> {
    let group = crate::pointer::key_at(payload, pointer).map_err(|e| BadGroup::NotAString {
        pointer: e.pointer,
        found: e.found,
    })?;
    check(&group)?;
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_parked_instant_is_the_first_second_of_9999() {
        assert_eq!(PARKED_RUN_AT.to_string(), "9999-01-01T00:00:00Z");
    }

    #[test]
    fn groups_come_from_strings_and_integers_only() {
        let p = json!({"order_id": "A-1", "n": 1001, "f": 1.5, "o": {}, "z": null});
        assert_eq!(from_payload(&p, "/order_id").unwrap(), "A-1");
        assert_eq!(from_payload(&p, "/n").unwrap(), "1001");
        for (ptr, found) in [
            ("/f", "a fractional number"),
            ("/o", "an object"),
            ("/z", "null"),
            ("/nope", "missing"),
        ] {
            let e = from_payload(&p, ptr).unwrap_err();
            assert_eq!(
                e,
                BadGroup::NotAString {
                    pointer: ptr.into(),
                    found
                }
            );
            assert!(e.to_string().contains(ptr), "{e}");
        }
    }

    #[test]
    fn a_group_is_at_most_512_bytes() {
        assert!(check(&"x".repeat(512)).is_ok());
        assert_eq!(check(&"x".repeat(513)), Err(BadGroup::TooLong(513)));
        assert_eq!(check(""), Err(BadGroup::Empty));
        let long = json!({"g": "é".repeat(257)});
        assert_eq!(from_payload(&long, "/g"), Err(BadGroup::TooLong(514)));
    }

    #[test]
    fn on_failure_reads_its_two_names() {
        assert_eq!("block".parse::<OnFailure>(), Ok(OnFailure::Block));
        assert_eq!("skip".parse::<OnFailure>(), Ok(OnFailure::Skip));
        assert!(
            "retry"
                .parse::<OnFailure>()
                .unwrap_err()
                .contains("\"block\"")
        );
    }
}
