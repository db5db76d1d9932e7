//! Every process beats a `node:<owner>` row with the kinds it serves, so that the reconciler
//! can tell "no dispatcher alive" from "dispatcher behind"; and every process watches the
//! reconciler's own beat, raising `reconciler.stalled` when it goes stale: the watcher is
//! watched.

use crate::alerts::{AlertEvent, AlertName};
use crate::engine::Shared;
use backstop_core::Target;
use backstop_core::clock::add;
use backstop_core::store::BeatsParams;
use backstop_core::store::{Beat, BeatParams, ForgetBeatsParams};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

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

fn detail(shared: &Shared) -> String {
    let kinds = shared
        .configs
        .values()
        .map(|k| {
            let pull = k.target == Target::Pull;
            let served = ServedKind {
                concurrency: if pull { 0 } else { k.concurrency },
                paused: k.paused,
                pull,
            };
            (k.name.clone(), served)
        })
        .collect();
    let pulled = shared.pulled.lock().expect("not poisoned").clone();
    serde_json::to_string(&Detail { kinds, pulled }).expect("plain data")
}

/// A node is live while its last beat is younger than this many beat intervals.
const LIVE_BEATS: i32 = 3;

/// The processes whose beat is fresh at `now`.
pub(crate) async fn live(shared: &Shared, now: Timestamp) -> Vec<NodeBeat> {
    let every = SignedDuration::try_from(shared.opts.node_beat).unwrap_or(SignedDuration::MAX);
    let fresh_since = now - every * LIVE_BEATS;
    match shared
        .store
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

/// Beats this process's node row and checks the reconciler's beat, every `node_beat`, until
/// `stop`. The leader also forgets processes gone for an hour.
pub(crate) async fn run(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut stalled = false;
    loop {
        let now = shared.clock.now();
        let beat = shared.store.beat(BeatParams {
            name: format!("{NODE_PREFIX}{}", shared.owner),
            owner: shared.owner.clone(),
            at: now,
            detail: detail(&shared),
        });
        if let Err(e) = beat.await {
            tracing::warn!(error = %e, "recording this process's beat failed");
        }
        stalled = watch_reconciler(&shared, now, stalled).await;
        if *shared.leading.borrow() {
            let _ = shared
                .store
                .forget_beats(ForgetBeatsParams {
                    prefix: NODE_PREFIX.into(),
                    before: now - SignedDuration::from_hours(1),
                })
                .await;
        }
        tokio::select! {
            _ = tokio::time::sleep(shared.opts.node_beat) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Raises `reconciler.stalled` once per stall (and logs its end); returns whether it is
/// stalled now.
async fn watch_reconciler(shared: &Shared, now: Timestamp, was: bool) -> bool {
    let last = match shared
        .store
        .beats(BeatsParams {
            prefix: super::RECONCILER_BEAT.to_string(),
        })
        .await
    {
        Ok(b) => b.into_iter().find(|b| b.name == super::RECONCILER_BEAT),
        Err(e) => {
            tracing::warn!(error = %e, "reading the reconciler's beat failed");
            return was;
        }
    };
    // A fresh database has no beat yet: count from this process's start instead.
    let since = last.as_ref().map_or(shared.started, |b| b.at);
    let stalled = now > add(since, shared.opts.stalled_after);
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
        shared
            .alerts
            .raise(AlertEvent::new(AlertName::ReconcilerStalled, detail));
    } else if !stalled && was {
        tracing::info!("the reconciler is passing again");
        crate::metrics::reconciler_stalled(false);
    }
    stalled
}
