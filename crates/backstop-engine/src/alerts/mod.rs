//! Alerts: events (dead letters, rescues, a stalled reconciler, backlogs, failure rates,
//! statement breaks, audit drift) are collected for a window and sent as one message per
//! sink. Each message is itself a ledger task of the sink's internal kind
//! (`backstop.alert.<sink>`, pushed to the sink's URL), so an alert is retried with backoff
//! and never silently lost, and a failing sink only backs up its own kind.

pub mod event;
pub mod format;
pub mod journal;
pub mod window;

pub use event::{AlertEvent, AlertName, UnknownAlert};
pub use format::{AlertFormat, UnknownFormat};

use crate::engine::Shared;
use crate::enqueue::EnqueueRequest;
use backstop_core::{AttemptOutcome, KindConfig, RetryPolicy, Target};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use window::{Collector, Window};

/// Internal alert kinds are named this, then the sink's name.
pub const KIND_PREFIX: &str = "backstop.alert.";

/// One configured destination.
#[derive(Clone, PartialEq)]
pub struct AlertSink {
    /// Letters, digits, `-` and `_`; names the sink's internal kind.
    pub name: String,
    pub url: String,
    pub format: AlertFormat,
    /// The events it receives (all when empty).
    pub events: Vec<AlertName>,
    /// Signs deliveries like any push kind (Standard Webhooks), when given.
    pub secret: Option<String>,
}

// By hand: webhook URLs of chat services carry their access token.
impl std::fmt::Debug for AlertSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertSink")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl AlertSink {
    /// The internal kind that carries this sink's messages: a few attempts a minute at
    /// most, for about a day, one at a time.
    pub fn kind(&self) -> KindConfig {
        let mut k = KindConfig::new(
            format!("{KIND_PREFIX}{}", self.name),
            Target::HttpPush {
                url: self.url.clone(),
                secret: self.secret.clone(),
            },
        );
        k.max_attempts = 300;
        k.retry = RetryPolicy::default();
        k.concurrency = 1;
        k.timeout = Duration::from_secs(10);
        k
    }

    fn wants(&self, n: AlertName) -> bool {
        self.events.is_empty() || self.events.contains(&n)
    }
}

/// When a kind's failing attempts count as a `failure_rate` alert.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FailureRate {
    /// Share of attempts in a window that failed (retry or failed), 0–1.
    pub threshold: f64,
    /// Fewer attempts than this in a window never alert.
    pub min_attempts: u64,
}

/// Alerting configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertOptions {
    pub sinks: Vec<AlertSink>,
    /// Events are aggregated over this long.
    pub window: Duration,
    pub failure_rate: Option<FailureRate>,
}

impl Default for AlertOptions {
    fn default() -> Self {
        AlertOptions {
            sinks: Vec::new(),
            window: Duration::from_secs(60),
            failure_rate: Some(FailureRate {
                threshold: 0.5,
                min_attempts: 20,
            }),
        }
    }
}

/// Attempts and failing attempts of one kind in the current window.
#[derive(Default)]
pub(crate) struct Tally {
    attempts: AtomicU64,
    failing: AtomicU64,
}

impl Tally {
    fn take(&self) -> (u64, u64) {
        (
            self.attempts.swap(0, Ordering::Relaxed),
            self.failing.swap(0, Ordering::Relaxed),
        )
    }
}

/// Where the engine raises alerts: cheap to clone, never blocks.
#[derive(Clone)]
pub(crate) struct Alerts {
    tx: mpsc::UnboundedSender<AlertEvent>,
    rx: Arc<Mutex<Option<mpsc::UnboundedReceiver<AlertEvent>>>>,
    tallies: Arc<HashMap<String, Tally>>,
}

impl Alerts {
    pub(crate) fn new<'a>(kinds: impl Iterator<Item = &'a str>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Alerts {
            tx,
            rx: Arc::new(Mutex::new(Some(rx))),
            tallies: Arc::new(kinds.map(|k| (k.to_string(), Tally::default())).collect()),
        }
    }

    /// Raises one event (logged by the caller).
    pub(crate) fn raise(&self, e: AlertEvent) {
        crate::metrics::alert(e.name);
        let _ = self.tx.send(e);
    }

    /// Counts one attempt's outcome toward its kind's failure rate.
    pub(crate) fn attempt(&self, kind: &str, outcome: AttemptOutcome) {
        if let Some(t) = self.tallies.get(kind) {
            t.attempts.fetch_add(1, Ordering::Relaxed);
            if matches!(outcome, AttemptOutcome::Retry | AttemptOutcome::Failed) {
                t.failing.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Raises `task.failed` for a new dead letter.
pub(crate) fn dead_letter(
    alerts: &Alerts,
    kind: &str,
    task: backstop_core::TaskId,
    error: &str,
    reason: &str,
) {
    let detail = match (error.is_empty(), reason.is_empty()) {
        (false, false) => format!("{reason}: {error}"),
        (true, false) => reason.to_string(),
        _ => error.to_string(),
    };
    alerts.raise(AlertEvent {
        name: AlertName::TaskFailed,
        kind: Some(kind.to_string()),
        task: Some(task),
        detail,
    });
}

/// Closes a window every `window` until `stop`, then one last time. The open window is kept
/// in the ledger as it fills (`journal`), and the windows left open by processes that are
/// gone are sent as they were, every `node_beat`.
pub(crate) async fn run(shared: Arc<Shared>, opts: AlertOptions, mut stop: watch::Receiver<bool>) {
    let Some(mut rx) = shared.alerts.rx.lock().expect("not poisoned").take() else {
        return;
    };
    let mut collector = Collector::default();
    let mut start = shared.clock.now();
    let mut tick = tokio::time::interval(opts.window);
    tick.tick().await;
    let mut orphans = tokio::time::interval(shared.opts.node_beat);
    loop {
        let stopping = tokio::select! {
            Some(e) = rx.recv() => {
                collector.add(e);
                while let Ok(e) = rx.try_recv() {
                    collector.add(e);
                }
                // In the ledger before the window closes: a kill now loses none of them.
                if let Err(e) = journal::save(&shared, start, &collector).await {
                    tracing::error!(error = %e, "recording the open alert window failed; it is kept in memory and sent when the window closes");
                }
                continue;
            }
            _ = orphans.tick() => {
                send_orphans(&shared, &opts).await;
                continue;
            }
            _ = tick.tick() => false,
            _ = stop.changed() => true,
        };
        while let Ok(e) = rx.try_recv() {
            collector.add(e);
        }
        failure_rates(&shared, &opts, &mut collector);
        if !collector.is_empty() {
            let w = collector.take();
            let end = shared.clock.now();
            match send(&shared, &opts, &w, start, end, &shared.owner).await {
                Ok(()) => {
                    start = end;
                    if let Err(e) = journal::clear(&shared, &shared.owner).await {
                        tracing::warn!(error = %e, "clearing the sent alert window's journal failed; a later sender finds it already sent");
                    }
                }
                // Kept for the next window: nothing is dropped while the ledger is away.
                Err(e) => {
                    tracing::error!(error = %e, "recording alert messages failed; retrying with the next window");
                    for g in w.groups {
                        collector.merge(g);
                    }
                    let _ = journal::save(&shared, start, &collector).await;
                }
            }
        } else {
            start = shared.clock.now();
        }
        if stopping {
            return;
        }
    }
}

/// Sends the windows that processes now gone left open, each as the message it would have
/// been (keyed by its owner and start, so that two processes sending it make one message).
async fn send_orphans(shared: &Arc<Shared>, opts: &AlertOptions) {
    let found = match journal::orphans(shared).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "reading alert journals failed; trying again later");
            return;
        }
    };
    for (owner, j) in found {
        let w = Window { groups: j.groups };
        let r = send(shared, opts, &w, j.window_start, shared.clock.now(), &owner).await;
        match r {
            Ok(()) => {
                tracing::info!(process = %owner, groups = w.groups.len(), "sent the alert window a process left open when it died");
                let _ = journal::clear(shared, &owner).await;
            }
            Err(e) => {
                tracing::warn!(process = %owner, error = %e, "sending an orphaned alert window failed; trying again later");
            }
        }
    }
}

fn failure_rates(shared: &Shared, opts: &AlertOptions, c: &mut Collector) {
    let Some(fr) = opts.failure_rate else { return };
    for (kind, t) in shared.alerts.tallies.iter() {
        let (attempts, failing) = t.take();
        if attempts >= fr.min_attempts.max(1) && failing as f64 / attempts as f64 > fr.threshold {
            let mut e = AlertEvent::new(
                AlertName::FailureRate,
                format!(
                    "{failing} of {attempts} attempts failed in the window (threshold {:.0} %)",
                    fr.threshold * 100.0
                ),
            );
            e.kind = Some(kind.clone());
            c.add(e);
        }
    }
}

/// Sends one event at once, as a window of its own.
pub(crate) async fn send_now(
    shared: &Arc<Shared>,
    e: AlertEvent,
) -> Result<(), crate::EnqueueError> {
    crate::metrics::alert(e.name);
    let mut c = Collector::default();
    c.add(e);
    let now = shared.clock.now();
    send(
        shared,
        &shared.alert_opts,
        &c.take(),
        now,
        now,
        &shared.owner,
    )
    .await
}

/// One task per sink that wants any of the window's events, keyed by the process that
/// collected them (`owner`) and the window, so that a retried write never sends a message
/// twice.
async fn send(
    shared: &Arc<Shared>,
    opts: &AlertOptions,
    w: &Window,
    start: jiff::Timestamp,
    end: jiff::Timestamp,
    owner: &str,
) -> Result<(), crate::EnqueueError> {
    let (s, e) = (
        backstop_core::wire_time::format(start),
        backstop_core::wire_time::format(end),
    );
    let mut requests = Vec::new();
    for sink in &opts.sinks {
        let wanted: Vec<AlertName> = AlertName::ALL
            .into_iter()
            .filter(|n| sink.wants(*n))
            .collect();
        let mine = w.only(&wanted);
        if mine.is_empty() {
            continue;
        }
        let body = format::body(sink.format, &mine, owner, &s, &e);
        requests.push(EnqueueRequest {
            kind: sink.kind().name,
            key: format!("{owner}/{s}"),
            payload: serde_json::to_vec(&body).expect("plain data"),
            ..EnqueueRequest::default()
        });
    }
    if requests.is_empty() {
        return Ok(());
    }
    let engine = crate::Engine {
        shared: shared.clone(),
    };
    for r in engine.enqueue_many(requests).await? {
        match r {
            // Written before, by a call whose answer was lost: sent already.
            Ok(_) | Err(crate::EnqueueError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
