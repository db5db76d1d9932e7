//! The minimal rescuer: puts tasks whose lease expired (their worker died) back to pending,
//! and compensates pending tasks past `expires_at`. The full reconciler builds on this. It
//! runs only while this process leads (see `leader`), and stops between batches when
//! leadership is lost.

use backstop_core::store::{ExpireParams, RescueParams};
use backstop_core::{Clock, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

const BATCH: usize = 1000;

pub(crate) async fn run(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    every: Duration,
    mut leading: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if !crate::leader::wait_to_lead(&mut leading, &mut stop).await {
            return;
        }
        pass(&*store, &*clock, &leading).await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One pass: rescue and expire until nothing is left (bounded batches), or until this
/// process no longer leads.
pub(crate) async fn pass(store: &dyn Store, clock: &dyn Clock, leading: &watch::Receiver<bool>) {
    while *leading.borrow() {
        match store
            .rescue(RescueParams {
                now: clock.now(),
                limit: BATCH,
            })
            .await
        {
            Ok(rescued) => {
                for r in &rescued {
                    crate::metrics::rescued(&r.kind);
                    tracing::warn!(task = %r.id, kind = %r.kind, to = %r.status,
                        held_by = r.lease_owner.as_deref().unwrap_or("unknown"),
                        "rescued a task whose lease expired");
                }
                if rescued.len() < BATCH {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "lease rescue failed");
                break;
            }
        }
    }
    while *leading.borrow() {
        match store
            .expire(ExpireParams {
                now: clock.now(),
                limit: BATCH,
            })
            .await
        {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(count = n, "compensated expired tasks");
                }
                if (n as usize) < BATCH {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "expiring tasks failed");
                break;
            }
        }
    }
}
