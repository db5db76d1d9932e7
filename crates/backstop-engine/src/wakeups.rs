//! Wake-ups from the store: work created by other processes (or by an application's outbox
//! insert) wakes this process's idle dispatchers and long-polling lease requests at once,
//! instead of at their next poll. Only a hint: polling every `poll_interval` stays the
//! guarantee, so a lost watch only slows pick-up down. Its health is in the metrics
//! (`backstop_wakeup_listener_connected`, `…_reconnects_total`, the time of the last
//! notification) and in the store's logs.

use crate::engine::Shared;
use crate::metrics;
use backstop_core::store::{WorkSignal, WorkSink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::task::JoinHandle;

/// Starts the store's work watch, if it has one; abort the handle to stop it.
pub(crate) fn spawn(shared: &Arc<Shared>) -> Option<JoinHandle<()>> {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let connected_before = AtomicBool::new(false);
    let sink: WorkSink = Arc::new(move |signal| {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        match signal {
            WorkSignal::Connected => {
                if connected_before.swap(true, Ordering::Relaxed) {
                    metrics::wakeup_reconnected();
                }
                metrics::wakeup_connected(true);
                // Anything created while it was away went unannounced.
                wake(&shared, &[]);
            }
            WorkSignal::Disconnected { error } => {
                metrics::wakeup_connected(false);
                tracing::debug!(error = %error, "wake-up listener disconnected");
            }
            WorkSignal::Work { kinds } => {
                metrics::wakeup_notified();
                wake(&shared, &kinds);
            }
        }
    });
    let watch = shared.store.watch_work(sink)?;
    metrics::wakeup_connected(false);
    Some(tokio::spawn(watch))
}

/// Wakes the dispatchers of `kinds` (every kind when empty), and lease requests when a pull
/// kind is among them.
fn wake(shared: &Shared, kinds: &[String]) {
    let mut pull = false;
    if kinds.is_empty() {
        for k in shared.kinds.values() {
            k.wake.notify_one();
        }
        pull = shared.configs.len() > shared.kinds.len();
    }
    for name in kinds {
        match shared.kinds.get(name) {
            Some(k) => k.wake.notify_one(),
            None => pull |= shared.configs.contains_key(name),
        }
    }
    if pull {
        shared.pull_wake.notify_waiters();
    }
}
