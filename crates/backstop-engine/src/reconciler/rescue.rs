//! The reconciler's first two duties: rescue running tasks whose lease expired (their worker
//! died) and compensate pending tasks past `expires_at`, in bounded batches until none is
//! left or leadership is lost.

use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::AlertHub;
use backstop_core::store::Rescue;
use backstop_core::store::{ExpireParams, RescueParams};
use backstop_core::{Clock, KindConfig, Status, StoreError};
use std::collections::HashMap;
use tokio::sync::watch;

const BATCH: usize = 1000;

/// The leader's lease duties, with what they use.
pub(crate) struct Duty<'a> {
    pub(crate) store: &'a dyn Rescue,
    pub(crate) clock: &'a dyn Clock,
    pub(crate) alerts: &'a AlertHub,
    /// The kinds' configurations: whether a dead letter holds its ordering group.
    pub(crate) kinds: &'a HashMap<String, KindConfig>,
    pub(crate) leading: &'a watch::Receiver<bool>,
}

impl Duty<'_> {
    pub(crate) async fn rescue(&self) -> Result<u64, StoreError> {
        let leading = self.leading;
        let mut total = 0;
        while *leading.borrow() {
            let rescued = self
                .store
                .rescue(RescueParams {
                    now: self.clock.now(),
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
                self.alerts.raise(a);
                // A worker that died on the last attempt leaves a dead letter that holds its
                // group, as a failed attempt would.
                let blocks = self
                    .kinds
                    .get(&r.kind)
                    .and_then(|k| k.blocked_group(r.group.as_deref()));
                if r.status == Status::Failed
                    && let Some(group) = blocks
                {
                    let error = "the last attempt's lease expired";
                    self.alerts.group_blocked(&r.kind, group, r.id, error);
                }
            }
            total += rescued.len() as u64;
            if rescued.len() < BATCH {
                break;
            }
        }
        Ok(total)
    }

    pub(crate) async fn expire(&self) -> Result<u64, StoreError> {
        let leading = self.leading;
        let mut total = 0;
        while *leading.borrow() {
            let n = self
                .store
                .expire(ExpireParams {
                    now: self.clock.now(),
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
}
