//! Writes attempt outcomes in batches: whatever has finished since the last write goes in
//! one transaction. A failed write is retried, never dropped while the engine runs; after
//! shutdown it is retried for the grace period only. Either way, outcomes that never reach
//! the ledger leave their leases to expire, and the tasks are rescued and run again
//! (at-least-once, same idempotency key).
//!
//! A dead letter is announced (log and `task.failed` alert) only once its outcome is written
//! and counted: an outcome rejected as stale (its lease was lost and the task rescued) made
//! no dead letter, whatever the attempt saw.

use crate::engine::Shared;
use backstop_core::store::{CompleteParams, Completion, LeaseRef};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// An attempt's outcome on its way to the ledger.
pub(crate) struct Finished {
    pub(crate) completion: Completion,
    /// Set when the outcome ends the task `failed`: announced once it is written.
    pub(crate) dead_letter: Option<DeadLetter>,
}

/// What a new dead letter's announcement says.
pub(crate) struct DeadLetter {
    pub(crate) kind: String,
    pub(crate) error: String,
    pub(crate) reason: String,
}

pub(crate) async fn run(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Finished>,
    batch: usize,
    stop: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut give_up_at: Option<Instant> = None;
    let mut buf = Vec::with_capacity(batch);
    while rx.recv_many(&mut buf, batch).await > 0 {
        let mut wait = Duration::from_millis(50);
        loop {
            let p = CompleteParams {
                completions: buf.iter().map(|f| f.completion.clone()).collect(),
                now: shared.clock.now(),
            };
            match shared.store.complete(p).await {
                Ok(r) => {
                    crate::metrics::stale(r.stale.len());
                    for s in &r.stale {
                        tracing::warn!(task = %s.id, epoch = s.epoch, "completion rejected: the lease was lost");
                    }
                    announce(&shared, &buf, &r.stale);
                    break;
                }
                Err(e) => {
                    if *stop.borrow() {
                        let deadline = *give_up_at.get_or_insert_with(|| Instant::now() + grace);
                        if Instant::now() >= deadline {
                            tracing::error!(error = %e, count = buf.len(), "shutting down with outcomes unwritten; their leases will expire and the tasks will be rescued");
                            break;
                        }
                    }
                    tracing::error!(error = %e, count = buf.len(), "writing completions failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        buf.clear();
    }
}

/// Announces the dead letters among outcomes just written, except those rejected as stale.
fn announce(shared: &Shared, written: &[Finished], stale: &[LeaseRef]) {
    let stale: HashSet<&LeaseRef> = stale.iter().collect();
    for f in written {
        let Some(d) = &f.dead_letter else { continue };
        let lease = &f.completion.lease;
        if stale.contains(lease) {
            continue;
        }
        tracing::warn!(
            task = %lease.id, kind = %d.kind, error = %d.error, reason = %d.reason,
            "dead letter: the task failed and waits for a person (retry or resolve)"
        );
        crate::alerts::dead_letter(&shared.alerts, &d.kind, lease.id, &d.error, &d.reason);
    }
}
