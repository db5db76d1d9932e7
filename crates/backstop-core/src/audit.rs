//! The conservation audit: does a task's timeline agree with its status? Pure rules, run by
//! the reconciler over pages of the ledger. Drift is reported, never fixed here: a ledger that
//! disagrees with itself needs a person to look.

use crate::event::{Event, EventType};
use crate::outcome::AttemptOutcome;
use crate::task::{Status, Task, TaskId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which rule a task breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftRule {
    /// `running` without a lease owner and expiry, so nobody would ever rescue it.
    RunningWithoutLease,
    /// A lease on a finished task (a `pending` task may be held: leased ahead, not started).
    LeaseOnIdleTask,
    /// `succeeded` whose last attempt did not succeed.
    SucceededWithoutSuccess,
    /// `failed` with neither a failing attempt nor a recorded reason.
    FailedWithoutCause,
    /// `compensated` with no reason.
    CompensatedWithoutReason,
    /// The attempt counter disagrees with the attempts on the timeline.
    AttemptsMismatch,
    /// The timeline does not start with the task's creation.
    MissingCreation,
    /// A held task (pending with a lease owner) without a lease expiry: nobody else could
    /// ever claim it.
    HeldWithoutExpiry,
    /// More attempts started than the task's budget allows.
    AttemptsOverBudget,
}

impl DriftRule {
    /// The name used in logs, alerts and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftRule::RunningWithoutLease => "running_without_lease",
            DriftRule::LeaseOnIdleTask => "lease_on_idle_task",
            DriftRule::SucceededWithoutSuccess => "succeeded_without_success",
            DriftRule::FailedWithoutCause => "failed_without_cause",
            DriftRule::CompensatedWithoutReason => "compensated_without_reason",
            DriftRule::AttemptsMismatch => "attempts_mismatch",
            DriftRule::MissingCreation => "missing_creation",
            DriftRule::HeldWithoutExpiry => "held_without_expiry",
            DriftRule::AttemptsOverBudget => "attempts_over_budget",
        }
    }
}

impl fmt::Display for DriftRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task that breaks one rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub id: TaskId,
    pub kind: String,
    pub rule: DriftRule,
    /// What was found, in plain words.
    pub detail: String,
}

/// Checks one task against its timeline (oldest first, as [`crate::store::Tasks::timeline`]
/// gives it).
pub fn audit(task: &Task, timeline: &[Event]) -> Vec<Drift> {
    let mut found = Vec::new();
    let mut drift = |rule: DriftRule, detail: String| {
        found.push(Drift {
            id: task.id,
            kind: task.kind.clone(),
            rule,
            detail,
        })
    };
    let leased = task.lease_owner.is_some() || task.lease_until.is_some();
    match task.status {
        Status::Running if task.lease_owner.is_none() || task.lease_until.is_none() => drift(
            DriftRule::RunningWithoutLease,
            "running, but no lease owner or lease expiry is recorded".into(),
        ),
        s if s.is_final() && leased => drift(
            DriftRule::LeaseOnIdleTask,
            format!(
                "{s}, but a lease is recorded (owner {})",
                task.lease_owner.as_deref().unwrap_or("none")
            ),
        ),
        Status::Pending if leased && task.lease_until.is_none() => drift(
            DriftRule::HeldWithoutExpiry,
            format!(
                "held by {}, but no lease expiry is recorded",
                task.lease_owner.as_deref().unwrap_or("none")
            ),
        ),
        _ => {}
    }
    // 0 is an outbox row not claimed yet: the kind's budget comes with its first claim.
    if task.max_attempts > 0 && task.attempts > task.max_attempts {
        drift(
            DriftRule::AttemptsOverBudget,
            format!(
                "{} attempts started, over the budget of {}",
                task.attempts, task.max_attempts
            ),
        );
    }
    if timeline.first().map(|e| e.kind) != Some(EventType::Created) {
        drift(
            DriftRule::MissingCreation,
            "the timeline does not begin with `created`".into(),
        );
    }
    let attempts: Vec<&Event> = timeline
        .iter()
        .filter(|e| e.kind == EventType::Attempt)
        .collect();
    let last = attempts.last().and_then(|e| e.outcome);
    match task.status {
        Status::Succeeded if last != Some(AttemptOutcome::Succeeded) => drift(
            DriftRule::SucceededWithoutSuccess,
            format!(
                "succeeded, but the last attempt's outcome is {}",
                last.map_or("missing".to_string(), |o| o.to_string())
            ),
        ),
        Status::Failed
            if task.reason.is_none()
                && !attempts.iter().any(|e| {
                    matches!(
                        e.outcome,
                        Some(AttemptOutcome::Failed | AttemptOutcome::LeaseExpired)
                    )
                }) =>
        {
            drift(
                DriftRule::FailedWithoutCause,
                "failed, with no failing attempt and no reason recorded".into(),
            )
        }
        Status::Compensated if task.reason.is_none() => drift(
            DriftRule::CompensatedWithoutReason,
            "compensated, with no reason recorded".into(),
        ),
        _ => {}
    }
    if attempts.len() as u64 != u64::from(task.attempts) {
        drift(
            DriftRule::AttemptsMismatch,
            format!(
                "the counter says {} attempts, the timeline records {}",
                task.attempts,
                attempts.len()
            ),
        );
    }
    found
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
