//! What a handler says about one attempt. Outcomes are types, never strings.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The result of one attempt, as a handler (or a target's response) classifies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done; the task succeeds.
    Success,
    /// Transient failure: try again after the policy's backoff, or after `after` when given
    /// (bounded by the policy's cap).
    Retry {
        error: String,
        after: Option<Duration>,
    },
    /// Permanent business error: dead-letter now and alert.
    Fail { error: String },
    /// The business no longer wants this: compensate with a reason, nothing executed.
    Skip { reason: String },
    /// A resumable handler stopped because the worker is shutting down, after saving its
    /// cursor (a checkpoint): the task goes back to pending at once and this attempt is not
    /// counted. Outside a shutdown it is a transient failure with no backoff (see
    /// [`crate::decide::decide`]), so a handler cannot suspend its way past its budget.
    Suspend,
}

impl Outcome {
    /// A transient failure with the policy's backoff.
    pub fn retry(error: impl Into<String>) -> Self {
        Outcome::Retry {
            error: error.into(),
            after: None,
        }
    }
    /// A permanent failure.
    pub fn fail(error: impl Into<String>) -> Self {
        Outcome::Fail {
            error: error.into(),
        }
    }
    /// A skip with its reason.
    pub fn skip(reason: impl Into<String>) -> Self {
        Outcome::Skip {
            reason: reason.into(),
        }
    }
}

/// One finished attempt: the outcome plus the facts worth recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptReport {
    pub outcome: Outcome,
    /// The target's HTTP status, for HTTP push.
    pub http_status: Option<u16>,
    /// What the target said about a successful attempt that the attempt's record keeps
    /// (a JetStream retry deduplicated, or stored again past the duplicate window).
    pub note: Option<String>,
}

impl From<Outcome> for AttemptReport {
    fn from(outcome: Outcome) -> Self {
        AttemptReport {
            outcome,
            http_status: None,
            note: None,
        }
    }
}

/// How an attempt ended, as recorded on the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    Succeeded,
    /// Transient failure, retried later.
    Retry,
    /// Transient failure with no attempts left, or a permanent failure.
    Failed,
    /// The handler asked to skip.
    Skipped,
    /// Not run because `expires_at` had passed when it was leased.
    Expired,
    /// The worker's lease expired before it reported (a crash); rescued.
    LeaseExpired,
    /// The worker gave the lease back during shutdown.
    Interrupted,
}

impl AttemptOutcome {
    /// The name used in storage and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Succeeded => "succeeded",
            AttemptOutcome::Retry => "retry",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::Skipped => "skipped",
            AttemptOutcome::Expired => "expired",
            AttemptOutcome::LeaseExpired => "lease_expired",
            AttemptOutcome::Interrupted => "interrupted",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        use AttemptOutcome::*;
        [
            Succeeded,
            Retry,
            Failed,
            Skipped,
            Expired,
            LeaseExpired,
            Interrupted,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
