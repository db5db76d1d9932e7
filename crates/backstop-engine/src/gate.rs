//! A kind's gate in this process: whether its dispatcher may claim (open), may not (closed:
//! paused by hand or in config, cooling down after a trip, waiting out a `Retry-After`), or may
//! send probes, one at a time. The pause watch ([`crate::pauses`]) sets it from the ledger's
//! pause rows; the dispatcher and lease requests obey it; attempts feed the breaker's count.
//!
//! A leaf of the crate: it imports only the domain and tokio, so the kind registry can hold it.

use backstop_core::breaker::{Breaker, BreakerConfig, HostBreaker, Seen};
use backstop_core::pause::{Gate, PauseCause, PauseRecord, host_scope, kind_scope};
use jiff::Timestamp;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
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

/// One breaker's count in this process: a kind's own, or its target host's, shared by the
/// gates of every kind on the host.
pub(crate) struct ScopeBreaker {
    /// The scope its trips are written under (`kind:<name>`, `host:<host>`).
    pub(crate) scope: String,
    pub(crate) config: BreakerConfig,
    /// A host's breaker: the host and its kinds, for the words of a trip.
    pub(crate) host: Option<(String, Vec<String>)>,
    count: Mutex<Breaker>,
    probes: Mutex<u32>,
    /// Held by the dispatcher sending this breaker's probe in this process: a host's kinds
    /// take turns, so that the host gets one probe at a time, not one per kind.
    probing: AtomicBool,
}

impl ScopeBreaker {
    /// A kind's own breaker.
    pub(crate) fn of_kind(kind: &str, config: BreakerConfig) -> Self {
        Self::new(kind_scope(kind), config, None)
    }

    /// A host's breaker, shared by its kinds.
    pub(crate) fn of_host(h: &HostBreaker) -> Self {
        Self::new(
            host_scope(&h.host),
            h.config.clone(),
            Some((h.host.clone(), h.kinds.clone())),
        )
    }

    fn new(scope: String, config: BreakerConfig, host: Option<(String, Vec<String>)>) -> Self {
        ScopeBreaker {
            scope,
            config,
            host,
            count: Mutex::new(Breaker::default()),
            probes: Mutex::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Counts an attempt that ran while the gate was open; returns why the breaker trips.
    fn count(&self, seen: Seen, now: Instant) -> Option<String> {
        self.count
            .lock()
            .expect("not poisoned")
            .record(&self.config, seen, now)
    }

    /// Counts a probe that succeeded; returns whether enough have, in a row, to close it.
    pub(crate) fn probe_succeeded(&self) -> bool {
        let mut n = self.probes.lock().expect("not poisoned");
        *n += 1;
        *n >= self.config.probes.max(1)
    }

    /// Forgets the counts (it tripped, or closed, or a person resumed).
    pub(crate) fn reset(&self) {
        self.count.lock().expect("not poisoned").reset();
        *self.probes.lock().expect("not poisoned") = 0;
    }

    /// Takes this process's turn to probe; whether it was free.
    pub(crate) fn take_probe(&self) -> bool {
        self.probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Gives the turn back (the probe ended, or none was sent).
    pub(crate) fn give_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }
}

/// One kind's gate and its breakers' counts.
pub(crate) struct KindGate {
    pub(crate) scope: String,
    /// The scope of its target host's pauses, which close it too: a push kind that pauses on
    /// `Retry-After`, or whose host has a breaker; `None` for every other kind.
    pub(crate) host_scope: Option<String>,
    /// Whether the host's `Retry-After` pauses close it (`pause_on_retry_after`).
    obeys_retry_after: bool,
    state: watch::Sender<Gate>,
    /// The gate's kind ([`OPEN`], [`CLOSED`], [`PROBING`]), kept beside it so that the hot
    /// path (each dispatcher turn, each attempt's end) reads one atomic, not the watch's lock.
    mode: AtomicU8,
    config_paused: bool,
    /// Its own breaker.
    own: Option<ScopeBreaker>,
    /// Its host's breaker, the same one in every gate of the host's kinds.
    host: Option<Arc<ScopeBreaker>>,
}

/// What a gate is made of.
pub(crate) struct GateParams<'a> {
    pub(crate) kind: &'a str,
    /// The kind's target host (push kinds).
    pub(crate) host: Option<&'a str>,
    pub(crate) obeys_retry_after: bool,
    pub(crate) config_paused: bool,
    pub(crate) breaker: Option<BreakerConfig>,
    pub(crate) host_breaker: Option<Arc<ScopeBreaker>>,
}

impl KindGate {
    pub(crate) fn new(p: GateParams<'_>) -> Self {
        let governed_by_host = p.obeys_retry_after || p.host_breaker.is_some();
        let gate = KindGate {
            scope: kind_scope(p.kind),
            host_scope: p.host.filter(|_| governed_by_host).map(host_scope),
            obeys_retry_after: p.obeys_retry_after,
            state: watch::Sender::new(Gate::Open),
            mode: AtomicU8::new(OPEN),
            config_paused: p.config_paused,
            own: p.breaker.map(|b| ScopeBreaker::of_kind(p.kind, b)),
            host: p.host_breaker,
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

    /// Whether a pause row is this kind's: any of its own; of its host's, a `Retry-After` when
    /// it obeys them and a breaker's when the host has one.
    pub(crate) fn governed_by(&self, r: &PauseRecord) -> bool {
        if r.scope == self.scope {
            return true;
        }
        if self.host_scope.as_deref() != Some(r.scope.as_str()) {
            return false;
        }
        match r.cause {
            PauseCause::RetryAfter => self.obeys_retry_after,
            PauseCause::Breaker => self.host.is_some(),
            PauseCause::Manual => true,
        }
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

    /// Its breakers: its own, then its host's.
    pub(crate) fn breakers(&self) -> impl Iterator<Item = &ScopeBreaker> {
        self.own.iter().chain(self.host.as_deref())
    }

    /// Its host's breaker, if the host has one.
    pub(crate) fn host_breaker(&self) -> Option<&ScopeBreaker> {
        self.host.as_deref()
    }

    /// The breaker whose pauses are kept under `scope`.
    pub(crate) fn breaker_of(&self, scope: &str) -> Option<&ScopeBreaker> {
        self.breakers().find(|b| b.scope == scope)
    }

    /// Counts an attempt that ran while the gate was open on each of its breakers; returns the
    /// ones that trip, with why.
    pub(crate) fn count(&self, seen: Seen, now: Instant) -> Vec<(&ScopeBreaker, String)> {
        self.breakers()
            .filter_map(|b| b.count(seen, now).map(|why| (b, why)))
            .collect()
    }

    /// Forgets every breaker's counts (a person resumed the kind).
    pub(crate) fn reset(&self) {
        self.breakers().for_each(ScopeBreaker::reset);
    }
}
