//! The manual actions a person (or a rule) takes on a task, as every store records them: the
//! transition, the statuses it applies to, and the timeline event it leaves.

use crate::transition::Transition;

/// One manual action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManualAction {
    pub transition: Transition,
    /// The action's name in errors (`retry needs it to be …`).
    pub name: &'static str,
    /// The statuses it applies to, in words.
    pub expected: &'static str,
    /// The timeline event type it records.
    pub event: &'static str,
}

/// A `failed` or `compensated` task back to `pending`.
pub const RETRY: ManualAction = ManualAction {
    transition: Transition::ManualRetry,
    name: "retry",
    expected: "failed or compensated",
    event: "retried",
};

/// A `failed` task to `compensated`.
pub const RESOLVE: ManualAction = ManualAction {
    transition: Transition::Resolve,
    name: "resolve",
    expected: "failed",
    event: "resolved",
};

/// A `pending` task to `compensated`.
pub const CANCEL: ManualAction = ManualAction {
    transition: Transition::Cancel,
    name: "cancel",
    expected: "pending",
    event: "canceled",
};

/// A `succeeded` task back to `pending`, because the provider's statement has no record of it
/// (statement reconciliation's `--apply`).
pub const REDRIVE: ManualAction = ManualAction {
    transition: Transition::Redrive,
    name: "redrive",
    expected: "succeeded",
    event: "redriven",
};

impl ManualAction {
    /// Whether the task runs again: the attempt budget is renewed and the row's last attempt
    /// moves to the timeline table.
    pub fn runs_again(&self) -> bool {
        matches!(
            self.transition,
            Transition::ManualRetry | Transition::Redrive
        )
    }
}
