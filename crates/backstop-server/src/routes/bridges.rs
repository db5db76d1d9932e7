//! `/v1/bridges`: every broker bridge on this ledger: this process's live, the others' as
//! their last beat said.

use super::problems::Unauthorized;
use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use backstop_engine::BridgeView;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Every bridge of every process.
#[derive(Serialize, ToSchema)]
pub struct BridgeList {
    bridges: Vec<BridgeEntry>,
}

/// One bridge in one process.
#[derive(Serialize, ToSchema)]
pub struct BridgeEntry {
    name: String,
    /// The process running it.
    worker: String,
    /// `connecting`, `running`, `reconnecting`, `refused` (the broker refuses the
    /// configuration) or `stopped`.
    state: String,
    connected: bool,
    /// The broker's URL, password hidden.
    broker: String,
    /// What it consumes.
    source: String,
    /// The kind each message becomes.
    kind: String,
    /// A dead-letter intake: each message a failed task of `kind`.
    dead_letters: bool,
    received: u64,
    inserted: u64,
    deduplicated: u64,
    /// Recorded as failed tasks of `backstop.rejected.<bridge>`.
    rejected: u64,
    in_flight: u64,
    /// received = inserted + deduplicated + rejected + in_flight.
    balanced: bool,
    reconnects: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    /// Since when it is in its state (RFC 3339).
    since: String,
    /// When this was seen (RFC 3339).
    seen_at: String,
    /// Its process's last beat is old: what is shown is what it last said.
    stale: bool,
}

impl From<BridgeView> for BridgeEntry {
    fn from(v: BridgeView) -> Self {
        let state = v.state.as_str().to_string();
        BridgeEntry {
            name: v.name,
            worker: v.worker,
            state,
            connected: v.connected,
            broker: v.broker,
            source: v.source,
            kind: v.kind,
            dead_letters: v.dead_letters,
            received: v.received,
            inserted: v.inserted,
            deduplicated: v.deduplicated,
            rejected: v.rejected,
            in_flight: v.in_flight,
            balanced: v.balanced,
            reconnects: v.reconnects,
            last_error: v.last_error,
            since: backstop_core::wire_time::format(v.since),
            seen_at: backstop_core::wire_time::format(v.seen_at),
            stale: v.stale,
        }
    }
}

/// Every broker bridge on this ledger, with its connection state and conservation counts.
#[utoipa::path(get, path = "/v1/bridges", tag = "bridges", operation_id = "list_bridges",
    responses(
        (status = 200, description = "The bridges", body = BridgeList),
        Unauthorized,
    ))]
async fn list(State(state): State<AppState>) -> Result<Json<BridgeList>, Problem> {
    let views = state.engine().all_bridges().await?;
    Ok(Json(BridgeList {
        bridges: views.into_iter().map(BridgeEntry::from).collect(),
    }))
}
