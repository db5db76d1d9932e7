//! The engine's handle: what applications, the HTTP API and the CLI call. It is built by
//! [`EngineBuilder`](crate::EngineBuilder) (`builder.rs`) and run by the supervisor
//! (`supervisor.rs`); the loops it starts never see it, only the handles they are given.

use crate::alerts::{self, AlertOptions};
use crate::bridges::status::{BridgeStatus, BridgeView};
use crate::callbacks::source::CallbackSource;
use crate::context::Context;
use crate::enqueue::{self, EnqueueError, EnqueueRequest, Enqueued};
use crate::executor::Executor;
use crate::inflight::InFlight;
use crate::options::EngineOptions;
use crate::reconciler::{self, Reconciler};
use backstop_core::broker::BridgeConfig;
use backstop_core::{Clock, KindConfig, Machine, Store};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

/// The engine. Cheap to clone: clones share one ledger and one set of kinds.
#[derive(Clone)]
pub struct Engine {
    /// What the engine's loops share.
    pub(crate) ctx: Arc<Context>,
    /// What only the handle and the supervisor use.
    pub(crate) parts: Arc<Parts>,
}

/// The handle's own state beside the context: options, what runs the dispatched kinds, the
/// machines and sources the API serves, and the state the supervisor's loops report into.
pub(crate) struct Parts {
    pub(crate) opts: EngineOptions,
    pub(crate) alert_opts: AlertOptions,
    /// How each dispatched kind's attempts run, by kind.
    pub(crate) executors: HashMap<String, Arc<Executor>>,
    /// The state machines of entities, by name.
    pub(crate) machines: HashMap<String, Machine>,
    /// Inbound callback sources, by name.
    pub(crate) sources: HashMap<String, CallbackSource>,
    /// Broker bridges, in configured order, each with its live status.
    pub(crate) bridges: Vec<(BridgeConfig, Arc<BridgeStatus>)>,
    /// The leases this process holds, for heartbeats and shutdown.
    pub(crate) inflight: Arc<InFlight>,
    /// Whether this process leads (runs the singleton duties); set by the leader loop.
    pub(crate) leading: watch::Sender<bool>,
    /// When this engine was built (the stall watch counts from here on a fresh database).
    pub(crate) started: jiff::Timestamp,
    /// The configured schedules, which the planner plans.
    pub(crate) schedules: Arc<[backstop_core::schedule::Schedule]>,
}

impl Engine {
    /// The store the engine runs on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.ctx.store
    }

    /// The configured kinds.
    pub fn kinds(&self) -> &HashMap<String, KindConfig> {
        self.ctx.kinds.configs()
    }

    /// The clock the engine reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.ctx.clock
    }

    /// This process's broker bridges as they are now.
    pub fn bridges(&self) -> Vec<BridgeView> {
        let now = self.ctx.clock.now();
        self.parts
            .bridges
            .iter()
            .map(|(_, s)| s.view(&self.ctx.owner, now))
            .collect()
    }

    /// Every process's bridges on this ledger: this process's as they are now, the others'
    /// as their last beat said (stale past three beat intervals).
    pub async fn all_bridges(&self) -> Result<Vec<BridgeView>, backstop_core::StoreError> {
        let now = self.ctx.clock.now();
        let mut views: Vec<BridgeView> =
            crate::bridges::from_beats(&*self.ctx.store, now, self.parts.opts.bridge_beat)
                .await?
                .into_iter()
                .filter(|v| v.worker != *self.ctx.owner)
                .collect();
        views.extend(self.bridges());
        views.sort_by(|a, b| (&a.name, &a.worker).cmp(&(&b.name, &b.worker)));
        Ok(views)
    }

    /// The configured broker bridges.
    pub fn bridge_configs(&self) -> impl Iterator<Item = &BridgeConfig> {
        self.parts.bridges.iter().map(|(c, _)| c)
    }

    /// The engine's options.
    pub fn options(&self) -> &EngineOptions {
        &self.parts.opts
    }

    /// This process's lease owner name.
    pub fn worker(&self) -> &str {
        &self.ctx.owner
    }

    /// Whether this engine currently leads: runs the singleton duties (lease rescue, expiry,
    /// retention) for every process on its database.
    pub fn is_leader(&self) -> bool {
        *self.parts.leading.borrow()
    }

    /// Runs one reconciler pass now, as the leader would (tests drive it with a manual
    /// clock); returns what it did. Recorded as the reconciler's beat.
    pub async fn reconcile_once(&self) -> reconciler::PassReport {
        let r = Reconciler::new(&self.ctx, &self.parts.opts, watch::channel(true).1);
        let previous = r.last_pass().await;
        r.pass(previous.as_ref()).await
    }

    /// Sends one alert to the configured sinks now, without waiting for a window (a one-shot
    /// command such as `backstop reconcile` has no window to wait for). Recorded as ledger
    /// tasks of the sinks' kinds, delivered by whichever process serves them.
    pub async fn send_alert(&self, e: alerts::AlertEvent) -> Result<(), EnqueueError> {
        alerts::send_now(
            &self.ctx,
            &self.parts.alert_opts,
            self.parts.opts.max_payload,
            e,
        )
        .await
    }

    /// Enqueues one task; durable when it returns.
    pub async fn enqueue(&self, r: EnqueueRequest) -> Result<Enqueued, EnqueueError> {
        let mut out = self.enqueue_many(vec![r]).await?;
        out.pop().expect("one result per request")
    }

    /// Enqueues tasks in one transaction. Invalid requests fail the whole call before
    /// anything is written; a conflict fails only its own item.
    pub async fn enqueue_many(
        &self,
        rs: Vec<EnqueueRequest>,
    ) -> Result<Vec<Result<Enqueued, EnqueueError>>, EnqueueError> {
        enqueue::enqueue_many(&self.ctx, self.parts.opts.max_payload, rs).await
    }
}
