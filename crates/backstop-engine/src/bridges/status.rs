//! What a bridge reports: its state, whether it is connected, and its conservation counts
//! (received = inserted + deduplicated + rejected + in flight), as metrics, as a view for the
//! API and CLI, and as the detail of its beat.

use jiff::Timestamp;
use metrics::{Counter, Gauge, counter, gauge};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Metric names.
pub mod names {
    pub const RECEIVED: &str = "backstop_bridge_received_total";
    pub const INSERTED: &str = "backstop_bridge_inserted_total";
    pub const DEDUPLICATED: &str = "backstop_bridge_deduplicated_total";
    pub const REJECTED: &str = "backstop_bridge_rejected_total";
    pub const CONNECTED: &str = "backstop_bridge_connected";
    pub const IN_FLIGHT: &str = "backstop_bridge_in_flight";
    pub const RECONNECTS: &str = "backstop_bridge_reconnects_total";
    pub const ACK_PENDING: &str = "backstop_bridge_ack_pending";
}

/// Where a bridge is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeState {
    /// Connecting (first time or again).
    Connecting,
    /// Consuming.
    Running,
    /// Connection lost or refused; trying again after a pause.
    Reconnecting,
    /// The broker refuses the configuration (a conflicting queue, a missing one): retried
    /// slowly in case an operator fixes it, alerting meanwhile.
    Refused,
    /// Stopped with the process.
    Stopped,
}

impl BridgeState {
    /// The name listings and the API show (`running`, `reconnecting` …).
    pub fn as_str(self) -> &'static str {
        match self {
            BridgeState::Connecting => "connecting",
            BridgeState::Running => "running",
            BridgeState::Reconnecting => "reconnecting",
            BridgeState::Refused => "refused",
            BridgeState::Stopped => "stopped",
        }
    }
}

/// One bridge as listed by `backstop bridges list` and `GET /v1/bridges`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BridgeView {
    pub name: String,
    /// The process running it (its lease owner name).
    pub worker: String,
    pub state: BridgeState,
    pub connected: bool,
    /// The broker, password hidden.
    pub broker: String,
    /// What it consumes, e.g. `queue "sms.requests"`.
    pub source: String,
    pub kind: String,
    pub dead_letters: bool,
    pub received: u64,
    pub inserted: u64,
    pub deduplicated: u64,
    pub rejected: u64,
    pub in_flight: u64,
    /// received = inserted + deduplicated + rejected + in_flight.
    pub balanced: bool,
    pub reconnects: u64,
    /// The last connection or refusal error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Since when it is in its state.
    #[serde(with = "backstop_core::wire_time")]
    pub since: Timestamp,
    /// When this view was taken (a beat's time for another process's bridge).
    #[serde(with = "backstop_core::wire_time")]
    pub seen_at: Timestamp,
    /// Deliveries its broker holds unacknowledged, against the broker's limit of them, for a
    /// broker that stops delivering at that limit (JetStream's `MaxAckPending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_pending: Option<AckPendingView>,
    /// Its last beat is older than three beat intervals: the process may be gone, and the
    /// state shown is only what it last said.
    #[serde(default)]
    pub stale: bool,
}

/// Unacknowledged deliveries against the broker's limit, as last read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckPendingView {
    pub pending: u64,
    pub max: u64,
}

impl AckPendingView {
    /// At or past nine tenths of the limit: the broker is about to stop delivering.
    pub fn near_limit(&self) -> bool {
        self.max > 0 && self.pending * 10 >= self.max * 9
    }
}

/// The live status of one bridge, shared by its loop and the engine handle.
pub(crate) struct BridgeStatus {
    pub(crate) name: String,
    broker: String,
    source: String,
    kind: String,
    dead_letters: bool,
    /// One lock for all the counts, so every view is one consistent snapshot.
    counts: Mutex<Counts>,
    reconnects: AtomicU64,
    state: Mutex<(BridgeState, Timestamp, Option<String>)>,
    ack_pending: Mutex<Option<AckPendingView>>,
    m: Metrics,
}

/// The conservation counts: received = inserted + deduplicated + rejected + in flight.
#[derive(Clone, Copy, Default)]
struct Counts {
    /// Settled (taken by the ledger), whatever became of them.
    settled: u64,
    inserted: u64,
    deduplicated: u64,
    rejected: u64,
    in_flight: u64,
}

struct Metrics {
    received: Counter,
    inserted: Counter,
    deduplicated: Counter,
    rejected: Counter,
    reconnects: Counter,
    connected: Gauge,
    in_flight: Gauge,
    ack_pending: Gauge,
}

impl BridgeStatus {
    pub(crate) fn new(c: &backstop_core::broker::BridgeConfig, now: Timestamp) -> Self {
        let b = c.name.clone();
        let source = match &c.source {
            backstop_core::broker::BridgeSource::AmqpQueue(q) => format!("queue {:?}", q.queue),
            backstop_core::broker::BridgeSource::RedisList { list, .. } => {
                format!("list {list:?}")
            }
            backstop_core::broker::BridgeSource::RedisStream { stream, group, .. } => {
                format!("stream {stream:?} group {group:?}")
            }
            backstop_core::broker::BridgeSource::KafkaTopic { topic, group } => {
                format!("topic {topic:?} group {group:?}")
            }
            backstop_core::broker::BridgeSource::NatsStream(n) => {
                format!("stream {:?} consumer {:?}", n.stream, n.consumer)
            }
        };
        BridgeStatus {
            name: c.name.clone(),
            broker: c.broker.redacted(),
            source,
            kind: c.kind.clone(),
            dead_letters: c.dead_letters,
            counts: Mutex::new(Counts::default()),
            reconnects: AtomicU64::new(0),
            state: Mutex::new((BridgeState::Connecting, now, None)),
            ack_pending: Mutex::new(None),
            m: Metrics {
                received: counter!(names::RECEIVED, "bridge" => b.clone()),
                inserted: counter!(names::INSERTED, "bridge" => b.clone()),
                deduplicated: counter!(names::DEDUPLICATED, "bridge" => b.clone()),
                rejected: counter!(names::REJECTED, "bridge" => b.clone()),
                reconnects: counter!(names::RECONNECTS, "bridge" => b.clone()),
                connected: gauge!(names::CONNECTED, "bridge" => b.clone()),
                in_flight: gauge!(names::IN_FLIGHT, "bridge" => b.clone()),
                ack_pending: gauge!(names::ACK_PENDING, "bridge" => b),
            },
        }
    }

    /// A batch was received: in flight until settled, counted as received then (a counter
    /// cannot take back what a stop before the commit leaves to the broker).
    pub(crate) fn received(&self, n: u64) {
        self.counts.lock().expect("not poisoned").in_flight += n;
        self.m.in_flight.increment(n as f64);
    }

    /// A batch's messages are in the ledger: new, already there, or rejected.
    pub(crate) fn settled(&self, inserted: u64, deduplicated: u64, rejected: u64) {
        let n = inserted + deduplicated + rejected;
        {
            let mut c = self.counts.lock().expect("not poisoned");
            c.settled += n;
            c.inserted += inserted;
            c.deduplicated += deduplicated;
            c.rejected += rejected;
            c.in_flight = c.in_flight.saturating_sub(n);
        }
        self.m.received.increment(n);
        self.m.inserted.increment(inserted);
        self.m.deduplicated.increment(deduplicated);
        self.m.rejected.increment(rejected);
        self.m.in_flight.decrement(n as f64);
    }

    /// Messages received but never settled (stopped before their commit): the broker delivers
    /// them again, and they are counted then.
    pub(crate) fn abandoned(&self, n: u64) {
        let mut c = self.counts.lock().expect("not poisoned");
        c.in_flight = c.in_flight.saturating_sub(n);
        self.m.in_flight.decrement(n as f64);
    }

    /// Enters `state`; `error` says why when it is not running.
    pub(crate) fn set(&self, state: BridgeState, now: Timestamp, error: Option<String>) {
        let mut s = self.state.lock().expect("not poisoned");
        if s.0 != state {
            s.1 = now;
        }
        if state == BridgeState::Reconnecting && s.0 == BridgeState::Running {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            self.m.reconnects.increment(1);
        }
        s.0 = state;
        if error.is_some() || state == BridgeState::Running {
            s.2 = error;
        }
        self.m
            .connected
            .set(f64::from(u8::from(state == BridgeState::Running)));
    }

    /// The broker's count of unacknowledged deliveries, as just read.
    pub(crate) fn set_ack_pending(&self, a: AckPendingView) {
        *self.ack_pending.lock().expect("not poisoned") = Some(a);
        self.m.ack_pending.set(a.pending as f64);
    }

    /// Since when it has not been running, if it is not.
    pub(crate) fn down_since(&self) -> Option<Timestamp> {
        let s = self.state.lock().expect("not poisoned");
        match s.0 {
            BridgeState::Running | BridgeState::Stopped => None,
            _ => Some(s.1),
        }
    }

    /// The view as of `now`.
    pub(crate) fn view(&self, worker: &str, now: Timestamp) -> BridgeView {
        let (state, since, last_error) = self.state.lock().expect("not poisoned").clone();
        let c = *self.counts.lock().expect("not poisoned");
        BridgeView {
            name: self.name.clone(),
            worker: worker.to_string(),
            state,
            connected: state == BridgeState::Running,
            broker: self.broker.clone(),
            source: self.source.clone(),
            kind: self.kind.clone(),
            dead_letters: self.dead_letters,
            received: c.settled + c.in_flight,
            inserted: c.inserted,
            deduplicated: c.deduplicated,
            rejected: c.rejected,
            in_flight: c.in_flight,
            balanced: c.settled == c.inserted + c.deduplicated + c.rejected,
            reconnects: self.reconnects.load(Ordering::Relaxed),
            last_error,
            since,
            seen_at: now,
            ack_pending: *self.ack_pending.lock().expect("not poisoned"),
            stale: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::BridgeState;

    #[test]
    fn a_state_shows_as_it_serialises() {
        for s in [
            BridgeState::Connecting,
            BridgeState::Running,
            BridgeState::Reconnecting,
            BridgeState::Refused,
            BridgeState::Stopped,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
