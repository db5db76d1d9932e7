//! Retention: the leader deletes finished tasks that are older than the policy keeps them,
//! with their timelines, in bounded batches. `failed` tasks are never deleted: the store's
//! parameter ([`Prunable`]) cannot name them.

use backstop_core::Clock;
use backstop_core::duration::format_duration;
use backstop_core::store::{Prunable, PruneParams, Retention};
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Most tasks one prune deletes.
const BATCH: usize = 1000;

/// How long finished tasks are kept after they last changed; `None` keeps them forever (the
/// default). There is no setting for `failed`: dead letters stay until someone acts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// How long `succeeded` tasks are kept.
    pub succeeded: Option<Duration>,
    /// How long `compensated` tasks are kept.
    pub compensated: Option<Duration>,
}

impl RetentionPolicy {
    /// How long tasks of `status` are kept, if not forever.
    pub fn keep(&self, status: Prunable) -> Option<Duration> {
        match status {
            Prunable::Succeeded => self.succeeded,
            Prunable::Compensated => self.compensated,
        }
    }

    /// Whether everything is kept forever.
    pub fn keeps_everything(&self) -> bool {
        Prunable::ALL.iter().all(|s| self.keep(*s).is_none())
    }
}

/// Prunes every `every` while this process leads, until `stop`.
pub(crate) async fn run(
    store: Arc<dyn Retention>,
    clock: Arc<dyn Clock>,
    policy: RetentionPolicy,
    every: Duration,
    mut leading: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    if policy.keeps_everything() {
        return;
    }
    loop {
        if !crate::leading::wait_to_lead(&mut leading, &mut stop).await {
            return;
        }
        pass(&*store, &*clock, &policy, &leading, &stop).await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One pass: each prunable status in batches until nothing old is left, this process no
/// longer leads, or it is stopping.
pub(crate) async fn pass(
    store: &dyn Retention,
    clock: &dyn Clock,
    policy: &RetentionPolicy,
    leading: &watch::Receiver<bool>,
    stop: &watch::Receiver<bool>,
) {
    for status in Prunable::ALL {
        let Some(keep) = policy.keep(status) else {
            continue;
        };
        let before = cutoff(clock.now(), keep);
        let mut pruned = 0;
        while *leading.borrow() && !*stop.borrow() {
            match store
                .prune(PruneParams {
                    status,
                    before,
                    limit: BATCH,
                })
                .await
            {
                Ok(n) => {
                    pruned += n;
                    if (n as usize) < BATCH {
                        break;
                    }
                    // Let the hot path's writes in between batches.
                    tokio::task::yield_now().await;
                }
                Err(e) => {
                    tracing::error!(error = %e, status = %status.status(), "retention failed");
                    break;
                }
            }
        }
        if pruned > 0 {
            tracing::info!(count = pruned, status = %status.status(),
                older_than = %format_duration(keep), "pruned finished tasks");
        }
    }
}

/// `now - keep`, or the beginning of time when that is out of range.
fn cutoff(now: Timestamp, keep: Duration) -> Timestamp {
    SignedDuration::try_from(keep)
        .ok()
        .and_then(|k| now.checked_sub(k).ok())
        .unwrap_or(Timestamp::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_now_minus_the_retention() {
        let now: Timestamp = "2030-01-31T00:00:00Z".parse().unwrap();
        assert_eq!(
            cutoff(now, Duration::from_secs(30 * 86_400)),
            "2030-01-01T00:00:00Z".parse().unwrap()
        );
        assert_eq!(cutoff(now, Duration::MAX), Timestamp::MIN);
        let p = RetentionPolicy {
            succeeded: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        assert_eq!(p.keep(Prunable::Succeeded), Some(Duration::from_secs(1)));
        assert_eq!(p.keep(Prunable::Compensated), None);
        assert!(!p.keeps_everything());
        assert!(RetentionPolicy::default().keeps_everything());
    }
}
