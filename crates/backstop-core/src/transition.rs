//! The state machine of DESIGN.md, as one pure function. Every status change in every store
//! is one of these transitions.

use crate::task::Status;

/// What happens to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// A dispatcher leases a due task.
    Claim,
    /// The attempt succeeded.
    Succeed,
    /// A transient failure with attempts left: back to pending with backoff.
    Retry,
    /// A permanent failure, or attempts spent: the dead letter.
    Fail,
    /// The business no longer wants it, or it expired while leased: compensated.
    Skip,
    /// The lease expired (worker crash); `attempts_left` picks pending or failed.
    Rescue { attempts_left: bool },
    /// A worker gave the lease of a running attempt back unfinished (graceful shutdown);
    /// `attempts_left` picks pending or failed, as for a rescue. (A held task has no attempt
    /// to give back: its release changes no status.)
    Release { attempts_left: bool },
    /// A person or rule retries a dead letter or a compensated task.
    ManualRetry,
    /// A person resolves a dead letter with a reason.
    Resolve,
    /// A pending task is canceled.
    Cancel,
    /// A pending task passed `expires_at` before it ran.
    Expire,
    /// Statement reconciliation found a `succeeded` task the provider has no record of: it
    /// runs again (the "false success" case).
    Redrive,
}

/// A transition that the state machine does not allow from the given status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot {transition:?} a task that is {from}")]
pub struct InvalidTransition {
    pub from: Status,
    pub transition: Transition,
}

/// The status after `t` is applied to a task in status `from`, or why it cannot be.
pub fn transition(from: Status, t: Transition) -> Result<Status, InvalidTransition> {
    use Status::*;
    use Transition as T;
    let to = match (from, t) {
        (Pending, T::Claim) => Running,
        (Running, T::Succeed) => Succeeded,
        (Running, T::Retry) => Pending,
        (Running, T::Fail) => Failed,
        (Running, T::Skip) => Compensated,
        (Running, T::Rescue { attempts_left }) => {
            if attempts_left {
                Pending
            } else {
                Failed
            }
        }
        (Running, T::Release { attempts_left }) => {
            if attempts_left {
                Pending
            } else {
                Failed
            }
        }
        (Failed | Compensated, T::ManualRetry) => Pending,
        (Failed, T::Resolve) => Compensated,
        (Pending, T::Cancel | T::Expire) => Compensated,
        (Succeeded, T::Redrive) => Pending,
        _ => {
            return Err(InvalidTransition {
                from,
                transition: t,
            });
        }
    };
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;
    use Transition as T;

    const ALL_T: [Transition; 14] = [
        T::Claim,
        T::Succeed,
        T::Retry,
        T::Fail,
        T::Skip,
        T::Rescue {
            attempts_left: true,
        },
        T::Rescue {
            attempts_left: false,
        },
        T::Release {
            attempts_left: true,
        },
        T::Release {
            attempts_left: false,
        },
        T::ManualRetry,
        T::Resolve,
        T::Cancel,
        T::Expire,
        T::Redrive,
    ];

    #[test]
    fn allowed_transitions_match_the_design() {
        let allowed = [
            (Pending, T::Claim, Running),
            (Running, T::Succeed, Succeeded),
            (Running, T::Retry, Pending),
            (Running, T::Fail, Failed),
            (Running, T::Skip, Compensated),
            (
                Running,
                T::Rescue {
                    attempts_left: true,
                },
                Pending,
            ),
            (
                Running,
                T::Rescue {
                    attempts_left: false,
                },
                Failed,
            ),
            (
                Running,
                T::Release {
                    attempts_left: true,
                },
                Pending,
            ),
            (
                Running,
                T::Release {
                    attempts_left: false,
                },
                Failed,
            ),
            (Failed, T::ManualRetry, Pending),
            (Compensated, T::ManualRetry, Pending),
            (Failed, T::Resolve, Compensated),
            (Pending, T::Cancel, Compensated),
            (Pending, T::Expire, Compensated),
            (Succeeded, T::Redrive, Pending),
        ];
        for (from, t, to) in allowed {
            assert_eq!(transition(from, t), Ok(to), "{from} {t:?}");
        }
        // Everything else is refused.
        let mut refused = 0;
        for from in Status::ALL {
            for t in ALL_T {
                if !allowed.iter().any(|(f, tt, _)| *f == from && *tt == t) {
                    assert_eq!(
                        transition(from, t),
                        Err(InvalidTransition {
                            from,
                            transition: t
                        })
                    );
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, 5 * 14 - allowed.len());
    }

    #[test]
    fn succeeded_is_final_except_for_a_statement_redrive() {
        for t in ALL_T.into_iter().filter(|t| *t != T::Redrive) {
            assert!(transition(Succeeded, t).is_err(), "{t:?}");
        }
    }
}
