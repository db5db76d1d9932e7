//! Extends the leases of long attempts, so that only a dead process loses its tasks.

use crate::inflight::InFlight;
use backstop_core::Clock;
use backstop_core::clock::add;
use backstop_core::store::HeartbeatParams;
use backstop_core::store::Leases;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub(crate) async fn run(
    store: Arc<dyn Leases>,
    clock: Arc<dyn Clock>,
    inflight: Arc<InFlight>,
    owner: String,
    tick: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.changed() => return,
        }
        let started = Instant::now();
        for (lease, leases) in inflight.due_for_heartbeat(started) {
            let now = clock.now();
            let p = HeartbeatParams {
                owner: owner.clone(),
                leases: leases.clone(),
                lease_until: add(now, lease),
                now,
            };
            match store.heartbeat(p).await {
                Ok(lost) => {
                    inflight.extended(&leases, started);
                    for l in lost {
                        tracing::warn!(task = %l.id, epoch = l.epoch, "lease lost while running; its completion will be rejected");
                    }
                }
                Err(e) => tracing::error!(error = %e, "heartbeat failed"),
            }
        }
    }
}
