//! What the engine counts, through the `metrics` facade: the binary installs a Prometheus
//! recorder before building the engine; without one every handle is a no-op. Per-kind handles
//! are made once, so the hot path does no label lookups.

use backstop_core::AttemptOutcome;
use metrics::{Counter, Histogram, counter, gauge, histogram};
use std::time::Duration;

/// Metric names, shared with the server's documentation.
pub mod names {
    pub const ENQUEUED: &str = "backstop_tasks_enqueued_total";
    pub const ATTEMPTS: &str = "backstop_attempts_total";
    pub const OUTCOMES: &str = "backstop_attempt_outcomes_total";
    pub const ATTEMPT_SECONDS: &str = "backstop_attempt_duration_seconds";
    pub const START_DELAY_SECONDS: &str = "backstop_enqueue_to_start_seconds";
    pub const RESCUES: &str = "backstop_lease_rescues_total";
    pub const STALE: &str = "backstop_stale_completions_total";
    pub const LEADER: &str = "backstop_leader";
    pub const WAKEUP_CONNECTED: &str = "backstop_wakeup_listener_connected";
    pub const WAKEUP_RECONNECTS: &str = "backstop_wakeup_listener_reconnects_total";
    pub const WAKEUP_NOTIFICATIONS: &str = "backstop_wakeup_notifications_total";
    pub const WAKEUP_LAST: &str = "backstop_wakeup_last_notification_timestamp_seconds";
    pub const RECONCILER_PASSES: &str = "backstop_reconciler_passes_total";
    pub const RECONCILER_PASS_SECONDS: &str = "backstop_reconciler_pass_duration_seconds";
    pub const RECONCILER_STALLED: &str = "backstop_reconciler_stalled";
    pub const OVERDUE: &str = "backstop_overdue_tasks";
    pub const DRIFT: &str = "backstop_audit_drift_total";
    pub const ALERTS: &str = "backstop_alerts_raised_total";
    pub const TRANSITIONS: &str = "backstop_entity_transitions_total";
    pub const CALLBACKS: &str = "backstop_callbacks_total";
    pub const KIND_PAUSED: &str = "backstop_kind_paused";
    pub const BREAKER_TRIPS: &str = "backstop_breaker_trips_total";
    pub const BREAKER_PROBES: &str = "backstop_breaker_probes_total";
}

/// Handles for one kind.
pub(crate) struct KindMetrics {
    pub(crate) enqueued: Counter,
    pub(crate) attempts: Counter,
    pub(crate) duration: Histogram,
    pub(crate) start_delay: Histogram,
    outcomes: [Counter; 7],
}

const OUTCOMES: [AttemptOutcome; 7] = [
    AttemptOutcome::Succeeded,
    AttemptOutcome::Retry,
    AttemptOutcome::Failed,
    AttemptOutcome::Skipped,
    AttemptOutcome::Expired,
    AttemptOutcome::LeaseExpired,
    AttemptOutcome::Interrupted,
];

impl KindMetrics {
    pub(crate) fn new(kind: &str) -> Self {
        let k = kind.to_string();
        KindMetrics {
            enqueued: counter!(names::ENQUEUED, "kind" => k.clone()),
            attempts: counter!(names::ATTEMPTS, "kind" => k.clone()),
            duration: histogram!(names::ATTEMPT_SECONDS, "kind" => k.clone()),
            start_delay: histogram!(names::START_DELAY_SECONDS, "kind" => k.clone()),
            outcomes: OUTCOMES
                .map(|o| counter!(names::OUTCOMES, "kind" => k.clone(), "outcome" => o.as_str())),
        }
    }

    /// Counts an attempt's outcome and how long it took.
    pub(crate) fn ended(&self, outcome: AttemptOutcome, took: Duration) {
        let i = OUTCOMES.iter().position(|o| *o == outcome).expect("listed");
        self.outcomes[i].increment(1);
        self.duration.record(took.as_secs_f64());
    }
}

/// Counts one rescued lease.
pub(crate) fn rescued(kind: &str) {
    counter!(names::RESCUES, "kind" => kind.to_string()).increment(1);
}

/// Counts stale completions rejected by the fence.
pub(crate) fn stale(n: usize) {
    if n > 0 {
        counter!(names::STALE).increment(n as u64);
    }
}

/// Seconds from when a task became due (enqueued, or its `run_at` when later) to `started`.
pub(crate) fn since_due(task: &backstop_core::store::ClaimedTask, started: jiff::Timestamp) -> f64 {
    let due = task.run_at.max(task.created_at);
    let d = started.as_millisecond() - due.as_millisecond();
    d.max(0) as f64 / 1000.0
}

/// Sets the leadership gauge: 1 while this process holds leadership `name`, else 0. Described
/// here, where it is set, so that the exposition carries its help text.
pub(crate) fn leader(name: &str, leading: bool) {
    static DESCRIBED: std::sync::Once = std::sync::Once::new();
    DESCRIBED.call_once(|| {
        metrics::describe_gauge!(
            names::LEADER,
            "1 while this process leads (runs the singleton duties such as lease rescue), else 0."
        );
    });
    gauge!(names::LEADER, "name" => name.to_string()).set(if leading { 1.0 } else { 0.0 });
}

static WAKEUP_DESCRIBED: std::sync::Once = std::sync::Once::new();

fn describe_wakeups() {
    WAKEUP_DESCRIBED.call_once(|| {
        metrics::describe_gauge!(
            names::WAKEUP_CONNECTED,
            "1 while the store's wake-up listener (PostgreSQL LISTEN) is connected, else 0."
        );
        metrics::describe_counter!(
            names::WAKEUP_RECONNECTS,
            "Times the wake-up listener reconnected after losing its connection."
        );
        metrics::describe_counter!(
            names::WAKEUP_NOTIFICATIONS,
            "Notifications of new work received by the wake-up listener."
        );
        metrics::describe_gauge!(
            names::WAKEUP_LAST,
            "Unix time of the last notification the wake-up listener received."
        );
    });
}

/// Sets the wake-up listener's connected gauge.
pub(crate) fn wakeup_connected(connected: bool) {
    describe_wakeups();
    gauge!(names::WAKEUP_CONNECTED).set(if connected { 1.0 } else { 0.0 });
}

/// Counts one reconnection of the wake-up listener.
pub(crate) fn wakeup_reconnected() {
    counter!(names::WAKEUP_RECONNECTS).increment(1);
}

/// Counts one notification and records when it came.
pub(crate) fn wakeup_notified() {
    counter!(names::WAKEUP_NOTIFICATIONS).increment(1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    gauge!(names::WAKEUP_LAST).set(now.as_secs_f64());
}

/// Records one reconciler pass.
pub(crate) fn reconciler_pass<'a>(took_ms: u64, overdue: impl Iterator<Item = (&'a str, u64)>) {
    counter!(names::RECONCILER_PASSES).increment(1);
    histogram!(names::RECONCILER_PASS_SECONDS).record(took_ms as f64 / 1000.0);
    for (kind, n) in overdue {
        gauge!(names::OVERDUE, "kind" => kind.to_string()).set(n as f64);
    }
}

/// Whether this process sees the reconciler stalled.
pub(crate) fn reconciler_stalled(stalled: bool) {
    gauge!(names::RECONCILER_STALLED).set(if stalled { 1.0 } else { 0.0 });
}

/// Counts one finding of the conservation audit.
pub(crate) fn drift(d: &backstop_core::audit::Drift) {
    counter!(names::DRIFT, "kind" => d.kind.clone(), "rule" => d.rule.as_str()).increment(1);
}

/// Counts one raised alert event.
pub(crate) fn alert(name: &'static str) {
    counter!(names::ALERTS, "event" => name).increment(1);
}

/// Counts one decided transition request.
pub(crate) fn transition(machine: &str, answer: backstop_core::Answer) {
    counter!(names::TRANSITIONS, "machine" => machine.to_string(), "answer" => answer.as_str())
        .increment(1);
}

static PAUSES_DESCRIBED: std::sync::Once = std::sync::Once::new();

fn describe_pauses() {
    PAUSES_DESCRIBED.call_once(|| {
        metrics::describe_gauge!(
            names::KIND_PAUSED,
            "1 while the kind's dispatch is paused in this process (by hand, in config, by its breaker or a Retry-After), 0.5 while its breaker probes, else 0."
        );
        metrics::describe_counter!(
            names::BREAKER_TRIPS,
            "Trips of the kind's circuit breaker written by this process."
        );
        metrics::describe_counter!(
            names::BREAKER_PROBES,
            "Probe attempts of a kind whose breaker was probing, by outcome (succeeded, failed)."
        );
    });
}

/// Sets a kind's pause gauge: 1 paused, 0.5 probing, 0 open.
pub(crate) fn kind_paused(kind: &str, value: f64) {
    describe_pauses();
    gauge!(names::KIND_PAUSED, "kind" => kind.to_string()).set(value);
}

/// Counts one trip written by this process.
pub(crate) fn breaker_tripped(kind: &str) {
    describe_pauses();
    counter!(names::BREAKER_TRIPS, "kind" => kind.to_string()).increment(1);
}

/// Counts one probe by its outcome.
pub(crate) fn breaker_probe(kind: &str, succeeded: bool) {
    describe_pauses();
    let outcome = if succeeded { "succeeded" } else { "failed" };
    counter!(names::BREAKER_PROBES, "kind" => kind.to_string(), "outcome" => outcome).increment(1);
}
