//! `/healthz` (the process answers) and `/readyz` (the ledger answers and is migrated).

use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use backstop_core::TaskId;
use serde::Serialize;
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

/// The database is reachable and its schema is in place.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The database does not answer or is not migrated", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, Problem> {
    // A point read of the tasks table: cheap, and it fails if the database is unreachable
    // or the schema is missing.
    match state.engine().store().get(TaskId(uuid::Uuid::nil())).await {
        Ok(_) => Ok(Json(Health { status: "ok" })),
        Err(e) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-ready",
            format!("the ledger is not ready: {e}"),
        )),
    }
}
