//! Building an engine: kinds, their handlers, machines, sources and options, checked once.

use crate::alerts::AlertOptions;
use crate::bridges::status::BridgeStatus;
use crate::callbacks::source::CallbackSource;
use crate::context::{AlertHub, Context, Kinds};
use crate::engine::{Engine, Parts};
use crate::error::EngineError;
use crate::executor::{Executor, HttpTarget};
use crate::handler::Handler;
use crate::inflight::InFlight;
use crate::options::EngineOptions;
use backstop_core::broker::BridgeConfig;
use backstop_core::schedule::Schedule;
use backstop_core::{Clock, KindConfig, Machine, Store, SystemClock, Target};
use backstop_webhooks::{DeliveryClient, StandardWebhooks};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

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
    bridges: Vec<BridgeConfig>,
    schedules: Vec<Schedule>,
}

impl EngineBuilder {
    /// Adds an inbound callback source; its kind must be one of the engine's kinds.
    pub fn source(mut self, s: CallbackSource) -> Self {
        self.sources.push(s);
        self
    }

    /// Adds a broker bridge; its kind must be one of the engine's kinds.
    pub fn bridge(mut self, b: BridgeConfig) -> Self {
        self.bridges.push(b);
        self
    }

    /// Adds a schedule; its kind must be one of the engine's kinds.
    pub fn schedule(mut self, s: Schedule) -> Self {
        self.schedules.push(s);
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
        let mut configs: Vec<KindConfig> = Vec::new();
        let mut executors = HashMap::new();
        let mut client = None;
        for sink in &self.alerts.sinks {
            self.kinds.push(sink.kind());
        }
        for k in self.kinds {
            if configs.iter().any(|c| c.name == k.name) {
                return Err(EngineError::DuplicateKind(k.name));
            }
            let executor = match &k.target {
                // Pull kinds have no dispatcher: workers lease them through `Engine::lease`.
                Target::Pull => None,
                Target::Broker(b) => Some(Executor::Broker(backstop_brokers::publisher(b))),
                Target::InProcess => Some(Executor::InProcess(
                    self.handlers
                        .remove(&k.name)
                        .ok_or_else(|| EngineError::MissingHandler(k.name.clone()))?,
                )),
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
                    Some(Executor::Http(Box::new(HttpTarget {
                        url,
                        signer,
                        client: client.clone().expect("set above"),
                    })))
                }
            };
            if let Some(x) = executor {
                executors.insert(k.name.clone(), Arc::new(x));
            }
            configs.push(k);
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
        for k in &configs {
            if let Some(r) = &k.requires {
                let Some(m) = machines.get(&r.machine) else {
                    return Err(EngineError::Requires {
                        kind: k.name.clone(),
                        error: format!("machine {:?} is not configured", r.machine),
                    });
                };
                if let Some(s) = r.states.iter().find(|s| !m.has_state(s)) {
                    return Err(EngineError::Requires {
                        kind: k.name.clone(),
                        error: format!("{s:?} is not a state of machine {:?}", r.machine),
                    });
                }
            }
        }
        let kinds = Kinds::new(configs, &machines);
        let mut sources = HashMap::new();
        for s in self.sources {
            if kinds.get(&s.kind).is_none() {
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
        let mut bridges: Vec<(BridgeConfig, Arc<BridgeStatus>)> = Vec::new();
        for b in self.bridges {
            if kinds.get(&b.kind).is_none() {
                return Err(EngineError::BridgeKind {
                    bridge: b.name,
                    kind: b.kind,
                });
            }
            if bridges.iter().any(|(c, _)| c.name == b.name) {
                return Err(EngineError::DuplicateBridge(b.name));
            }
            let status = Arc::new(BridgeStatus::new(&b, self.clock.now()));
            bridges.push((b, status));
        }
        let mut schedules: Vec<Schedule> = Vec::new();
        for s in self.schedules {
            if kinds.get(&s.kind).is_none() {
                return Err(EngineError::ScheduleKind {
                    schedule: s.name,
                    kind: s.kind,
                });
            }
            if schedules.iter().any(|c| c.name == s.name) {
                return Err(EngineError::DuplicateSchedule(s.name));
            }
            schedules.push(s);
        }
        let owner = self.opts.worker_id.clone().unwrap_or_else(crate::worker_id);
        let alerts = AlertHub::new(kinds.configs().keys().map(String::as_str));
        let started = self.clock.now();
        let schedules: Arc<[Schedule]> = schedules.into();
        Ok(Engine {
            ctx: Arc::new(Context {
                store: self.store,
                clock: self.clock,
                owner: owner.into(),
                kinds: Arc::new(kinds),
                alerts,
                schedules: schedules.clone(),
            }),
            parts: Arc::new(Parts {
                opts: self.opts,
                alert_opts: self.alerts,
                executors,
                machines,
                sources,
                bridges,
                inflight: Arc::new(InFlight::default()),
                leading: watch::Sender::new(false),
                started,
                schedules,
            }),
        })
    }
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
            bridges: Vec::new(),
            schedules: Vec::new(),
        }
    }
}
