//! Writes attempt outcomes in batches: whatever has finished since the last write goes in
//! one transaction. A failed write is retried, never dropped while the engine runs; after
//! shutdown it is retried for the grace period only. Either way, outcomes that never reach
//! the ledger leave their leases to expire, and the tasks are rescued and run again
//! (at-least-once, same idempotency key).

use backstop_core::store::{CompleteParams, Completion};
use backstop_core::{Clock, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

pub(crate) async fn run(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mut rx: mpsc::Receiver<Completion>,
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
                completions: buf.clone(),
                now: clock.now(),
            };
            match store.complete(p).await {
                Ok(r) => {
                    crate::metrics::stale(r.stale.len());
                    for s in &r.stale {
                        tracing::warn!(task = %s.id, epoch = s.epoch, "completion rejected: the lease was lost");
                    }
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
