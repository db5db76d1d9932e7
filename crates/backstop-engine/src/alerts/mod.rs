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

use crate::context::Context;
use crate::enqueue::{self, EnqueueError, EnqueueRequest};
use crate::options::EngineOptions;
use backstop_core::{KindConfig, RetryPolicy, Target};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
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

/// The alert loop, with what it uses: the whole context (it drains the hub, keeps its
/// window in the ledger and enqueues the messages as tasks of the sinks' kinds).
pub(crate) struct Alerter {
    ctx: Arc<Context>,
    opts: AlertOptions,
    /// How often processes beat: a window whose process missed three beats is orphaned.
    node_beat: Duration,
    max_payload: usize,
}

impl Alerter {
    pub(crate) fn new(ctx: Arc<Context>, opts: AlertOptions, engine: &EngineOptions) -> Self {
        Alerter {
            ctx,
            opts,
            node_beat: engine.node_beat,
            max_payload: engine.max_payload,
        }
    }

    /// Closes a window every `window` until `stop`, then one last time. The open window is
    /// kept in the ledger as it fills (`journal`), and the windows left open by processes that
    /// are gone are sent as they were, every `node_beat`.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let (ctx, opts) = (&*self.ctx, &self.opts);
        let mut collector = Collector::default();
        let mut start = ctx.clock.now();
        let mut tick = tokio::time::interval(opts.window);
        tick.tick().await;
        let mut orphans = tokio::time::interval(self.node_beat);
        loop {
            let stopping = tokio::select! {
                _ = ctx.alerts.raised() => {
                    let raised = ctx.alerts.drain();
                    if raised.is_empty() {
                        continue;
                    }
                    raised.into_iter().for_each(|e| collector.add(e));
                    // In the ledger before the window closes: a kill now loses none of them.
                    if let Err(e) = journal::save(ctx, start, &collector).await {
                        tracing::error!(error = %e, "recording the open alert window failed; it is kept in memory and sent when the window closes");
                    }
                    continue;
                }
                _ = orphans.tick() => {
                    self.send_orphans().await;
                    continue;
                }
                _ = tick.tick() => false,
                _ = stop.changed() => true,
            };
            ctx.alerts
                .drain()
                .into_iter()
                .for_each(|e| collector.add(e));
            failure_rates(ctx, opts, &mut collector);
            if !collector.is_empty() {
                let w = collector.take();
                let end = ctx.clock.now();
                match send(ctx, opts, self.max_payload, &w, start, end, &ctx.owner).await {
                    Ok(()) => {
                        start = end;
                        if let Err(e) = journal::clear(ctx, &ctx.owner).await {
                            tracing::warn!(error = %e, "clearing the sent alert window's journal failed; a later sender finds it already sent");
                        }
                    }
                    // Kept for the next window: nothing is dropped while the ledger is away.
                    Err(e) => {
                        tracing::error!(error = %e, "recording alert messages failed; retrying with the next window");
                        for g in w.groups {
                            collector.merge(g);
                        }
                        let _ = journal::save(ctx, start, &collector).await;
                    }
                }
            } else {
                start = ctx.clock.now();
            }
            if stopping {
                return;
            }
        }
    }

    /// Sends the windows that processes now gone left open, each as the message it would
    /// have been (keyed by its owner and start, so that two processes sending it make one
    /// message).
    async fn send_orphans(&self) {
        let ctx = &*self.ctx;
        let found = match journal::orphans(ctx, self.node_beat).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "reading alert journals failed; trying again later");
                return;
            }
        };
        for (owner, j) in found {
            let w = Window { groups: j.groups };
            let now = ctx.clock.now();
            let r = send(
                ctx,
                &self.opts,
                self.max_payload,
                &w,
                j.window_start,
                now,
                &owner,
            )
            .await;
            match r {
                Ok(()) => {
                    tracing::info!(process = %owner, groups = w.groups.len(), "sent the alert window a process left open when it died");
                    let _ = journal::clear(ctx, &owner).await;
                }
                Err(e) => {
                    tracing::warn!(process = %owner, error = %e, "sending an orphaned alert window failed; trying again later");
                }
            }
        }
    }
}

fn failure_rates(ctx: &Context, opts: &AlertOptions, c: &mut Collector) {
    let Some(fr) = opts.failure_rate else { return };
    for (kind, attempts, failing) in ctx.alerts.take_tallies() {
        if attempts >= fr.min_attempts.max(1) && failing as f64 / attempts as f64 > fr.threshold {
            let mut e = AlertEvent::new(
                AlertName::FailureRate,
                format!(
                    "{failing} of {attempts} attempts failed in the window (threshold {:.0} %)",
                    fr.threshold * 100.0
                ),
            );
            e.kind = Some(kind);
            c.add(e);
        }
    }
}

/// Sends one event at once, as a window of its own.
pub(crate) async fn send_now(
    ctx: &Context,
    opts: &AlertOptions,
    max_payload: usize,
    e: AlertEvent,
) -> Result<(), EnqueueError> {
    crate::metrics::alert(e.name.as_str());
    let mut c = Collector::default();
    c.add(e);
    let now = ctx.clock.now();
    send(ctx, opts, max_payload, &c.take(), now, now, &ctx.owner).await
}

/// One task per sink that wants any of the window's events, keyed by the process that
/// collected them (`owner`) and the window, so that a retried write never sends a message
/// twice.
async fn send(
    ctx: &Context,
    opts: &AlertOptions,
    max_payload: usize,
    w: &Window,
    start: jiff::Timestamp,
    end: jiff::Timestamp,
    owner: &str,
) -> Result<(), EnqueueError> {
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
    for r in enqueue::enqueue_many(ctx, max_payload, requests).await? {
        match r {
            // Written before, by a call whose answer was lost: sent already.
            Ok(_) | Err(EnqueueError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
