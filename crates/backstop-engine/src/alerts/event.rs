//! What an alert is about.

use backstop_core::TaskId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The events a sink may subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AlertName {
    /// A task became a dead letter.
    #[serde(rename = "task.failed")]
    TaskFailed,
    /// A task's lease expired (its worker died) and it was put back to pending.
    #[serde(rename = "task.rescued")]
    TaskRescued,
    /// The reconciler has not passed for longer than the threshold.
    #[serde(rename = "reconciler.stalled")]
    ReconcilerStalled,
    /// Pending tasks of a kind over the threshold.
    #[serde(rename = "backlog")]
    Backlog,
    /// A kind's share of failing attempts over the threshold in a window.
    #[serde(rename = "failure_rate")]
    FailureRate,
    /// A statement reconciliation found breaks.
    #[serde(rename = "statement.breaks")]
    StatementBreaks,
    /// The conservation audit found a task whose timeline disagrees with its status.
    #[serde(rename = "audit.drift")]
    AuditDrift,
    /// A broker bridge has been disconnected (or refused by its broker) past the threshold.
    #[serde(rename = "bridge.down")]
    BridgeDown,
    /// A bridge's broker holds nearly as many unacknowledged deliveries as it allows
    /// (JetStream's `MaxAckPending`), past which it silently stops delivering.
    #[serde(rename = "bridge.ack_pending")]
    BridgeAckPending,
    /// A schedule's instants passed while no planner ran (one per outage, not per instant).
    #[serde(rename = "schedule.missed")]
    ScheduleMissed,
    /// A tick was still not started its schedule's `late_after` after it was due (one per
    /// tick).
    #[serde(rename = "tick.late")]
    TickLate,
    /// A tick's attempt ran longer than its schedule's `max_runtime` (one per tick while it
    /// runs).
    #[serde(rename = "tick.overrun")]
    TickOverrun,
    /// No planner planned an instant of a schedule that is not paused: every process's planner
    /// is stopped or stuck (raised by the reconciler, one per silence).
    #[serde(rename = "schedule.silent")]
    ScheduleSilent,
    /// A task of an ordering group failed and holds its group (`on_failure = "block"`): the
    /// group's later tasks wait for a person (one per failure of a group's head).
    #[serde(rename = "group.blocked")]
    GroupBlocked,
    /// A kind's circuit breaker tripped: its target failed past the threshold, and nothing is
    /// sent to it until the cool-down ends and a probe succeeds (one per outage).
    #[serde(rename = "target.unhealthy")]
    TargetUnhealthy,
    /// A probe succeeded and the breaker closed: the kind's dispatch resumed.
    #[serde(rename = "target.recovered")]
    TargetRecovered,
}

impl AlertName {
    /// Every alert event.
    pub const ALL: [AlertName; 16] = [
        AlertName::TaskFailed,
        AlertName::TaskRescued,
        AlertName::ReconcilerStalled,
        AlertName::Backlog,
        AlertName::FailureRate,
        AlertName::StatementBreaks,
        AlertName::AuditDrift,
        AlertName::BridgeDown,
        AlertName::BridgeAckPending,
        AlertName::ScheduleMissed,
        AlertName::TickLate,
        AlertName::TickOverrun,
        AlertName::ScheduleSilent,
        AlertName::GroupBlocked,
        AlertName::TargetUnhealthy,
        AlertName::TargetRecovered,
    ];

    /// The configured and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertName::TaskFailed => "task.failed",
            AlertName::TaskRescued => "task.rescued",
            AlertName::ReconcilerStalled => "reconciler.stalled",
            AlertName::Backlog => "backlog",
            AlertName::FailureRate => "failure_rate",
            AlertName::StatementBreaks => "statement.breaks",
            AlertName::AuditDrift => "audit.drift",
            AlertName::BridgeDown => "bridge.down",
            AlertName::BridgeAckPending => "bridge.ack_pending",
            AlertName::ScheduleMissed => "schedule.missed",
            AlertName::TickLate => "tick.late",
            AlertName::TickOverrun => "tick.overrun",
            AlertName::ScheduleSilent => "schedule.silent",
            AlertName::GroupBlocked => "group.blocked",
            AlertName::TargetUnhealthy => "target.unhealthy",
            AlertName::TargetRecovered => "target.recovered",
        }
    }
}

impl fmt::Display for AlertName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown alert event name.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown alert event {0:?} (expected task.failed, task.rescued, reconciler.stalled, backlog, failure_rate, statement.breaks, audit.drift, bridge.down, bridge.ack_pending, schedule.missed, tick.late, tick.overrun, schedule.silent, group.blocked, target.unhealthy or target.recovered)"
)]
pub struct UnknownAlert(pub String);

impl FromStr for AlertName {
    type Err = UnknownAlert;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AlertName::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownAlert(s.into()))
    }
}

/// One occurrence, before aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertEvent {
    pub name: AlertName,
    pub kind: Option<String>,
    pub task: Option<TaskId>,
    /// What happened, in plain words (the first of a window is shown).
    pub detail: String,
}

impl AlertEvent {
    /// An event with no kind or task.
    pub fn new(name: AlertName, detail: impl Into<String>) -> Self {
        AlertEvent {
            name,
            kind: None,
            task: None,
            detail: detail.into(),
        }
    }
}
