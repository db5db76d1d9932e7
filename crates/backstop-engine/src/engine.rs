//! The engine: its configuration, its handle for enqueuing, and its run loop with graceful
//! shutdown.

use crate::alerts::{self, AlertOptions, Alerts};
use crate::callbacks::CallbackSource;
use crate::completer;
use crate::dispatcher::{self, KindRuntime};
use crate::enqueue::{self, EnqueueError, EnqueueRequest, Enqueued};
use crate::executor::{Executor, HttpTarget};
use crate::handler::Handler;
use crate::heartbeat;
use crate::inflight::InFlight;
use crate::leader;
use crate::metrics::KindMetrics;
use crate::reconciler;
use crate::retention::{self, RetentionPolicy};
use backstop_core::store::{EnqueueParams, EnqueueResult, ReleaseParams};
use backstop_core::validate::DEFAULT_MAX_PAYLOAD;
use backstop_core::{Clock, KindConfig, Machine, Store, SystemClock, Target};
use backstop_webhooks::{DeliveryClient, StandardWebhooks};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc, watch};

/// Tuning of the engine; the defaults suit most deployments.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Most tasks one claim leases.
    pub claim_batch: usize,
    /// Most outcomes one write records.
    pub complete_batch: usize,
    /// How often an idle dispatcher looks for due work. Local enqueues wake it sooner, and so
    /// do other processes' on a store that announces new work (PostgreSQL's LISTEN/NOTIFY).
    pub poll_interval: Duration,
    /// How often expired leases are rescued and expired tasks compensated (by the leader).
    pub rescue_interval: Duration,
    /// How long a leadership lease lasts unrenewed: when the leader dies, another process
    /// takes over its singleton duties within about this long (plus `leader_renew`).
    pub leader_lease: Duration,
    /// How often the leader renews its lease and the others try to take it; shorter than
    /// `leader_lease`. Processes' clocks must agree to within this.
    pub leader_renew: Duration,
    /// How long finished tasks are kept before the leader deletes them (default: forever).
    pub retention: RetentionPolicy,
    /// How often the leader looks for finished tasks past their retention.
    pub retention_interval: Duration,
    /// How long in-flight attempts may finish after shutdown is asked.
    pub grace: Duration,
    /// Largest accepted payload, in bytes.
    pub max_payload: usize,
    /// This process's name on leases; `None` picks `host-pid-random`.
    pub worker_id: Option<String>,
    /// How often this process records that it is alive, with the kinds it serves.
    pub node_beat: Duration,
    /// A pending task due longer ago than this is overdue; the reconciler says why.
    pub overdue_after: Duration,
    /// The reconciler is stalled when its last pass is older than this; every process
    /// watches, and raises `reconciler.stalled`.
    pub stalled_after: Duration,
    /// Tasks the conservation audit checks per reconciler pass.
    pub audit_batch: usize,
    /// Pending tasks of one kind beyond which a `backlog` alert is raised.
    pub backlog_alert: Option<u64>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            claim_batch: 256,
            complete_batch: 1000,
            poll_interval: Duration::from_millis(250),
            rescue_interval: Duration::from_secs(1),
            leader_lease: Duration::from_secs(5),
            leader_renew: Duration::from_secs(1),
            retention: RetentionPolicy::default(),
            retention_interval: Duration::from_secs(60),
            grace: Duration::from_secs(10),
            max_payload: DEFAULT_MAX_PAYLOAD,
            worker_id: None,
            node_beat: Duration::from_secs(5),
            overdue_after: Duration::from_secs(60),
            stalled_after: Duration::from_secs(30),
            audit_batch: 200,
            backlog_alert: None,
        }
    }
}

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("kind {0:?} has an in-process target but no handler is registered for it")]
    MissingHandler(String),
    #[error("a handler is registered for {0:?}, which is not a configured kind")]
    HandlerWithoutKind(String),
    #[error("kind {kind:?}: bad signing secret: {error}")]
    BadSecret { kind: String, error: String },
    #[error("kind {kind:?}: bad target URL {error}")]
    BadUrl { kind: String, error: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("kind {0:?} is configured twice")]
    DuplicateKind(String),
    #[error("machine {0:?} is configured twice")]
    DuplicateMachine(String),
    #[error(
        "inbound source {source_name:?} creates tasks of kind {kind:?}, which is not a configured kind"
    )]
    SourceKind { source_name: String, kind: String },
    #[error("inbound source {0:?} is configured twice")]
    DuplicateSource(String),
}

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) opts: EngineOptions,
    pub(crate) owner: String,
    pub(crate) inflight: Arc<InFlight>,
    pub(crate) kinds: HashMap<String, Arc<KindRuntime>>,
    pub(crate) configs: HashMap<String, KindConfig>,
    /// The state machines of entities, by name.
    pub(crate) machines: HashMap<String, Machine>,
    /// Woken by local enqueues of pull kinds, so long-polling lease requests return promptly.
    pub(crate) pull_wake: Notify,
    pub(crate) metrics: HashMap<String, Arc<KindMetrics>>,
    /// Whether this process leads (runs the singleton duties); set by the leader loop.
    pub(crate) leading: watch::Sender<bool>,
    pub(crate) alerts: Alerts,
    pub(crate) alert_opts: AlertOptions,
    /// When a worker last asked this process to lease each pull kind.
    pub(crate) pulled: std::sync::Mutex<HashMap<String, jiff::Timestamp>>,
    /// When this engine was built (the stall watch counts from here on a fresh database).
    pub(crate) started: jiff::Timestamp,
    /// Inbound callback sources, by name.
    pub(crate) sources: HashMap<String, CallbackSource>,
}

/// Collects kinds, handlers and options.
pub struct EngineBuilder {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    kinds: Vec<KindConfig>,
    handlers: HashMap<String, Handler>,
    machines: Vec<Machine>,
    opts: EngineOptions,
    alerts: AlertOptions,
    sources: Vec<CallbackSource>,
}

impl EngineBuilder {
    /// Adds an inbound callback source; its kind must be one of the engine's kinds.
    pub fn source(mut self, s: CallbackSource) -> Self {
        self.sources.push(s);
        self
    }

    /// Adds a kind.
    pub fn kind(mut self, k: KindConfig) -> Self {
        self.kinds.push(k);
        self
    }

    /// Registers the in-process handler of a kind.
    pub fn handler(mut self, kind: impl Into<String>, h: Handler) -> Self {
        self.handlers.insert(kind.into(), h);
        self
    }

    /// Adds a state machine for guarded state transitions ([`Engine::transition`]).
    pub fn machine(mut self, m: Machine) -> Self {
        self.machines.push(m);
        self
    }

    /// Replaces the clock (tests drive retry timing with a manual clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the options.
    pub fn options(mut self, opts: EngineOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Sets where alerts go; each sink adds its internal kind (`backstop.alert.<name>`).
    pub fn alerts(mut self, alerts: AlertOptions) -> Self {
        self.alerts = alerts;
        self
    }

    /// Checks the configuration and builds the engine.
    pub fn build(mut self) -> Result<Engine, EngineError> {
        let mut kinds = HashMap::new();
        let mut configs = HashMap::new();
        let mut metrics = HashMap::new();
        let mut client = None;
        for sink in &self.alerts.sinks {
            self.kinds.push(sink.kind());
        }
        for k in self.kinds {
            if configs.contains_key(&k.name) {
                return Err(EngineError::DuplicateKind(k.name));
            }
            let m = Arc::new(KindMetrics::new(&k.name));
            metrics.insert(k.name.clone(), m.clone());
            let executor = match &k.target {
                // Pull kinds have no dispatcher: workers lease them through `Engine::lease`.
                Target::Pull => {
                    configs.insert(k.name.clone(), k);
                    continue;
                }
                Target::InProcess => Executor::InProcess(
                    self.handlers
                        .remove(&k.name)
                        .ok_or_else(|| EngineError::MissingHandler(k.name.clone()))?,
                ),
                Target::HttpPush { url, secret } => {
                    let signer = secret
                        .as_deref()
                        .map(StandardWebhooks::from_secret)
                        .transpose()
                        .map_err(|e| EngineError::BadSecret {
                            kind: k.name.clone(),
                            error: e.to_string(),
                        })?;
                    if client.is_none() {
                        client = Some(
                            DeliveryClient::new()
                                .map_err(|e| EngineError::Client(e.to_string()))?,
                        );
                    }
                    let url = url.parse().map_err(|e| EngineError::BadUrl {
                        kind: k.name.clone(),
                        error: format!("{url:?}: {e}"),
                    })?;
                    Executor::Http(Box::new(HttpTarget {
                        url,
                        signer,
                        client: client.clone().expect("set above"),
                    }))
                }
            };
            configs.insert(k.name.clone(), k.clone());
            kinds.insert(
                k.name.clone(),
                Arc::new(KindRuntime {
                    config: k,
                    executor,
                    wake: Notify::new(),
                    metrics: m,
                }),
            );
        }
        if let Some(name) = self.handlers.into_keys().next() {
            return Err(EngineError::HandlerWithoutKind(name));
        }
        let mut machines = HashMap::new();
        for m in self.machines {
            if machines.contains_key(m.name()) {
                return Err(EngineError::DuplicateMachine(m.name().to_string()));
            }
            machines.insert(m.name().to_string(), m);
        }

        let mut sources = HashMap::new();
        for s in self.sources {
            if !configs.contains_key(&s.kind) {
                return Err(EngineError::SourceKind {
                    source_name: s.name,
                    kind: s.kind,
                });
            }
            if sources.contains_key(&s.name) {
                return Err(EngineError::DuplicateSource(s.name));
            }
            sources.insert(s.name.clone(), s);
        }
        let owner = self.opts.worker_id.clone().unwrap_or_else(crate::worker_id);
        let alerts = Alerts::new(configs.keys().map(String::as_str));
        let started = self.clock.now();
        Ok(Engine {
            shared: Arc::new(Shared {
                store: self.store,
                clock: self.clock,
                opts: self.opts,
                owner,
                inflight: Arc::new(InFlight::default()),
                kinds,
                configs,
                machines,
                pull_wake: Notify::new(),
                metrics,
                leading: watch::Sender::new(false),
                alerts,
                alert_opts: self.alerts,
                pulled: Default::default(),
                started,
                sources,
            }),
        })
    }
}

/// The engine. Cheap to clone: clones share one ledger and one set of kinds.
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl Engine {
    /// Starts building an engine on a store.
    pub fn builder(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder {
            store,
            clock: Arc::new(SystemClock),
            kinds: Vec::new(),
            handlers: HashMap::new(),
            machines: Vec::new(),
            opts: EngineOptions::default(),
            alerts: AlertOptions::default(),
            sources: Vec::new(),
        }
    }

    /// The store the engine runs on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// The configured kinds.
    pub fn kinds(&self) -> &HashMap<String, KindConfig> {
        &self.shared.configs
    }

    /// The clock the engine reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// The engine's options.
    pub fn options(&self) -> &EngineOptions {
        &self.shared.opts
    }

    /// This process's lease owner name.
    pub fn worker(&self) -> &str {
        &self.shared.owner
    }

    /// Whether this engine currently leads: runs the singleton duties (lease rescue, expiry,
    /// retention) for every process on its database.
    pub fn is_leader(&self) -> bool {
        *self.shared.leading.borrow()
    }

    /// Runs one reconciler pass now, as the leader would (tests drive it with a manual
    /// clock); returns what it did. Recorded as the reconciler's beat.
    pub async fn reconcile_once(&self) -> reconciler::PassReport {
        let leading = watch::channel(true).1;
        let previous = reconciler::last_pass(&self.shared).await;
        reconciler::pass(&self.shared, &leading, previous.as_ref()).await
    }

    /// Sends one alert to the configured sinks now, without waiting for a window (a one-shot
    /// command such as `backstop reconcile` has no window to wait for). Recorded as ledger
    /// tasks of the sinks' kinds, delivered by whichever process serves them.
    pub async fn send_alert(&self, e: alerts::AlertEvent) -> Result<(), EnqueueError> {
        alerts::send_now(&self.shared, e).await
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
        let now = self.shared.clock.now();
        let batch = rs.len() > 1;
        let tasks = rs
            .into_iter()
            .enumerate()
            .map(|(index, r)| {
                enqueue::prepare(&self.shared.configs, r, now, self.shared.opts.max_payload)
                    .map_err(|error| match batch {
                        true => EnqueueError::Item {
                            index,
                            error: Box::new(error),
                        },
                        false => error,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let keys: Vec<(String, String)> = tasks
            .iter()
            .map(|t| (t.kind.clone(), t.key.clone()))
            .collect();
        let results = self
            .shared
            .store
            .enqueue(EnqueueParams { tasks, now })
            .await?;
        let mut out = Vec::with_capacity(results.len());
        for (r, (kind, key)) in results.into_iter().zip(keys) {
            match self.shared.kinds.get(&kind) {
                Some(k) => k.wake.notify_one(),
                None => self.shared.pull_wake.notify_waiters(),
            }
            if matches!(r, EnqueueResult::Created(_))
                && let Some(m) = self.shared.metrics.get(&kind)
            {
                m.enqueued.increment(1);
            }
            out.push(match r {
                EnqueueResult::Created(id) => Ok(Enqueued { id, created: true }),
                EnqueueResult::Existing(id) => Ok(Enqueued { id, created: false }),
                EnqueueResult::Conflict(existing) => Err(EnqueueError::Conflict {
                    kind,
                    key,
                    existing,
                }),
            });
        }
        Ok(out)
    }

    /// Runs until `shutdown` resolves (call it once per engine), then stops claiming, lets in-flight attempts finish
    /// within the grace period, writes their outcomes and releases the rest.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let shared = &self.shared;
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = mpsc::channel(shared.opts.complete_batch * 8);
        let completer = tokio::spawn(completer::run(
            shared.clone(),
            done_rx,
            shared.opts.complete_batch,
            stop_rx.clone(),
            shared.opts.grace,
        ));
        let min_lease = shared
            .configs
            .values()
            .map(|k| k.lease)
            .min()
            .unwrap_or(Duration::from_secs(60));
        let heartbeat = tokio::spawn(heartbeat::run(
            shared.store.clone(),
            shared.clock.clone(),
            shared.inflight.clone(),
            shared.owner.clone(),
            (min_lease / 6).max(Duration::from_millis(100)),
            stop_rx.clone(),
        ));
        let leader = tokio::spawn(leader::run(shared.clone(), stop_rx.clone()));
        let reconciler = tokio::spawn(reconciler::run(shared.clone(), stop_rx.clone()));
        let nodes = tokio::spawn(reconciler::nodes::run(shared.clone(), stop_rx.clone()));
        let alerter = tokio::spawn(alerts::run(
            shared.clone(),
            shared.alert_opts.clone(),
            stop_rx.clone(),
        ));
        let pruner = tokio::spawn(retention::run(
            shared.store.clone(),
            shared.clock.clone(),
            shared.opts.retention.clone(),
            shared.opts.retention_interval,
            shared.leading.subscribe(),
            stop_rx.clone(),
        ));
        let mut dispatchers = Vec::new();
        for kind in shared.kinds.values().filter(|k| !k.config.paused) {
            dispatchers.push(tokio::spawn(dispatcher::run(
                shared.clone(),
                kind.clone(),
                done_tx.clone(),
                stop_rx.clone(),
            )));
        }
        drop(done_tx);
        let wakeups = crate::wakeups::spawn(shared);
        tracing::info!(
            worker = %shared.owner,
            push_or_in_process = shared.kinds.len(),
            pull = shared
                .configs
                .values()
                .filter(|k| matches!(k.target, Target::Pull))
                .count(),
            "engine started"
        );

        shutdown.await;
        tracing::info!(
            in_flight = shared.inflight.len(),
            "shutting down: no new claims"
        );
        let _ = stop_tx.send(true);
        for d in dispatchers {
            let _ = d.await;
        }
        if let Some(w) = wakeups {
            w.abort();
        }
        let deadline = Instant::now() + shared.opts.grace;
        while shared.inflight.len() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let unfinished = shared.inflight.abort_all();
        // Every finished attempt's sender is gone now; the completer drains and stops.
        let _ = completer.await;
        if !unfinished.is_empty() {
            let now = shared.clock.now();
            match shared
                .store
                .release(ReleaseParams {
                    leases: unfinished.clone(),
                    worker: shared.owner.clone(),
                    now,
                })
                .await
            {
                Ok(n) => tracing::warn!(
                    released = n,
                    "grace period over: released unfinished attempts"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "releasing leases failed; they will be rescued when they expire")
                }
            }
        }
        let _ = heartbeat.await;
        let _ = reconciler.await;
        let _ = nodes.await;
        let _ = alerter.await;
        let _ = pruner.await;
        let _ = leader.await;
        tracing::info!("engine stopped");
    }
}
