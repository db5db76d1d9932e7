//! Wake-ups from the store: work created by other processes (or by an application's outbox
//! insert) wakes this process's idle dispatchers and long-polling lease requests at once,
//! instead of at their next poll. Only a hint: polling every `poll_interval` stays the
//! guarantee, so a lost watch only slows pick-up down. Its health is in the metrics
//! (`backstop_wakeup_listener_connected`, `…_reconnects_total`, the time of the last
//! notification) and in the store's logs.

use crate::context::Kinds;
use crate::metrics;
use backstop_core::store::WorkWatch;
use backstop_core::store::{WorkSignal, WorkSink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::task::JoinHandle;

/// Starts the store's work watch, if it has one; abort the handle to stop it.
/// The registry is held weakly: the store keeps the sink, and must not keep the kinds alive.
pub(crate) fn spawn(store: &dyn WorkWatch, kinds: Weak<Kinds>) -> Option<JoinHandle<()>> {
    let connected_before = AtomicBool::new(false);
    let sink: WorkSink = Arc::new(move |signal| {
        let Some(kinds) = kinds.upgrade() else {
            return;
        };
        match signal {
            WorkSignal::Connected => {
                if connected_before.swap(true, Ordering::Relaxed) {
                    metrics::wakeup_reconnected();
                }
                metrics::wakeup_connected(true);
                // Anything created while it was away went unannounced.
                kinds.wake(&[]);
            }
            WorkSignal::Disconnected { error } => {
                metrics::wakeup_connected(false);
                tracing::debug!(error = %error, "wake-up listener disconnected");
            }
            WorkSignal::Work { kinds: names } => {
                metrics::wakeup_notified();
                kinds.wake(&names);
            }
        }
    });
    let watch = store.watch_work(sink)?;
    metrics::wakeup_connected(false);
    Some(tokio::spawn(watch))
}
