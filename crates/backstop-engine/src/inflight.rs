//! The attempts this process is running: what to heartbeat and what to release at shutdown.

use backstop_core::store::LeaseRef;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One running attempt.
#[derive(Debug)]
pub(crate) struct Running {
    /// When the lease was last granted or extended.
    pub(crate) since: Instant,
    pub(crate) lease: Duration,
    /// Stops the attempt when the grace period at shutdown runs out.
    pub(crate) abort: Option<tokio::task::AbortHandle>,
}

/// The registry of running attempts.
#[derive(Default)]
pub(crate) struct InFlight {
    map: Mutex<HashMap<LeaseRef, Running>>,
}

impl InFlight {
    pub(crate) fn insert(&self, lease: LeaseRef, r: Running) {
        self.lock().insert(lease, r);
    }

    pub(crate) fn remove(&self, lease: &LeaseRef) {
        self.lock().remove(lease);
    }

    pub(crate) fn set_abort(&self, lease: &LeaseRef, abort: tokio::task::AbortHandle) {
        if let Some(r) = self.lock().get_mut(lease) {
            r.abort = Some(abort);
        }
    }

    /// Records that these leases were just extended.
    pub(crate) fn extended(&self, leases: &[LeaseRef], now: Instant) {
        let mut map = self.lock();
        for l in leases {
            if let Some(r) = map.get_mut(l) {
                r.since = now;
            }
        }
    }

    /// Aborts every attempt still running and returns their leases.
    pub(crate) fn abort_all(&self) -> Vec<LeaseRef> {
        let mut map = self.lock();
        for r in map.values() {
            if let Some(a) = &r.abort {
                a.abort();
            }
        }
        map.drain().map(|(l, _)| l).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Leases running longer than a third of their lease, grouped by lease length.
    pub(crate) fn due_for_heartbeat(&self, now: Instant) -> HashMap<Duration, Vec<LeaseRef>> {
        let mut out: HashMap<Duration, Vec<LeaseRef>> = HashMap::new();
        for (l, r) in self.lock().iter() {
            if now.duration_since(r.since) >= r.lease / 3 {
                out.entry(r.lease).or_default().push(*l);
            }
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseRef, Running>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}
