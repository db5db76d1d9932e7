//! The engine's tuning.

use crate::retention::RetentionPolicy;
use backstop_core::validate::DEFAULT_MAX_PAYLOAD;
use std::time::Duration;

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
    /// How often each broker bridge records its status (its beat).
    pub bridge_beat: Duration,
    /// A bridge down (disconnected or refused) this long raises `bridge.down`.
    pub bridge_down_alert: Duration,
    /// For fault drills only: how long a bridge waits between a batch's commit and its ack,
    /// to widen the window a crash must hit to leave committed messages unacknowledged
    /// (default zero).
    pub bridge_ack_delay: Duration,
    /// How often each process reads the kinds' pauses (by hand, by a breaker, by a
    /// `Retry-After`): another process's pause or resume applies here within about this long.
    pub pause_watch: Duration,
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
            bridge_beat: Duration::from_secs(5),
            bridge_down_alert: Duration::from_secs(60),
            bridge_ack_delay: Duration::ZERO,
            pause_watch: Duration::from_secs(1),
        }
    }
}
