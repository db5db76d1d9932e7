//! How the singleton duties (reconciler, retention) wait for this process to lead. The
//! leader loop (`leader.rs`) announces the standing on a watch channel; the duties only read
//! it, so they depend on this, not on the loop.

use tokio::sync::watch;

/// Waits until this process leads or `stop`; false on stop.
pub(crate) async fn wait_to_lead(
    leading: &mut watch::Receiver<bool>,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        r = leading.wait_for(|l| *l) => r.is_ok(),
        _ = stop.changed() => false,
    }
}
