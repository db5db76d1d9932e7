//! The reconciler's first two duties: rescue running tasks whose lease expired (their worker
//! died) and compensate pending tasks past `expires_at`, in bounded batches until none is
//! left or leadership is lost.

use crate::alerts::{AlertEvent, AlertName};
use crate::engine::Shared;
use backstop_core::store::{ExpireParams, RescueParams};
use backstop_core::{Status, StoreError};
use tokio::sync::watch;

const BATCH: usize = 1000;

pub(crate) async fn rescue(
    shared: &Shared,
    leading: &watch::Receiver<bool>,
) -> Result<u64, StoreError> {
    let mut total = 0;
    while *leading.borrow() {
        let rescued = shared
            .store
            .rescue(RescueParams {
                now: shared.clock.now(),
                limit: BATCH,
            })
            .await?;
        for r in &rescued {
            crate::metrics::rescued(&r.kind);
            let held_by = r.lease_owner.as_deref().unwrap_or("unknown");
            tracing::warn!(task = %r.id, kind = %r.kind, to = %r.status, held_by,
                "rescued a task whose lease expired");
            let name = match r.status {
                Status::Failed => AlertName::TaskFailed,
                _ => AlertName::TaskRescued,
            };
            let mut a = AlertEvent::new(name, format!("lease expired; held by {held_by}"));
            a.kind = Some(r.kind.clone());
            a.task = Some(r.id);
            shared.alerts.raise(a);
        }
        total += rescued.len() as u64;
        if rescued.len() < BATCH {
            break;
        }
    }
    Ok(total)
}

pub(crate) async fn expire(
    shared: &Shared,
    leading: &watch::Receiver<bool>,
) -> Result<u64, StoreError> {
    let mut total = 0;
    while *leading.borrow() {
        let n = shared
            .store
            .expire(ExpireParams {
                now: shared.clock.now(),
                limit: BATCH,
            })
            .await?;
        if n > 0 {
            tracing::info!(count = n, "compensated expired tasks");
        }
        total += n;
        if (n as usize) < BATCH {
            break;
        }
    }
    Ok(total)
}
