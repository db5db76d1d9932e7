//! The HTTP API of backstop: enqueue from any language, pull leases for workers, manage dead
//! letters, guard entities' state transitions, and watch it all through `/metrics`. Errors are RFC 9457 problem documents; the
//! OpenAPI 3.1 document at `/openapi.json` is generated from the handlers themselves.

pub mod auth;
mod connections;
mod extract;
mod problem;
mod routes;
mod state;
pub mod task_view;

pub use auth::{ApiToken, sha256};
pub use connections::{ConnectionLimits, serve};
pub use problem::Problem;
pub use routes::metrics::install_recorder;
pub use state::{AppState, Limits};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "backstop",
        description = "An accountable ledger for asynchronous work: enqueue, pull leases, dead letters, guarded state transitions.",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "tasks", description = "Enqueue, read and manage tasks"),
        (name = "leases", description = "Pull work for workers in any language"),
        (name = "kinds", description = "Configured kinds"),
        (name = "bridges", description = "Broker bridges into the ledger"),
        (name = "schedules", description = "Cron schedules: every instant a task"),
        (name = "reconciliations", description = "A provider's statement against the ledger"),
        (name = "entities", description = "Guarded state transitions of business entities"),
        (name = "hooks", description = "Inbound provider callbacks, verified by each source's signature scheme"),
        (name = "health", description = "Liveness, readiness and metrics"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The API's routes with their OpenAPI document.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(routes::tasks::router())
        .merge(routes::leases::router())
        .merge(routes::kinds::router())
        .merge(routes::limits::router())
        .merge(routes::bridges::router())
        .merge(routes::schedules::router())
        .merge(routes::reconciliations::router())
        .merge(routes::entities::router())
        .merge(routes::metrics::router())
        .merge(routes::hooks::router())
        .split_for_parts()
}

/// The routes open without the API token: health checks for probes, and inbound callbacks,
/// which each source's signature scheme authenticates instead.
fn open_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::<AppState>::with_openapi(ApiDoc::openapi())
        .merge(routes::health::router())
        .merge(routes::hooks::inbound())
        .split_for_parts()
}

/// The OpenAPI 3.1 document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut doc) = api();
    let (_, open) = open_routes();
    doc.merge(open);
    document_refusals(&mut doc);
    // Health checks are open to probes; callbacks carry their provider's signature instead.
    for (path, post) in [
        ("/healthz", false),
        ("/readyz", false),
        ("/v1/hooks/{source}", true),
    ] {
        if let Some(item) = doc.paths.paths.get_mut(path) {
            let op = if post {
                item.post.as_mut()
            } else {
                item.get.as_mut()
            };
            if let Some(op) = op {
                op.security = Some(vec![
                    utoipa::openapi::security::SecurityRequirement::default(),
                ]);
            }
        }
    }
    doc
}

/// The routes that never touch the ledger, so never answer 503 for it (`/readyz` and the
/// inbound callbacks document their own 503).
const WITHOUT_LEDGER: &[&str] = &["/healthz", "/readyz", "/metrics", "/v1/hooks/{source}"];

/// Adds the refusals every route shares to each operation that can meet them: 503 when the
/// ledger is unavailable (every route that uses it), 408 when the body is late (every route
/// that reads one). Added here rather than listed per route so that a new route cannot
/// forget them.
fn document_refusals(doc: &mut utoipa::openapi::OpenApi) {
    use routes::problems::{BodyTimeout, LedgerUnavailable};
    use utoipa::IntoResponses;
    type Responses = std::collections::BTreeMap<
        String,
        utoipa::openapi::RefOr<utoipa::openapi::response::Response>,
    >;
    let unavailable = LedgerUnavailable::responses();
    let late = BodyTimeout::responses();
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            item.get.as_mut(),
            item.post.as_mut(),
            item.put.as_mut(),
            item.patch.as_mut(),
            item.delete.as_mut(),
        ];
        for op in ops.into_iter().flatten() {
            let mut add = |extra: &Responses| {
                for (status, r) in extra {
                    op.responses
                        .responses
                        .entry(status.clone())
                        .or_insert_with(|| r.clone());
                }
            };
            if !WITHOUT_LEDGER.contains(&path.as_str()) {
                add(&unavailable);
            }
            if op.request_body.is_some() {
                add(&late);
            }
        }
    }
}

/// The whole application: the authenticated API, the open health checks and the document.
pub fn app(state: AppState) -> Router {
    let (api, _) = api();
    let (open, _) = open_routes();
    let doc = openapi();
    let doc_json = serde_json::to_string(&doc).expect("the document serializes");
    let authed = api.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        auth::require,
    ));
    Router::new()
        .merge(authed)
        .merge(open)
        .route(
            "/openapi.json",
            get(move || {
                let body = doc_json.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        body,
                    )
                }
            }),
        )
        .fallback(|| async {
            Problem::not_found("no such endpoint; see /openapi.json for the API")
        })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "this endpoint does not take that method; see /openapi.json",
            )
        })
        .with_state(state)
}
