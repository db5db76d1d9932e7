//! From an attempt's outcome to the task's next state: the one place where retry, dead
//! letter and compensation are chosen.

use crate::backoff::RetryPolicy;
use crate::clock::add;
use crate::outcome::{AttemptOutcome, Outcome};
use crate::task::Status;
use crate::transition::{Transition, transition};
use jiff::Timestamp;

/// What to write when an attempt ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub status: Status,
    /// When the task may run again (retries only).
    pub run_at: Option<Timestamp>,
    pub last_error: Option<String>,
    pub reason: Option<String>,
    pub attempt_outcome: AttemptOutcome,
}

/// Decides the next state of a running task whose attempt number `attempts` (1-based, the
/// one just made) ended with `outcome`. `unit` is a uniform random number in `[0, 1)` for
/// jitter.
pub fn decide(
    attempts: u32,
    max_attempts: u32,
    outcome: &Outcome,
    policy: &RetryPolicy,
    now: Timestamp,
    unit: f64,
) -> Decision {
    let status = |t| transition(Status::Running, t).expect("every outcome is legal from running");
    match outcome {
        Outcome::Success => Decision {
            status: status(Transition::Succeed),
            run_at: None,
            last_error: None,
            reason: None,
            attempt_outcome: AttemptOutcome::Succeeded,
        },
        Outcome::Retry { error, after } if attempts < max_attempts => {
            let wait = match after {
                Some(d) => policy.bounded(*d),
                None => policy.delay(attempts, unit),
            };
            Decision {
                status: status(Transition::Retry),
                run_at: Some(add(now, wait)),
                last_error: Some(error.clone()),
                reason: None,
                attempt_outcome: AttemptOutcome::Retry,
            }
        }
        Outcome::Retry { error, .. } => Decision {
            status: status(Transition::Fail),
            run_at: None,
            last_error: Some(error.clone()),
            reason: Some(format!("attempts exhausted ({attempts} of {max_attempts})")),
            attempt_outcome: AttemptOutcome::Failed,
        },
        Outcome::Fail { error } => Decision {
            status: status(Transition::Fail),
            run_at: None,
            last_error: Some(error.clone()),
            reason: Some("permanent error".into()),
            attempt_outcome: AttemptOutcome::Failed,
        },
        // The engine suspends at shutdown without asking here; a suspension that reaches the
        // decision is an ordinary attempt that ended early.
        Outcome::Suspend => decide(
            attempts,
            max_attempts,
            &Outcome::Retry {
                error: "suspended outside a shutdown".into(),
                after: Some(std::time::Duration::ZERO),
            },
            policy,
            now,
            unit,
        ),
        Outcome::Skip { reason } => Decision {
            status: status(Transition::Skip),
            run_at: None,
            last_error: None,
            reason: Some(reason.clone()),
            attempt_outcome: AttemptOutcome::Skipped,
        },
    }
}

/// The decision for a task leased after its `expires_at`: compensated, never run.
pub fn expired() -> Decision {
    Decision {
        status: transition(Status::Running, Transition::Skip).expect("legal"),
        run_at: None,
        last_error: None,
        reason: Some("expired".into()),
        attempt_outcome: AttemptOutcome::Expired,
    }
}

/// The decision for a task whose guarded entity is in a state where it no longer makes sense
/// ([`crate::requires`]): compensated with `reason`, nothing sent.
pub fn not_wanted(reason: String) -> Decision {
    Decision {
        status: transition(Status::Running, Transition::Skip).expect("legal"),
        run_at: None,
        last_error: None,
        reason: Some(reason),
        attempt_outcome: AttemptOutcome::Skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn transient_with_attempts_left_retries_with_backoff() {
        let p = RetryPolicy::Schedule(vec![Duration::from_secs(5)]);
        let d = decide(1, 3, &Outcome::retry("503"), &p, now(), 0.5);
        assert_eq!(d.status, Status::Pending);
        assert_eq!(d.run_at, Some(add(now(), Duration::from_secs(5))));
        assert_eq!(d.attempt_outcome, AttemptOutcome::Retry);
    }

    #[test]
    fn transient_on_the_last_attempt_dead_letters() {
        let d = decide(
            3,
            3,
            &Outcome::retry("503"),
            &RetryPolicy::default(),
            now(),
            0.5,
        );
        assert_eq!(d.status, Status::Failed);
        assert_eq!(d.last_error.as_deref(), Some("503"));
    }

    #[test]
    fn permanent_fails_now_and_skip_compensates() {
        let p = RetryPolicy::default();
        assert_eq!(
            decide(1, 8, &Outcome::fail("400"), &p, now(), 0.5).status,
            Status::Failed
        );
        let d = decide(1, 8, &Outcome::skip("order closed"), &p, now(), 0.5);
        assert_eq!(d.status, Status::Compensated);
        assert_eq!(d.reason.as_deref(), Some("order closed"));
    }

    #[test]
    fn retry_after_is_honoured_within_the_cap() {
        let p = RetryPolicy::default();
        let o = Outcome::Retry {
            error: "429".into(),
            after: Some(Duration::from_secs(3600)),
        };
        let d = decide(1, 8, &o, &p, now(), 0.5);
        assert_eq!(d.run_at, Some(add(now(), Duration::from_secs(300))));
    }
}
