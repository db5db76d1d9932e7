//! Writes attempt outcomes in batches: whatever has finished since the last write goes in
//! one transaction. A failed write is retried, never dropped; if the process dies first,
//! the leases expire and the tasks are rescued (at-least-once, same idempotency key).

use backstop_core::store::{CompleteParams, Completion};
use backstop_core::{Clock, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub(crate) async fn run(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mut rx: mpsc::Receiver<Completion>,
    batch: usize,
) {
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
                    for s in &r.stale {
                        tracing::warn!(task = %s.id, epoch = s.epoch, "completion rejected: the lease was lost");
                    }
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, count = buf.len(), "writing completions failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        buf.clear();
    }
}
