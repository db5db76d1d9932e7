//! `/v1/tasks`: enqueue (one or a batch), read, list, and the manual actions on dead letters
//! and pending tasks.

use super::problems::{
    BadQuery, BodyOverLimit, InvalidFields, MalformedJson, NoSuchTask, NotJson, Unauthorized,
    UnknownKind,
};
use crate::auth::Actor;
use crate::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson};
use crate::problem::Problem;
use crate::state::AppState;
use crate::task_view::TaskView;
use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use backstop_core::duration::parse_duration;
use backstop_core::store::ListParams;
use backstop_core::store::{GetParams, TimelineParams};
use backstop_core::{Status, TaskId};
use backstop_engine::{EnqueueError, EnqueueRequest, ManualRequest};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::HashMap;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(enqueue, list))
        .routes(routes!(enqueue_batch))
        .routes(routes!(show))
        .routes(routes!(retry))
        .routes(routes!(resolve))
        .routes(routes!(cancel))
}

/// One task to enqueue.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueBody {
    /// A configured kind.
    #[schema(example = "sms.send", pattern = r"^[A-Za-z0-9._-]{1,128}$")]
    kind: String,
    /// The business id: unique per kind (1 to 512 bytes, no control characters).
    #[schema(example = "order-123", min_length = 1, max_length = 512)]
    key: String,
    /// Any JSON; delivered byte for byte.
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
    /// Run no earlier than this long from now (`250ms`, `30s`, `5m`, `48h`, `7d`).
    #[schema(example = "30s", pattern = r"^([0-9]+(ms|s|m|h|d))+$")]
    delay: Option<String>,
    /// Run no earlier than this instant (RFC 3339); wins over `delay`.
    #[schema(value_type = Option<String>, format = DateTime)]
    run_at: Option<Timestamp>,
    /// Never run after this instant: the task is compensated with reason `expired`.
    #[schema(value_type = Option<String>, format = DateTime)]
    expires_at: Option<Timestamp>,
    /// Overrides the kind's attempt budget (1 to 1000).
    #[schema(minimum = 1, maximum = 1000)]
    max_attempts: Option<u32>,
    /// The ordering group (1 to 512 bytes): the group's tasks of this kind run one at a time,
    /// in the order their enqueues commit. Wins over the group the kind's `ordering` reads
    /// from the payload.
    #[schema(example = "order-1001", min_length = 1, max_length = 512)]
    group: Option<String>,
}

/// The accepted task.
#[derive(Serialize, ToSchema)]
pub struct Enqueued {
    pub id: String,
    pub kind: String,
    pub key: String,
    /// False when the same `(kind, key)` and payload already existed.
    pub created: bool,
}

impl EnqueueBody {
    fn into_request(self, traceparent: Option<&str>) -> Result<EnqueueRequest, Problem> {
        let delay = self
            .delay
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|e| Problem::invalid(format!("delay: {e}")))?;
        Ok(EnqueueRequest {
            kind: self.kind,
            key: self.key,
            payload: self.payload.get().as_bytes().to_vec(),
            delay,
            run_at: self.run_at,
            expires_at: self.expires_at,
            expires_in: None,
            max_attempts: self.max_attempts,
            traceparent: traceparent.map(str::to_string),
            group: self.group,
        })
    }
}

/// A W3C `traceparent` header, when it is well formed; a malformed one is ignored, as the
/// Trace Context recommendation asks.
fn traceparent(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get("traceparent")?.to_str().ok()?.trim();
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let ok = parts.len() >= 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0');
    ok.then_some(v)
}

/// Enqueue one task.
///
/// Idempotent by `(kind, key)`: the same key with the same payload returns the existing task
/// (`200`, `created: false`); with a different payload it is a `409` conflict.
#[utoipa::path(post, path = "/v1/tasks", tag = "tasks",
    request_body = EnqueueBody,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context, stored on the task and sent with every attempt")),
    responses(
        (status = 201, description = "Created", body = Enqueued),
        (status = 200, description = "The same (kind, key) and payload already existed", body = Enqueued),
        MalformedJson,
        Unauthorized,
        UnknownKind,
        (status = 409, description = "The (kind, key) exists with a different payload", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Payload or body over the limit", body = Problem, content_type = "application/problem+json"),
        NotJson,
        InvalidFields,
    ))]
async fn enqueue(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<EnqueueBody>,
) -> Result<Response, Problem> {
    let (kind, key) = (body.kind.clone(), body.key.clone());
    let r = body.into_request(traceparent(&headers))?;
    let e = state.engine().enqueue(r).await?;
    let code = if e.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let out = Enqueued {
        id: e.id.to_string(),
        kind,
        key,
        created: e.created,
    };
    Ok((code, Json(out)).into_response())
}

/// Up to `api.max_batch` tasks to enqueue in one transaction.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    #[schema(min_items = 1)]
    tasks: Vec<EnqueueBody>,
}

/// The fate of each task of a batch, in order.
#[derive(Serialize, ToSchema)]
pub struct BatchResults {
    results: Vec<BatchItem>,
}

/// One task of a batch.
#[derive(Serialize, ToSchema)]
pub struct BatchItem {
    /// 201 created, 200 already existed with the same payload, 409 conflict.
    status: u16,
    id: String,
    created: bool,
    /// For conflicts: what is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

/// Enqueue a batch of tasks in one transaction.
///
/// Every item is validated before anything is written: one invalid item (or the same
/// `(kind, key)` twice) refuses the whole batch. A conflict with an existing task fails only
/// its own item (`status: 409`).
#[utoipa::path(post, path = "/v1/tasks/batch", tag = "tasks",
    request_body = BatchBody,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context, stored on every task of the batch")),
    responses(
        (status = 200, description = "Per-item results, in order", body = BatchResults),
        MalformedJson,
        Unauthorized,
        (status = 404, description = "An item names an unknown kind", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Too many items, or a payload or the body over the limit", body = Problem, content_type = "application/problem+json"),
        NotJson,
        (status = 422, description = "An item is invalid, or a (kind, key) appears twice", body = Problem, content_type = "application/problem+json"),
    ))]
async fn enqueue_batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<BatchBody>,
) -> Result<Json<BatchResults>, Problem> {
    let max = state.limits().max_batch;
    if body.tasks.len() > max {
        return Err(Problem::too_large(format!(
            "the batch has {} tasks; the limit is {max} (api.max_batch)",
            body.tasks.len()
        )));
    }
    if body.tasks.is_empty() {
        return Err(Problem::invalid("tasks must hold at least one task"));
    }
    let mut seen: HashMap<(&str, &str), usize> = HashMap::with_capacity(body.tasks.len());
    for (i, t) in body.tasks.iter().enumerate() {
        if let Some(first) = seen.insert((&t.kind, &t.key), i) {
            return Err(Problem::invalid(format!(
                "{}/{} appears twice in the batch (items {first} and {i}); one business id is one task",
                t.kind, t.key
            ))
            .at(i));
        }
    }
    let tp = traceparent(&headers);
    let rs = body
        .tasks
        .into_iter()
        .enumerate()
        .map(|(i, b)| b.into_request(tp).map_err(|p| p.at(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let results = state.engine().enqueue_many(rs).await?;
    let results = results
        .into_iter()
        .map(|r| match r {
            Ok(e) => BatchItem {
                status: if e.created { 201 } else { 200 },
                id: e.id.to_string(),
                created: e.created,
                detail: None,
            },
            Err(EnqueueError::Conflict {
                kind,
                key,
                existing,
            }) => BatchItem {
                status: 409,
                id: existing.to_string(),
                created: false,
                detail: Some(format!(
                    "task {kind}/{key} already exists with a different payload"
                )),
            },
            Err(e) => BatchItem {
                status: 500,
                id: String::new(),
                created: false,
                detail: Some(e.to_string()),
            },
        })
        .collect();
    Ok(Json(BatchResults { results }))
}

fn parse_id(id: &str) -> Result<TaskId, Problem> {
    id.parse::<TaskId>()
        .map_err(|_| Problem::not_found(format!("no task with id {id:?} (ids are UUIDs)")))
}

/// One task with its timeline.
#[utoipa::path(get, path = "/v1/tasks/{id}", tag = "tasks", operation_id = "show_task",
    params(("id" = String, Path, description = "Task id")),
    responses(
        (status = 200, description = "The task and its timeline (`events`)", body = TaskView),
        Unauthorized,
        NoSuchTask,
    ))]
async fn show(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, Problem> {
    let id = parse_id(&id)?;
    let store = state.engine().store();
    let task = store
        .get(GetParams { id })
        .await?
        .ok_or_else(|| Problem::not_found(format!("no task with id {id}")))?;
    let events = store.timeline(TimelineParams { id }).await?;
    Ok(Json(TaskView::new(&task, Some(&events))).into_response())
}

/// Filters and paging of a listing.
#[derive(Deserialize, IntoParams, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this kind.
    kind: Option<String>,
    /// Only this business key.
    key: Option<String>,
    /// Only this status: pending, running, succeeded, failed or compensated.
    #[param(pattern = "^(pending|running|succeeded|failed|compensated)?$")]
    status: Option<String>,
    /// Most tasks to return (default 50, at most `api.max_list`).
    #[param(value_type = Option<usize>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Only tasks of this ordering group.
    group: Option<String>,
}

/// One page of tasks, newest first.
#[derive(Serialize, ToSchema)]
pub struct TaskPage<'a> {
    tasks: Vec<TaskView<'a>>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// Tasks, newest first, with cursor pagination.
#[utoipa::path(get, path = "/v1/tasks", tag = "tasks", operation_id = "list_tasks",
    params(ListQuery),
    responses(
        (status = 200, description = "One page of tasks", body = TaskPage),
        Unauthorized,
        BadQuery,
    ))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(mut q): ApiQuery<ListQuery>,
) -> Result<Response, Problem> {
    // An empty filter (`?kind=`) is the same as an absent one; an empty `limit` is not a number.
    for p in [
        &mut q.kind,
        &mut q.key,
        &mut q.status,
        &mut q.cursor,
        &mut q.group,
    ] {
        if p.as_deref().is_some_and(str::is_empty) {
            *p = None;
        }
    }
    let max = state.limits().max_list;
    let limit = match q.limit.as_deref() {
        None => 50,
        Some(l) => l.parse::<usize>().unwrap_or(0),
    };
    if limit == 0 || limit > max {
        return Err(Problem::invalid(format!(
            "limit must be a whole number between 1 and {max} (api.max_list), got {}",
            q.limit.as_deref().unwrap_or("")
        )));
    }
    let status = q
        .status
        .as_deref()
        .map(|s| s.parse::<Status>())
        .transpose()
        .map_err(|e| Problem::invalid(e.to_string()))?;
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<TaskId>()
                .map_err(|_| Problem::invalid(format!("cursor {c:?} is not a next_cursor value")))
        })
        .transpose()?;
    let tasks = state
        .engine()
        .store()
        .list(ListParams {
            kind: q.kind,
            key: q.key,
            status,
            group: q.group,
            // One more than asked says whether another page follows.
            limit: limit + 1,
            before,
        })
        .await?;
    let more = tasks.len() > limit;
    let shown = &tasks[..tasks.len().min(limit)];
    let next_cursor = more
        .then(|| shown.last().map(|t| t.id.to_string()))
        .flatten();
    let page = TaskPage {
        tasks: shown.iter().map(|t| TaskView::new(t, None)).collect(),
        next_cursor,
    };
    Ok(Json(page).into_response())
}

/// Why a manual action was taken.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Recorded on the timeline.
    #[schema(max_length = 1024)]
    reason: Option<String>,
}

/// Why a dead letter needs no delivery.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ResolveBody {
    /// Recorded on the timeline and as the task's reason.
    #[schema(min_length = 1, max_length = 1024, example = "refunded by hand")]
    reason: String,
}

async fn manual(
    state: &AppState,
    id: &str,
    actor: Actor,
    reason: Option<String>,
    action: Action,
) -> Result<Response, Problem> {
    let id = parse_id(id)?;
    if let Some(r) = &reason
        && r.len() > 1024
    {
        return Err(Problem::invalid(format!(
            "reason is {} bytes; the limit is 1024",
            r.len()
        )));
    }
    let r = ManualRequest {
        id,
        actor: actor.0,
        reason,
    };
    let engine = state.engine();
    let task = match action {
        Action::Retry => engine.retry(r).await?,
        Action::Resolve => engine.resolve(r).await?,
        Action::Cancel => engine.cancel(r).await?,
    };
    Ok(Json(TaskView::new(&task, None)).into_response())
}

enum Action {
    Retry,
    Resolve,
    Cancel,
}

/// A `failed` or `compensated` task back to `pending`, due now, attempt budget renewed.
#[utoipa::path(post, path = "/v1/tasks/{id}/retry", tag = "tasks",
    params(("id" = String, Path, description = "Task id")),
    request_body(content = Option<ReasonBody>, description = "Optional reason"),
    responses(
        (status = 200, description = "The task, pending again", body = TaskView),
        MalformedJson,
        Unauthorized,
        NoSuchTask,
        (status = 409, description = "The task is not failed or compensated", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn retry(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    Extension(actor): Extension<Actor>,
    OptionalJson(body): OptionalJson<ReasonBody>,
) -> Result<Response, Problem> {
    manual(&state, &id, actor, body.reason, Action::Retry).await
}

/// A `failed` task (dead letter) to `compensated`, with the reason it needs no delivery.
#[utoipa::path(post, path = "/v1/tasks/{id}/resolve", tag = "tasks",
    params(("id" = String, Path, description = "Task id")),
    request_body = ResolveBody,
    responses(
        (status = 200, description = "The task, compensated", body = TaskView),
        MalformedJson,
        Unauthorized,
        NoSuchTask,
        (status = 409, description = "The task is not failed", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        (status = 422, description = "No reason given", body = Problem, content_type = "application/problem+json"),
    ))]
async fn resolve(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    Extension(actor): Extension<Actor>,
    OptionalJson(body): OptionalJson<ResolveBody>,
) -> Result<Response, Problem> {
    if body.reason.trim().is_empty() {
        return Err(Problem::invalid(
            "reason is required: say why this dead letter needs no delivery",
        ));
    }
    manual(&state, &id, actor, Some(body.reason), Action::Resolve).await
}

/// A `pending` task to `compensated` with reason `canceled`.
#[utoipa::path(post, path = "/v1/tasks/{id}/cancel", tag = "tasks",
    params(("id" = String, Path, description = "Task id")),
    request_body(content = Option<ReasonBody>, description = "Optional reason"),
    responses(
        (status = 200, description = "The task, compensated", body = TaskView),
        MalformedJson,
        Unauthorized,
        NoSuchTask,
        (status = 409, description = "The task is not pending", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn cancel(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    Extension(actor): Extension<Actor>,
    OptionalJson(body): OptionalJson<ReasonBody>,
) -> Result<Response, Problem> {
    manual(&state, &id, actor, body.reason, Action::Cancel).await
}
