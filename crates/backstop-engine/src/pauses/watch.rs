//! The pause watch: reads every pause row each interval (and at once after this process wrote
//! one) and sets each kind's gate. A kind whose gate opens is woken, so its backlog starts at
//! once. A failed read leaves the gates as they were: a ledger that cannot be read is no
//! reason to start what was paused.

use crate::context::{Delivery, Kinds};
use backstop_core::Clock;
use backstop_core::pause::{Gate, PauseRecord};
use backstop_core::store::{Pauses, PausesParams};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The watch, with what it uses.
pub(crate) struct PauseWatch {
    pub(crate) store: Arc<dyn Pauses>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) kinds: Arc<Kinds>,
    pub(crate) every: Duration,
}

impl PauseWatch {
    /// Reads and applies the pauses until `stop`.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            self.once().await;
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                _ = self.kinds.pauses_changed.notified() => {}
                _ = stop.changed() => {}
            }
            if *stop.borrow() {
                break;
            }
        }
    }

    /// One read; returns whether it succeeded.
    pub(crate) async fn once(&self) -> bool {
        let rows = match self.store.pauses(PausesParams::default()).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "reading pauses failed; every kind's gate stays as it was");
                return false;
            }
        };
        apply(&self.kinds, rows, self.clock.now());
        true
    }
}

/// Sets every kind's gate from `rows` at `now`, logging and waking what changed.
pub(crate) fn apply(kinds: &Kinds, rows: Vec<PauseRecord>, now: jiff::Timestamp) {
    let mut by_scope: HashMap<String, Vec<PauseRecord>> = HashMap::new();
    for r in rows {
        by_scope.entry(r.scope.clone()).or_default().push(r);
    }
    let none = Vec::new();
    for kind in kinds.all() {
        let own = by_scope.get(&kind.gate.scope).unwrap_or(&none);
        let host = kind.gate.host_scope.as_ref().and_then(|s| by_scope.get(s));
        let joined: Vec<PauseRecord>;
        let rows = match host {
            Some(h) => {
                // The host's rows that are this kind's: a `Retry-After` only when it obeys them.
                let h = h.iter().filter(|r| kind.gate.governed_by(r));
                joined = own.iter().chain(h).cloned().collect();
                &joined
            }
            None => own,
        };
        let Some(old) = kind.gate.set(rows, now) else {
            continue;
        };
        let new = kind.gate.current();
        let name = &kind.config.name;
        let gauge = match &new {
            Gate::Open => 0.0,
            Gate::Closed { .. } => 1.0,
            Gate::Probing { .. } => 0.5,
        };
        crate::metrics::kind_paused(name, gauge);
        match &new {
            Gate::Open => tracing::info!(kind = %name, "dispatch open"),
            Gate::Closed {
                cause,
                reason,
                until,
                ..
            } => {
                tracing::warn!(kind = %name, %cause, reason, until = ?until, "dispatch paused")
            }
            Gate::Probing { trips, .. } => {
                tracing::info!(kind = %name, trips, "cool-down over: probing the target")
            }
        }
        if old.is_closed() && !new.is_closed() {
            match kind.delivery {
                Delivery::Dispatched => kind.wake.notify_one(),
                Delivery::Pulled => kinds.pull_wake.notify_waiters(),
            }
        }
    }
}
