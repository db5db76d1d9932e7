//! Pausing kinds: the watch that keeps every kind's gate in this process in step with the
//! ledger's pause rows ([`watch`]), the breaker that trips and closes them from attempts'
//! outcomes ([`trips`]), and pausing and resuming by hand ([`manage`]).

pub(crate) mod manage;
pub(crate) mod trips;
pub(crate) mod watch;

pub use manage::{KindPauseError, KindPauseView};

/// The leadership lease a scope's probes are sent under: one process at a time probes.
pub(crate) fn probe_lease(scope: &str) -> String {
    format!("probe:{scope}")
}
