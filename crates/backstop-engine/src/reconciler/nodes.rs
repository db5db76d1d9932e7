//! Every process beats a `node:<owner>` row with the kinds it serves, so that the reconciler
//! can tell "no dispatcher alive" from "dispatcher behind"; and every process watches the
//! reconciler's own beat, raising `reconciler.stalled` when it goes stale: the watcher is
//! watched.

use crate::alerts::event::{AlertEvent, AlertName};
use crate::context::{AlertHub, Context, Delivery, Kinds};
use crate::options::EngineOptions;
use backstop_core::Clock;
use backstop_core::clock::add;
use backstop_core::store::BeatsParams;
use backstop_core::store::Cluster;
use backstop_core::store::{Beat, BeatParams, ForgetBeatsParams};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The beat name of the reconciler's passes, which every process watches.
pub const RECONCILER_BEAT: &str = "reconciler";

/// Beat names of processes start with this.
pub const NODE_PREFIX: &str = "node:";

/// How a process serves one kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedKind {
    /// Attempts it runs at once (0 for pull kinds: their workers decide).
    pub concurrency: usize,
    pub paused: bool,
    /// Leased by workers over the API rather than dispatched.
    pub pull: bool,
}

/// A live process as its beat describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeBeat {
    pub owner: String,
    #[serde(with = "backstop_core::wire_time")]
    pub at: Timestamp,
    pub kinds: HashMap<String, ServedKind>,
    /// When a worker last asked this process for a lease, per pull kind.
    #[serde(default)]
    pub pulled: HashMap<String, Timestamp>,
}

#[derive(Serialize, Deserialize)]
struct Detail {
    kinds: HashMap<String, ServedKind>,
    #[serde(default)]
    pulled: HashMap<String, Timestamp>,
}

impl NodeBeat {
    /// Reads a stored beat; `None` when it is not a node's or cannot be read.
    pub fn from_beat(b: &Beat) -> Option<Self> {
        let owner = b.name.strip_prefix(NODE_PREFIX)?.to_string();
        let d: Detail = serde_json::from_str(&b.detail).ok()?;
        Some(NodeBeat {
            owner,
            at: b.at,
            kinds: d.kinds,
            pulled: d.pulled,
        })
    }
}

/// A process's beat loop, with what it uses.
pub(crate) struct Nodes {
    store: Arc<dyn Cluster>,
    clock: Arc<dyn Clock>,
    owner: Arc<str>,
    /// The kinds this process serves, as its beat describes them.
    kinds: Arc<Kinds>,
    alerts: AlertHub,
    leading: watch::Receiver<bool>,
    every: Duration,
    stalled_after: Duration,
    /// When this engine was built: a fresh database has no reconciler beat to count from.
    started: Timestamp,
}

impl Nodes {
    pub(crate) fn new(
        ctx: &Context,
        opts: &EngineOptions,
        leading: watch::Receiver<bool>,
        started: Timestamp,
    ) -> Self {
        Nodes {
            store: ctx.store.clone(),
            clock: ctx.clock.clone(),
            owner: ctx.owner.clone(),
            kinds: ctx.kinds.clone(),
            alerts: ctx.alerts.clone(),
            leading,
            every: opts.node_beat,
            stalled_after: opts.stalled_after,
            started,
        }
    }

    /// Beats this process's node row and checks the reconciler's beat, every `node_beat`,
    /// until `stop`. The leader also forgets processes gone for an hour.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut stalled = false;
        loop {
            let now = self.clock.now();
            let beat = self.store.beat(BeatParams {
                name: format!("{NODE_PREFIX}{}", self.owner),
                owner: self.owner.to_string(),
                at: now,
                detail: self.detail(),
            });
            if let Err(e) = beat.await {
                tracing::warn!(error = %e, "recording this process's beat failed");
            }
            stalled = self.watch_reconciler(now, stalled).await;
            if *self.leading.borrow() {
                let _ = self
                    .store
                    .forget_beats(ForgetBeatsParams {
                        prefix: NODE_PREFIX.into(),
                        before: now - SignedDuration::from_hours(1),
                    })
                    .await;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                _ = stop.changed() => return,
            }
        }
    }

    fn detail(&self) -> String {
        let mut kinds = HashMap::new();
        let mut pulled = HashMap::new();
        for k in self.kinds.all() {
            let pull = k.delivery == Delivery::Pulled;
            let c = &k.config;
            let served = ServedKind {
                concurrency: if pull { 0 } else { c.concurrency },
                // In config, by hand, by its breaker or a Retry-After: as this process's gate says.
                paused: c.paused || k.gate.is_closed(),
                pull,
            };
            kinds.insert(c.name.clone(), served);
            if let Some(at) = *k.pulled.lock().expect("not poisoned") {
                pulled.insert(c.name.clone(), at);
            }
        }
        serde_json::to_string(&Detail { kinds, pulled }).expect("plain data")
    }

    /// Raises `reconciler.stalled` once per stall (and logs its end); returns whether it is
    /// stalled now.
    async fn watch_reconciler(&self, now: Timestamp, was: bool) -> bool {
        let last = match self
            .store
            .beats(BeatsParams {
                prefix: RECONCILER_BEAT.to_string(),
            })
            .await
        {
            Ok(b) => b.into_iter().find(|b| b.name == RECONCILER_BEAT),
            Err(e) => {
                tracing::warn!(error = %e, "reading the reconciler's beat failed");
                return was;
            }
        };
        // A fresh database has no beat yet: count from this process's start instead.
        let since = last.as_ref().map_or(self.started, |b| b.at);
        let stalled = now > add(since, self.stalled_after);
        if stalled && !was {
            let age = (now - since).round(jiff::Unit::Second).unwrap_or_default();
            let detail = match &last {
                Some(b) => format!(
                    "the reconciler's last pass was {age:#} ago (by {}); nothing rescues expired leases or finds overdue work meanwhile",
                    b.owner
                ),
                None => format!("no reconciler pass has been recorded in {age:#}"),
            };
            tracing::error!(%detail, "reconciler stalled");
            crate::metrics::reconciler_stalled(true);
            self.alerts
                .raise(AlertEvent::new(AlertName::ReconcilerStalled, detail));
        } else if !stalled && was {
            tracing::info!("the reconciler is passing again");
            crate::metrics::reconciler_stalled(false);
        }
        stalled
    }
}

/// A node is live while its last beat is younger than this many beat intervals.
const LIVE_BEATS: i32 = 3;

/// The processes whose beat (every `every`) is fresh at `now`.
pub(crate) async fn live(store: &dyn Cluster, every: Duration, now: Timestamp) -> Vec<NodeBeat> {
    let every = SignedDuration::try_from(every).unwrap_or(SignedDuration::MAX);
    let fresh_since = now - every * LIVE_BEATS;
    match store
        .beats(BeatsParams {
            prefix: NODE_PREFIX.to_string(),
        })
        .await
    {
        Ok(beats) => beats
            .iter()
            .filter(|b| b.at >= fresh_since)
            .filter_map(NodeBeat::from_beat)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "reading process beats failed");
            Vec::new()
        }
    }
}
