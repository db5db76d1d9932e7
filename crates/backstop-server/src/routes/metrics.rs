//! `/metrics`: Prometheus text format. Counters and histograms come from the engine through
//! the `metrics` facade; tasks by kind and status are read from the ledger at scrape time.

use super::problems::Unauthorized;
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use backstop_core::Status;
use backstop_core::store::CountsParams;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

const TASKS: &str = "backstop_tasks";

/// Bucket bounds, in seconds, for attempt durations and enqueue-to-start delays.
const BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Installs the process-wide Prometheus recorder (once; later calls return the same handle).
/// Call it before building the engine, whose per-kind handles bind to the recorder present
/// when they are made.
pub fn install_recorder() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&BUCKETS)
                .expect("bucket list is not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder already installed (an embedding application's) keeps working;
            // this handle then renders only what it sees.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    use backstop_engine::metrics::names::*;
    metrics::describe_counter!(
        ENQUEUED,
        "Tasks created by enqueue (not counting idempotent repeats)."
    );
    metrics::describe_counter!(ATTEMPTS, "Attempts started.");
    metrics::describe_counter!(OUTCOMES, "Attempts ended, by outcome.");
    metrics::describe_histogram!(
        ATTEMPT_SECONDS,
        metrics::Unit::Seconds,
        "How long attempts took."
    );
    metrics::describe_histogram!(
        START_DELAY_SECONDS,
        metrics::Unit::Seconds,
        "From when a task became due (enqueued, or its run_at) to the start of its attempt."
    );
    metrics::describe_counter!(RESCUES, "Tasks whose lease expired and were rescued.");
    metrics::describe_counter!(STALE, "Completions rejected because their lease was lost.");
    metrics::describe_counter!(
        TRANSITIONS,
        "Entity transition requests decided, by machine and answer."
    );
    metrics::describe_gauge!(
        TASKS,
        "Tasks in the ledger, by kind and status (read at scrape time)."
    );
    metrics::describe_counter!(RECONCILER_PASSES, "Reconciler passes run by this process.");
    metrics::describe_histogram!(
        RECONCILER_PASS_SECONDS,
        metrics::Unit::Seconds,
        "How long reconciler passes took."
    );
    metrics::describe_gauge!(
        RECONCILER_STALLED,
        "1 while this process sees the reconciler's last pass older than the stall threshold."
    );
    metrics::describe_gauge!(
        OVERDUE,
        "Pending tasks due longer ago than the overdue threshold, by kind (last pass)."
    );
    metrics::describe_counter!(
        DRIFT,
        "Tasks whose timeline disagrees with their status, found by the audit, by kind and rule."
    );
    metrics::describe_counter!(ALERTS, "Alert events raised, by event.");
    metrics::describe_counter!(
        CALLBACKS,
        "Inbound callbacks received, by source and verdict (accepted, duplicate, rejected)."
    );
    use backstop_engine::bridges::status::names as bridge;
    metrics::describe_counter!(
        bridge::RECEIVED,
        "Messages a bridge received from its broker."
    );
    metrics::describe_counter!(
        bridge::INSERTED,
        "Messages a bridge put in the ledger as new tasks."
    );
    metrics::describe_counter!(
        bridge::DEDUPLICATED,
        "Messages whose task was in the ledger already (redeliveries)."
    );
    metrics::describe_counter!(
        bridge::REJECTED,
        "Messages that could not become a task, recorded as failed tasks of backstop.rejected.<bridge>."
    );
    metrics::describe_gauge!(
        bridge::CONNECTED,
        "1 while a bridge is connected and consuming, else 0."
    );
    metrics::describe_gauge!(
        bridge::IN_FLIGHT,
        "Messages a bridge received and has not yet settled in the ledger."
    );
    metrics::describe_counter!(bridge::RECONNECTS, "Times a bridge lost its connection.");
    metrics::describe_gauge!(
        bridge::ACK_PENDING,
        "Deliveries a bridge's broker holds unacknowledged (JetStream), as last read; the broker stops delivering at its MaxAckPending."
    );
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses(
        (status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain"),
        Unauthorized,
        (status = 503, description = "Metrics are not enabled in this process", body = Problem, content_type = "application/problem+json"),
    ))]
async fn metrics(State(state): State<AppState>) -> Result<Response, Problem> {
    let Some(handle) = state.metrics() else {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no-metrics",
            "this process was started without a metrics recorder",
        ));
    };
    let engine = state.engine();
    for kind in engine.kinds().keys() {
        let c = engine
            .store()
            .counts(CountsParams {
                kind: Some(kind.to_string()),
            })
            .await?;
        for s in Status::ALL {
            metrics::gauge!(TASKS, "kind" => kind.clone(), "status" => s.as_str())
                .set(c.get(s) as f64);
        }
    }
    handle.run_upkeep();
    let mut r = handle.render().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(r)
}
