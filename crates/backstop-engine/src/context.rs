//! The bottom of the engine: what every part of it may hold — the ledger, the clock, this
//! process's lease owner name, the kinds (each either dispatched here or pulled by workers),
//! the configured schedules and where alerts are raised. It imports only leaf files of the
//! crate (the alert event type and the per-kind counters), so no import cycle runs through
//! it; the `imports` test checks.

use crate::alerts::event::{AlertEvent, AlertName};
use crate::gate::{GateParams, KindGate, ScopeBreaker};
use crate::metrics::{self, KindMetrics};
use backstop_core::requires::Requires;
use backstop_core::schedule::Schedule;
use backstop_core::{AttemptOutcome, Clock, KindConfig, Machine, Store, Target, TaskId};
use jiff::Timestamp;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The handles the engine's parts share. Each loop is given only the ones it uses.
pub(crate) struct Context {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    /// This process's name on leases, beats and alert windows.
    pub(crate) owner: Arc<str>,
    pub(crate) kinds: Arc<Kinds>,
    pub(crate) alerts: AlertHub,
    /// The schedules of the configuration, which the planner plans and the reconciler checks
    /// (those registered over the API live in the ledger).
    pub(crate) schedules: Arc<[Schedule]>,
}

/// How tasks of a kind reach their handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// A dispatcher of this process runs them (HTTP push or an in-process handler).
    Dispatched,
    /// Workers lease them through the API.
    Pulled,
}

/// One configured kind, as the engine serves it.
pub(crate) struct Kind {
    pub(crate) config: KindConfig,
    pub(crate) delivery: Delivery,
    /// Wakes the kind's idle dispatcher (local enqueues, other processes' announcements).
    pub(crate) wake: Notify,
    pub(crate) metrics: Arc<KindMetrics>,
    /// When a worker last asked this process to lease the kind (pull kinds).
    pub(crate) pulled: Mutex<Option<Timestamp>>,
    /// Whether its tasks may start now (pauses, the breaker).
    pub(crate) gate: KindGate,
    /// The guarded entity that must be in one of its states for an attempt to be made, with
    /// its machine's initial state (an entity never seen is in it).
    pub(crate) guard: Option<Guard>,
}

/// A kind's `requires`, ready to judge.
pub(crate) struct Guard {
    pub(crate) requires: Requires,
    pub(crate) initial: String,
}

/// The kind registry: every configured kind, and the wake of long-polling lease requests.
pub(crate) struct Kinds {
    configs: HashMap<String, KindConfig>,
    entries: HashMap<String, Arc<Kind>>,
    /// Woken by new work of pull kinds, so that long-polling lease requests return promptly.
    pub(crate) pull_wake: Notify,
    /// Woken when this process wrote a pause or a resume: the pause watch reads them at once.
    pub(crate) pauses_changed: Notify,
}

impl Kinds {
    /// The registry of `configs`; a pull target makes a pulled kind, any other a dispatched one.
    pub(crate) fn new(configs: Vec<KindConfig>, machines: &HashMap<String, Machine>) -> Self {
        let mut entries = HashMap::new();
        let mut by_name = HashMap::new();
        // One count per host with a breaker, shared by the gates of its kinds.
        let mut host_breakers: HashMap<String, Arc<ScopeBreaker>> = HashMap::new();
        for config in configs {
            let host_breaker = config.host_breaker.as_ref().map(|h| {
                host_breakers
                    .entry(h.host.clone())
                    .or_insert_with(|| Arc::new(ScopeBreaker::of_host(h)))
                    .clone()
            });
            let delivery = match config.target {
                Target::Pull => Delivery::Pulled,
                _ => Delivery::Dispatched,
            };
            let kind = Kind {
                metrics: Arc::new(KindMetrics::new(&config.name)),
                config: config.clone(),
                delivery,
                wake: Notify::new(),
                pulled: Mutex::new(None),
                gate: KindGate::new(GateParams {
                    kind: &config.name,
                    host: push_host(&config).as_deref(),
                    obeys_retry_after: config.pause_on_retry_after,
                    config_paused: config.paused,
                    breaker: config.breaker.clone(),
                    host_breaker,
                }),
                guard: config.requires.clone().map(|requires| Guard {
                    // The builder checked that the machine is configured.
                    initial: machines
                        .get(&requires.machine)
                        .map(|m| m.initial().to_string())
                        .unwrap_or_default(),
                    requires,
                }),
            };
            entries.insert(config.name.clone(), Arc::new(kind));
            by_name.insert(config.name.clone(), config);
        }
        Kinds {
            configs: by_name,
            entries,
            pull_wake: Notify::new(),
            pauses_changed: Notify::new(),
        }
    }

    /// A kind by name.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Kind>> {
        self.entries.get(name)
    }

    /// The configured kinds' names, sorted and comma-separated, for an error about a kind
    /// that is not one of them.
    pub(crate) fn names(&self) -> String {
        configured_names(&self.configs)
    }

    /// Every kind's configuration, by name.
    pub(crate) fn configs(&self) -> &HashMap<String, KindConfig> {
        &self.configs
    }

    /// Every kind.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<Kind>> {
        self.entries.values()
    }

    /// The kinds of one delivery.
    pub(crate) fn delivered_by(&self, d: Delivery) -> impl Iterator<Item = &Arc<Kind>> {
        self.all().filter(move |k| k.delivery == d)
    }

    /// Wakes whatever waits for new work of `names` (of every kind when empty): the kinds'
    /// dispatchers, and lease requests when a pull kind is among them.
    pub(crate) fn wake(&self, names: &[String]) {
        let mut pull = false;
        let mut one = |k: &Kind| match k.delivery {
            Delivery::Dispatched => k.wake.notify_one(),
            Delivery::Pulled => pull = true,
        };
        if names.is_empty() {
            self.all().for_each(|k| one(k));
        }
        for name in names {
            if let Some(k) = self.get(name) {
                one(k);
            }
        }
        if pull {
            self.pull_wake.notify_waiters();
        }
    }
}

/// The target host a push kind posts to.
fn push_host(config: &KindConfig) -> Option<String> {
    match &config.target {
        Target::HttpPush { url, .. } => backstop_core::limit::host_of(url),
        _ => None,
    }
}

/// The names of `configs`, sorted and comma-separated.
pub(crate) fn configured_names(configs: &HashMap<String, KindConfig>) -> String {
    let mut names: Vec<&str> = configs.keys().map(String::as_str).collect();
    names.sort();
    names.join(", ")
}

/// Where the engine raises alerts: cheap to clone, never blocks. The alert loop drains the
/// events ([`AlertHub::drain`]) and closes a window every so often.
#[derive(Clone)]
pub(crate) struct AlertHub {
    inner: Arc<HubInner>,
}

struct HubInner {
    events: Mutex<Vec<AlertEvent>>,
    raised: Notify,
    tallies: HashMap<String, Tally>,
}

/// Attempts and failing attempts of one kind since the failure rates were last taken.
#[derive(Default)]
struct Tally {
    attempts: AtomicU64,
    failing: AtomicU64,
}

impl AlertHub {
    /// A hub counting the failure rates of `kinds`.
    pub(crate) fn new<'a>(kinds: impl Iterator<Item = &'a str>) -> Self {
        AlertHub {
            inner: Arc::new(HubInner {
                events: Mutex::new(Vec::new()),
                raised: Notify::new(),
                tallies: kinds.map(|k| (k.to_string(), Tally::default())).collect(),
            }),
        }
    }

    /// Raises one event (logged by the caller).
    pub(crate) fn raise(&self, e: AlertEvent) {
        metrics::alert(e.name.as_str());
        self.inner.events.lock().expect("not poisoned").push(e);
        self.inner.raised.notify_one();
    }

    /// Raises `task.failed` for a new dead letter.
    pub(crate) fn dead_letter(&self, kind: &str, task: TaskId, error: &str, reason: &str) {
        let detail = match (error.is_empty(), reason.is_empty()) {
            (false, false) => format!("{reason}: {error}"),
            (true, false) => reason.to_string(),
            _ => error.to_string(),
        };
        self.raise(AlertEvent {
            name: AlertName::TaskFailed,
            kind: Some(kind.to_string()),
            task: Some(task),
            detail,
        });
    }

    /// Raises `group.blocked`: the dead letter `task` holds its ordering group.
    pub(crate) fn group_blocked(&self, kind: &str, group: &str, task: TaskId, error: &str) {
        tracing::warn!(%task, kind, group, error,
            "group blocked: its later tasks wait until this dead letter is retried or resolved");
        self.raise(AlertEvent {
            name: AlertName::GroupBlocked,
            kind: Some(kind.to_string()),
            task: Some(task),
            detail: format!(
                "group {group:?} waits behind task {task}, a dead letter ({error}): retry or resolve it"
            ),
        });
    }

    /// The events raised since the last drain, oldest first.
    pub(crate) fn drain(&self) -> Vec<AlertEvent> {
        std::mem::take(&mut *self.inner.events.lock().expect("not poisoned"))
    }

    /// Waits until an event is raised (at once when one was raised since the last wait).
    pub(crate) async fn raised(&self) {
        self.inner.raised.notified().await
    }

    /// Counts one attempt's outcome toward its kind's failure rate.
    pub(crate) fn attempt(&self, kind: &str, outcome: AttemptOutcome) {
        if let Some(t) = self.inner.tallies.get(kind) {
            t.attempts.fetch_add(1, Ordering::Relaxed);
            if matches!(outcome, AttemptOutcome::Retry | AttemptOutcome::Failed) {
                t.failing.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Each kind's attempts and failing attempts since the last call, counting afresh.
    pub(crate) fn take_tallies(&self) -> Vec<(String, u64, u64)> {
        self.inner
            .tallies
            .iter()
            .map(|(kind, t)| {
                (
                    kind.clone(),
                    t.attempts.swap(0, Ordering::Relaxed),
                    t.failing.swap(0, Ordering::Relaxed),
                )
            })
            .collect()
    }
}
