//! `/v1/entities/{machine}/{id}`: guarded state transitions. Callbacks about a business
//! entity (an order, a refund) arrive twice, late and out of order; each asks that the entity
//! move to a state and is answered `applied`, `duplicate`, `rejected` or `stale`, and every
//! answer is kept in the entity's history.

use super::problems::{BodyOverLimit, NotJson, Unauthorized};
use crate::extract::{ApiJson, ApiPath};
use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use backstop_core::store::{EntityHistory, TransitionOutcome};
use backstop_core::{Answer, Entity, EntityDecision};
use backstop_engine::TransitionRequest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(transition))
        .routes(routes!(show))
}

/// A request that the entity move to a state.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransitionBody {
    /// The requested state: one of the machine's.
    #[schema(example = "paid", pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    to: String,
    /// The id of the event that asks (the provider's notification id): applied at most once
    /// per entity. Sent again after it applied, it is a `duplicate`.
    #[schema(example = "evt_3MtwBwLkdIwHu7ix", min_length = 1, max_length = 255)]
    event_id: String,
    /// The sender's version of the entity (a sequence number, an event timestamp): when
    /// given, it must be greater than every version applied so far, or the request is
    /// `stale`.
    #[schema(example = 3)]
    version: Option<i64>,
}

/// An entity: its current state and version.
#[derive(Serialize, ToSchema)]
pub struct EntityView {
    /// The machine.
    #[schema(example = "order")]
    machine: String,
    /// The entity's business id.
    #[schema(example = "1001")]
    id: String,
    /// The current state.
    #[schema(example = "paid")]
    state: String,
    /// The highest version applied so far (null until a request with a version applies).
    version: Option<i64>,
    /// How many requests were decided about it.
    decisions: u64,
    /// When the first request about it arrived.
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    created_at: Timestamp,
    /// When its state or version last changed.
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    updated_at: Timestamp,
}

impl From<&Entity> for EntityView {
    fn from(e: &Entity) -> Self {
        EntityView {
            machine: e.machine.clone(),
            id: e.id.clone(),
            state: e.state.clone(),
            version: e.version,
            decisions: e.decisions,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

/// How a transition request was answered.
#[derive(Serialize, ToSchema)]
pub struct TransitionView {
    /// `applied` (the entity moved), `duplicate` (this event id was already applied),
    /// `rejected` (the machine does not allow the state from the current one) or `stale` (an
    /// equal or newer version was already applied). Only `applied` changed anything.
    answer: Answer,
    /// The entity's state after the decision: its current state.
    #[schema(example = "paid")]
    state: String,
    /// The entity's version after the decision.
    version: Option<i64>,
    /// The answer in words.
    detail: String,
    /// The entity after the decision.
    entity: EntityView,
}

/// One decided request.
#[derive(Serialize, ToSchema)]
pub struct DecisionView {
    event_id: String,
    /// The entity's state when the request was decided.
    from: String,
    /// The state it asked for.
    to: String,
    answer: Answer,
    /// The version the request carried.
    version: Option<i64>,
    /// When it was decided.
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    at: Timestamp,
}

impl From<&EntityDecision> for DecisionView {
    fn from(d: &EntityDecision) -> Self {
        DecisionView {
            event_id: d.event_id.clone(),
            from: d.from.clone(),
            to: d.to.clone(),
            answer: d.answer,
            version: d.version,
            at: d.at,
        }
    }
}

/// An entity with every decision about it, oldest first.
#[derive(Serialize, ToSchema)]
pub struct EntityHistoryView {
    #[schema(example = "order")]
    machine: String,
    #[schema(example = "1001")]
    id: String,
    /// The current state.
    #[schema(example = "refunding")]
    state: String,
    /// The highest version applied so far.
    version: Option<i64>,
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    created_at: Timestamp,
    /// When its state or version last changed.
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    updated_at: Timestamp,
    /// Every request decided about it, whatever the answer, oldest first.
    history: Vec<DecisionView>,
}

impl From<&EntityHistory> for EntityHistoryView {
    fn from(h: &EntityHistory) -> Self {
        let e = &h.entity;
        EntityHistoryView {
            machine: e.machine.clone(),
            id: e.id.clone(),
            state: e.state.clone(),
            version: e.version,
            created_at: e.created_at,
            updated_at: e.updated_at,
            history: h.decisions.iter().map(DecisionView::from).collect(),
        }
    }
}

/// The answer in words, for people reading logs.
fn detail(o: &TransitionOutcome, allowed_from: &[String]) -> String {
    let (e, d) = (&o.entity, &o.decision);
    let what = format!("{} {:?}", e.machine, e.id);
    let version = |v: Option<i64>| v.map_or("none".to_string(), |v| v.to_string());
    match o.answer {
        Answer::Applied => format!("{what} moved from {} to {}", d.from, d.to),
        Answer::Duplicate => format!(
            "event {:?} was already applied to {what}; nothing changed (it is {})",
            d.event_id, e.state
        ),
        Answer::Rejected if allowed_from.is_empty() => format!(
            "{what} is {}; {} follows no state, so nothing changed",
            e.state, d.to
        ),
        Answer::Rejected => format!(
            "{what} is {}; {} may follow only {}, so nothing changed",
            e.state,
            d.to,
            allowed_from.join(", ")
        ),
        Answer::Stale => format!(
            "version {} is not newer than version {} already applied to {what}; nothing changed (it is {})",
            version(d.version),
            version(e.version),
            e.state
        ),
    }
}

/// Ask that an entity move to a state.
///
/// The entity is created in the machine's initial state by the first request about it.
/// Requests about one entity are decided one at a time, in every process. The answer is
/// `duplicate` when this `event_id` was already applied to the entity; otherwise `stale` when
/// `version` is given and not greater than the entity's; otherwise `rejected` when the
/// machine does not allow `to` from the current state; otherwise `applied`. Every answer is a
/// `200` with the current state, and is recorded in the entity's history.
#[utoipa::path(post, path = "/v1/entities/{machine}/{id}/transitions", tag = "entities",
    params(
        ("machine" = String, Path, description = "A configured machine", example = "order"),
        ("id" = String, Path, description = "The entity's business id (1 to 512 bytes)", example = "1001"),
    ),
    request_body = TransitionBody,
    responses(
        (status = 200, description = "Decided: applied, duplicate, rejected or stale", body = TransitionView),
        (status = 400, description = "Malformed JSON, or a path that is not UTF-8", body = Problem, content_type = "application/problem+json"),
        Unauthorized,
        (status = 404, description = "Unknown machine", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        (status = 422, description = "Not a state of the machine (`unknown-state`), or invalid fields", body = Problem, content_type = "application/problem+json"),
    ))]
async fn transition(
    State(state): State<AppState>,
    ApiPath((machine, id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<TransitionBody>,
) -> Result<Json<TransitionView>, Problem> {
    let engine = state.engine();
    let out = engine
        .transition(TransitionRequest {
            machine,
            id,
            to: body.to,
            event_id: body.event_id,
            version: body.version,
        })
        .await?;
    let allowed_from = engine
        .machines()
        .get(&out.entity.machine)
        .map(|m| m.sources_of(&out.decision.to))
        .unwrap_or_default();
    Ok(Json(TransitionView {
        answer: out.answer,
        state: out.entity.state.clone(),
        version: out.entity.version,
        detail: detail(&out, &allowed_from),
        entity: EntityView::from(&out.entity),
    }))
}

/// An entity's current state and its whole history.
#[utoipa::path(get, path = "/v1/entities/{machine}/{id}", tag = "entities", operation_id = "show_entity",
    params(
        ("machine" = String, Path, description = "A configured machine", example = "order"),
        ("id" = String, Path, description = "The entity's business id", example = "1001"),
    ),
    responses(
        (status = 200, description = "The entity and every decision about it", body = EntityHistoryView),
        (status = 400, description = "A path that is not UTF-8", body = Problem, content_type = "application/problem+json"),
        Unauthorized,
        (status = 404, description = "Unknown machine (`unknown-machine`), or no request about this entity was ever decided (`not-found`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid id", body = Problem, content_type = "application/problem+json"),
    ))]
async fn show(
    State(state): State<AppState>,
    ApiPath((machine, id)): ApiPath<(String, String)>,
) -> Result<Json<EntityHistoryView>, Problem> {
    let h = state.engine().entity(&machine, &id).await?.ok_or_else(|| {
        Problem::not_found(format!(
            "no entity {id:?} of machine {machine}: no transition was ever requested for it"
        ))
    })?;
    Ok(Json(EntityHistoryView::from(&h)))
}
