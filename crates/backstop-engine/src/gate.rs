//! A kind's gate in this process: whether its dispatcher may claim (open), may not (closed:
//! paused by hand or in config, cooling down after a trip, waiting out a `Retry-After`), or may
//! send probes, one at a time. The pause watch ([`crate::pauses`]) sets it from the ledger's
//! pause rows; the dispatcher and lease requests obey it; attempts feed the breaker's count.
//!
//! A leaf of the crate: it imports only the domain and tokio, so the kind registry can hold it.

use backstop_core::breaker::{Breaker, BreakerConfig, Seen};
use backstop_core::pause::{Gate, PauseCause, PauseRecord, host_scope, kind_scope};
use jiff::Timestamp;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;
use tokio::sync::watch;

/// What is written in the gate of a kind paused in its configuration.
pub(crate) const PAUSED_IN_CONFIG: &str = "paused in the configuration (paused = true)";

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const PROBING: u8 = 2;

fn mode_of(g: &Gate) -> u8 {
    match g {
        Gate::Open => OPEN,
        Gate::Closed { .. } => CLOSED,
        Gate::Probing { .. } => PROBING,
    }
}

/// One kind's gate and breaker count.
pub(crate) struct KindGate {
    pub(crate) scope: String,
    /// The scope of its target host's pauses, which close it too (a push kind that pauses on
    /// `Retry-After`); `None` for every other kind.
    pub(crate) host_scope: Option<String>,
    state: watch::Sender<Gate>,
    /// The gate's kind ([`OPEN`], [`CLOSED`], [`PROBING`]), kept beside it so that the hot
    /// path (each dispatcher turn, each attempt's end) reads one atomic, not the watch's lock.
    mode: AtomicU8,
    config_paused: bool,
    breaker: Option<BreakerConfig>,
    count: Mutex<Breaker>,
    probes: Mutex<u32>,
}

impl KindGate {
    pub(crate) fn new(
        kind: &str,
        host: Option<&str>,
        config_paused: bool,
        breaker: Option<BreakerConfig>,
    ) -> Self {
        let gate = KindGate {
            scope: kind_scope(kind),
            host_scope: host.map(host_scope),
            state: watch::Sender::new(Gate::Open),
            mode: AtomicU8::new(OPEN),
            config_paused,
            breaker,
            count: Mutex::new(Breaker::default()),
            probes: Mutex::new(0),
        };
        gate.set(&[], Timestamp::UNIX_EPOCH);
        gate
    }

    /// The gate now.
    pub(crate) fn current(&self) -> Gate {
        self.state.borrow().clone()
    }

    /// Whether nothing may start now.
    pub(crate) fn is_closed(&self) -> bool {
        self.mode.load(Ordering::Acquire) == CLOSED
    }

    /// Whether only probes may start now.
    pub(crate) fn is_probing(&self) -> bool {
        self.mode.load(Ordering::Acquire) == PROBING
    }

    /// Whether it is open (the common case, answered without the watch's lock).
    pub(crate) fn is_open(&self) -> bool {
        self.mode.load(Ordering::Acquire) == OPEN
    }

    /// Follows the gate's changes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Gate> {
        self.state.subscribe()
    }

    /// Whether a pause row of `scope` is this kind's: its own or its host's.
    pub(crate) fn governed_by(&self, scope: &str) -> bool {
        self.scope == scope || self.host_scope.as_deref() == Some(scope)
    }

    /// Sets the gate from this kind's pause rows (its own and its host's) at `now`; returns
    /// the gate it replaced when it changed.
    pub(crate) fn set(&self, rows: &[PauseRecord], now: Timestamp) -> Option<Gate> {
        let next = if self.config_paused {
            Gate::Closed {
                cause: PauseCause::Manual,
                reason: PAUSED_IN_CONFIG.into(),
                until: None,
                by: "configuration".into(),
                since: Timestamp::UNIX_EPOCH,
            }
        } else {
            Gate::of(rows, now)
        };
        let mut old = None;
        self.state.send_if_modified(|g| {
            if *g == next {
                return false;
            }
            if !matches!(next, Gate::Probing { .. }) {
                *self.probes.lock().expect("not poisoned") = 0;
            }
            self.mode.store(mode_of(&next), Ordering::Release);
            old = Some(std::mem::replace(g, next));
            true
        });
        old
    }

    /// Sets the gate here at once, before the ledger's rows say so (a trip or a close this
    /// process just wrote); the next read of the rows confirms it.
    pub(crate) fn force(&self, gate: Gate) {
        self.state.send_if_modified(|g| {
            if *g == gate {
                return false;
            }
            self.mode.store(mode_of(&gate), Ordering::Release);
            *g = gate;
            true
        });
    }

    /// The breaker's settings, if the kind has one.
    pub(crate) fn breaker(&self) -> Option<&BreakerConfig> {
        self.breaker.as_ref()
    }

    /// Counts an attempt that ran while the gate was open; returns why the breaker trips.
    pub(crate) fn count(&self, seen: Seen, now: Instant) -> Option<String> {
        let cfg = self.breaker.as_ref()?;
        self.count
            .lock()
            .expect("not poisoned")
            .record(cfg, seen, now)
    }

    /// Counts a probe that succeeded; returns whether enough have, in a row, to close the
    /// breaker.
    pub(crate) fn probe_succeeded(&self) -> bool {
        let need = self.breaker.as_ref().map_or(1, |b| b.probes.max(1));
        let mut n = self.probes.lock().expect("not poisoned");
        *n += 1;
        *n >= need
    }

    /// Forgets the breaker's counts (it tripped, or closed).
    pub(crate) fn reset(&self) {
        self.count.lock().expect("not poisoned").reset();
        *self.probes.lock().expect("not poisoned") = 0;
    }
}
