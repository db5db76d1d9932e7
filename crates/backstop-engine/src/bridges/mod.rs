//! Bridges: broker → ledger. Each configured bridge is one loop holding one consumer: it
//! takes a batch of messages, writes what each becomes in one ledger transaction (a task of
//! its kind, or a rejection record), and acknowledges them only after that commit. A lost
//! connection is retried with a growing pause; whatever was not acknowledged comes again and
//! lands on the same tasks (the enqueue is idempotent by `(kind, key)` and payload, and the
//! timeline counts the redelivery).

mod intake;
pub mod status;

use crate::context::Context;
use crate::enqueue::enqueue_prepared;
use backstop_brokers::{BrokerError, Consumer, Received, connect_consumer};
use backstop_core::broker::BridgeConfig;
use backstop_core::store::{BeatParams, EnqueueResult};
use backstop_core::{Intake, NewTask};
use intake::Admission;
use status::{BridgeState, BridgeStatus};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How a bridge behaves beyond its configuration.
#[derive(Clone, Debug)]
pub(crate) struct BridgeTiming {
    /// How often its status is written as a beat.
    pub(crate) beat: Duration,
    /// Down this long, it raises `bridge.down` (once per outage).
    pub(crate) down_alert: Duration,
    /// The longest pause between reconnects.
    pub(crate) max_pause: Duration,
    /// Largest payload the ledger takes.
    pub(crate) max_payload: usize,
    /// A pause between commit and ack, for fault drills.
    pub(crate) ack_delay: Duration,
}

/// One bridge's loop, with exactly what it uses.
pub(crate) struct Bridge {
    ctx: Arc<Context>,
    config: BridgeConfig,
    status: Arc<BridgeStatus>,
    timing: BridgeTiming,
}

impl Bridge {
    pub(crate) fn new(
        ctx: Arc<Context>,
        config: BridgeConfig,
        status: Arc<BridgeStatus>,
        timing: BridgeTiming,
    ) -> Self {
        Bridge {
            ctx,
            config,
            status,
            timing,
        }
    }

    /// Runs until `stop`: connect, consume, reconnect.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let beat = tokio::spawn(beats(
            self.ctx.clone(),
            self.status.clone(),
            self.timing.clone(),
            stop.clone(),
        ));
        let mut pause = Duration::from_millis(200);
        loop {
            self.status
                .set(BridgeState::Connecting, self.ctx.clock.now(), None);
            let connected = tokio::select! {
                c = connect_consumer(&self.config) => c,
                _ = stop.changed() => break,
            };
            let error = match connected {
                Ok(mut consumer) => {
                    pause = Duration::from_millis(200);
                    self.status
                        .set(BridgeState::Running, self.ctx.clock.now(), None);
                    tracing::info!(bridge = %self.config.name, "bridge connected");
                    match self.consume(&mut *consumer, &mut stop).await {
                        None => break,
                        Some(e) => e,
                    }
                }
                Err(e) => e,
            };
            let state = match &error {
                BrokerError::Config(_) => BridgeState::Refused,
                BrokerError::Connection { .. } => BridgeState::Reconnecting,
            };
            tracing::warn!(bridge = %self.config.name, error = %error, "bridge down; reconnecting");
            self.status
                .set(state, self.ctx.clock.now(), Some(error.to_string()));
            let wait = match state {
                BridgeState::Refused => self.timing.max_pause,
                _ => pause,
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
            pause = (pause * 2).min(self.timing.max_pause);
        }
        self.status
            .set(BridgeState::Stopped, self.ctx.clock.now(), None);
        beat.abort();
        let _ = beat.await;
        self.write_beat().await;
    }

    /// Consumes until the connection fails (its error) or `stop` (None).
    async fn consume(
        &self,
        consumer: &mut dyn Consumer,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<BrokerError> {
        let mut pending = PendingWatch::default();
        loop {
            let batch = tokio::select! {
                b = consumer.next_batch(usize::from(self.config.prefetch.max(1))) => b,
                _ = stop.changed() => return self.stopped(consumer).await,
            };
            let batch = match batch {
                Ok(b) => b,
                Err(e) => return Some(e),
            };
            if let Err(e) = self.watch_ack_pending(consumer, &mut pending).await {
                return Some(e);
            }
            if batch.is_empty() {
                continue;
            }
            let n = batch.len() as u64;
            self.status.received(n);
            let Some(tokens) = self.settle(&batch, stop).await else {
                // Stopped before the ledger took them: the broker delivers them again.
                self.status.abandoned(n);
                return self.stopped(consumer).await;
            };
            if !self.timing.ack_delay.is_zero() {
                tokio::time::sleep(self.timing.ack_delay).await;
            }
            if let Err(e) = consumer.ack(tokens).await {
                return Some(e);
            }
        }
    }

    /// On stop, the acks already sent are seen confirmed (or the failure logged: those
    /// messages come again onto the same tasks), so a clean stop leaves nothing unacked.
    async fn stopped(&self, consumer: &mut dyn Consumer) -> Option<BrokerError> {
        if let Err(e) = consumer.settle_acks().await {
            tracing::warn!(bridge = %self.config.name, error = %e, "acks not confirmed at stop; the broker delivers those messages again");
        }
        None
    }

    /// Reads the broker's count of unacknowledged deliveries once per beat (for a broker that
    /// keeps one) and raises `bridge.ack_pending` when it nears the limit, once per episode:
    /// past the limit JetStream silently stops delivering.
    async fn watch_ack_pending(
        &self,
        consumer: &mut dyn Consumer,
        w: &mut PendingWatch,
    ) -> Result<(), BrokerError> {
        if w.read_at.is_some_and(|t| t.elapsed() < self.timing.beat) {
            return Ok(());
        }
        w.read_at = Some(tokio::time::Instant::now());
        let Some(a) = consumer.ack_pending().await? else {
            return Ok(());
        };
        let view = status::AckPendingView {
            pending: a.pending,
            max: a.max,
        };
        self.status.set_ack_pending(view);
        let near = view.near_limit();
        if near && !w.alerted {
            tracing::warn!(bridge = %self.config.name, pending = a.pending, max = a.max, "the broker holds nearly as many unacknowledged deliveries as it allows");
            self.ctx.alerts.raise(crate::alerts::AlertEvent::new(
                crate::alerts::AlertName::BridgeAckPending,
                format!(
                    "bridge {}: {} deliveries unacknowledged of the {} its broker allows; at the limit it delivers nothing more",
                    self.config.name, a.pending, a.max
                ),
            ));
        }
        w.alerted = near;
        Ok(())
    }

    /// Writes what each message becomes, retrying the ledger until it takes them (nothing is
    /// acknowledged before). Returns the tokens to acknowledge, or None when stopped first.
    async fn settle(
        &self,
        batch: &[Received],
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Vec<backstop_brokers::AckToken>> {
        let now = self.ctx.clock.now();
        let admissions: Vec<Admission> = batch
            .iter()
            .map(|m| {
                intake::admit(
                    &self.config,
                    self.ctx.kinds.configs(),
                    m,
                    now,
                    self.timing.max_payload,
                )
            })
            .collect();
        let tasks: Vec<NewTask> = admissions
            .iter()
            .map(|a| match a {
                Admission::Task(t) | Admission::Rejected { task: t, .. } => t.clone(),
            })
            .collect();
        let results = self.write(&tasks, stop).await?;
        let (mut inserted, mut deduplicated, mut rejected) = (0, 0, 0);
        let mut conflicts = Vec::new();
        for ((a, t), (r, m)) in admissions.iter().zip(&tasks).zip(results.iter().zip(batch)) {
            match (a, r) {
                (Admission::Rejected { reason, .. }, r) => {
                    rejected += 1;
                    self.rejected(t, r, reason);
                }
                (Admission::Task(_), EnqueueResult::Created(id)) => {
                    inserted += 1;
                    if let Intake::Failed { reason } = &t.intake {
                        self.ctx.alerts.dead_letter(&t.kind, *id, "", reason);
                    }
                }
                (Admission::Task(_), EnqueueResult::Existing(_)) => deduplicated += 1,
                (Admission::Task(_), EnqueueResult::Conflict(existing)) => {
                    conflicts.push(intake::conflict(&self.config, m, *existing, now));
                }
            }
        }
        if !conflicts.is_empty() {
            let tasks: Vec<NewTask> = conflicts.iter().map(|(t, _)| t.clone()).collect();
            let results = self.write(&tasks, stop).await?;
            for ((t, reason), r) in conflicts.iter().zip(&results) {
                rejected += 1;
                self.rejected(t, r, reason);
            }
        }
        self.status.settled(inserted, deduplicated, rejected);
        Some(batch.iter().map(|m| m.token).collect())
    }

    /// A rejection is recorded: a new record raises `task.failed` (a repeat of one already
    /// recorded raised it then); every one is logged.
    fn rejected(&self, record: &NewTask, result: &EnqueueResult, reason: &str) {
        if let EnqueueResult::Created(id) = result {
            self.ctx
                .alerts
                .dead_letter(&record.kind, *id, reason, "rejected by a bridge");
        }
        tracing::warn!(bridge = %self.config.name, reason = %reason, "message rejected");
    }

    /// One ledger write, tried again (after a pause) while the ledger is away.
    async fn write(
        &self,
        tasks: &[NewTask],
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Vec<EnqueueResult>> {
        let mut pause = Duration::from_millis(100);
        loop {
            let now = self.ctx.clock.now();
            // Each was made by `enqueue::prepare` (see `intake`).
            match enqueue_prepared(&self.ctx, tasks.to_vec(), now).await {
                Ok(r) => return Some(r),
                Err(e) => {
                    tracing::error!(bridge = %self.config.name, error = %e, "the ledger did not take a batch; trying again (nothing acknowledged)");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.changed() => return None,
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    async fn write_beat(&self) {
        write_beat(&self.ctx, &self.status).await
    }
}

/// When a consumer's unacknowledged deliveries were last read, and whether they were near
/// the limit then.
#[derive(Default)]
struct PendingWatch {
    read_at: Option<tokio::time::Instant>,
    alerted: bool,
}

/// The beat's name: one per bridge and process.
pub(crate) fn beat_name(bridge: &str, owner: &str) -> String {
    format!("bridge:{bridge}@{owner}")
}

async fn write_beat(ctx: &Context, status: &BridgeStatus) {
    let now = ctx.clock.now();
    let view = status.view(&ctx.owner, now);
    let p = BeatParams {
        name: beat_name(&status.name, &ctx.owner),
        owner: ctx.owner.to_string(),
        at: now,
        detail: serde_json::to_string(&view).unwrap_or_default(),
    };
    if let Err(e) = ctx.store.beat(p).await {
        tracing::warn!(bridge = %status.name, error = %e, "could not record the bridge's beat");
    }
}

/// Beats the bridge's status, and raises `bridge.down` when it stays down too long.
async fn beats(
    ctx: Arc<Context>,
    status: Arc<BridgeStatus>,
    timing: BridgeTiming,
    mut stop: watch::Receiver<bool>,
) {
    let mut alerted_for = None;
    loop {
        write_beat(&ctx, &status).await;
        let now = ctx.clock.now();
        match status.down_since() {
            Some(since)
                if alerted_for != Some(since)
                    && now.duration_since(since).unsigned_abs() >= timing.down_alert =>
            {
                alerted_for = Some(since);
                let view = status.view(&ctx.owner, now);
                ctx.alerts.raise(crate::alerts::AlertEvent::new(
                    crate::alerts::AlertName::BridgeDown,
                    format!(
                        "bridge {} has been {} since {since}: {}",
                        status.name,
                        view.state.as_str(),
                        view.last_error.unwrap_or_default()
                    ),
                ));
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(timing.beat) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Every process's bridges as their beats last said, by name; a bridge whose last beat is
/// older than three of its beat intervals (`beat`, `engine.bridge_beat`) is marked stale.
pub async fn from_beats(
    store: &dyn backstop_core::Store,
    now: jiff::Timestamp,
    beat: Duration,
) -> Result<Vec<status::BridgeView>, backstop_core::StoreError> {
    let stale_after = beat * 3;
    let beats = store
        .beats(backstop_core::store::BeatsParams {
            prefix: "bridge:".into(),
        })
        .await?;
    let mut views: Vec<status::BridgeView> = beats
        .iter()
        .filter_map(|b| {
            let mut v: status::BridgeView = serde_json::from_str(&b.detail).ok()?;
            v.seen_at = b.at;
            v.stale = now.duration_since(b.at).unsigned_abs() > stale_after;
            Some(v)
        })
        .collect();
    views.sort_by(|a, b| (&a.name, &a.worker).cmp(&(&b.name, &b.worker)));
    Ok(views)
}
