//! `/healthz` (the process answers) and `/readyz` (the ledger would take a write now).

use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// A health verdict.
#[derive(Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    status: &'static str,
}

/// The process is alive.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "Alive", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// How long `/readyz` waits for the ledger's answer: well inside the usual probe timeouts, so
/// that a database that does not answer reads as "not ready", never as a hung probe.
pub const READY_DEADLINE: Duration = Duration::from_secs(2);

/// The ledger would take a write now: a rolled-back write (the write lock, a row that needs
/// new space) succeeds within 2 s. Not ready while the database is unreachable, full,
/// read-only or not migrated.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The ledger cannot take writes now (unreachable, full, read-only, not migrated) or did not answer within 2 s; see Retry-After", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, Problem> {
    // On a task of its own: SQLite's calls block their thread (up to its busy timeout behind
    // another process's write lock), so a deadline on this task alone could not cut them
    // short; the probe then finishes in the background.
    let store = state.engine().store().clone();
    let probe = tokio::spawn(async move { store.check_writable().await });
    let not_ready =
        |detail: String| Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not-ready", detail);
    match tokio::time::timeout(READY_DEADLINE, probe).await {
        Ok(Ok(Ok(()))) => Ok(Json(Health { status: "ok" })),
        Ok(Ok(Err(e))) => Err(not_ready(format!(
            "the ledger cannot take writes: {}",
            e.detail()
        ))),
        Ok(Err(e)) => Err(not_ready(format!("the write probe failed: {e}"))),
        Err(_) => Err(not_ready(format!(
            "the ledger did not answer a write probe within {} s",
            READY_DEADLINE.as_secs()
        ))),
    }
}
