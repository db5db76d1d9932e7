//! `/v1/leases`: workers in any language lease tasks of `pull` kinds, heartbeat them, save
//! checkpoints and report outcomes. Completions and checkpoints are fenced by the lease's epoch.

use super::problems::{
    BodyOverLimit, MalformedJson, NotALeaseToken, NotJson, Unauthorized, UnknownKind,
};
use crate::extract::{AddedJson, ApiJson, ApiPath, OptionalJson};
use crate::problem::Problem;
use crate::state::AppState;
use crate::task_view::payload_json;
use axum::Json;
use axum::extract::State;
use backstop_core::Outcome;
use backstop_core::duration::parse_duration;
use backstop_engine::LeaseRequest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(lease))
        .routes(routes!(heartbeat))
        .routes(routes!(complete))
        .routes(routes!(release))
        .routes(routes!(checkpoint))
}

/// A request for work.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseBody {
    /// Pull kinds to lease from, in order of preference.
    #[schema(example = json!(["report.render"]), min_items = 1)]
    kinds: Vec<String>,
    /// Most tasks to return (default 1, at most `api.max_lease_tasks`).
    #[schema(minimum = 1)]
    max: Option<usize>,
    /// Lease length, at least 1s; each heartbeat extends it by as much (default: the shortest
    /// `lease` configured for the requested kinds, 60s unless configured).
    #[schema(example = "30s", pattern = r"^([0-9]+(ms|s|m|h|d))+$")]
    lease: Option<String>,
    /// The worker's name, recorded on each attempt.
    #[schema(example = "worker-1", min_length = 1, max_length = 128)]
    worker: String,
    /// How long to wait when nothing is due (default `0s`: answer at once).
    #[schema(example = "20s", pattern = r"^([0-9]+(ms|s|m|h|d))+$")]
    wait: Option<String>,
}

/// Leased tasks.
#[derive(Serialize, ToSchema)]
pub struct LeaseResponse {
    tasks: Vec<LeasedTask>,
}

/// One leased task.
#[derive(Serialize, ToSchema)]
pub struct LeasedTask {
    /// Pass to heartbeat and complete.
    token: String,
    id: String,
    kind: String,
    key: String,
    #[schema(value_type = serde_json::Value)]
    payload: Box<RawValue>,
    /// This attempt's number (1-based).
    attempt: u32,
    max_attempts: u32,
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    lease_until: Timestamp,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::option::serialize")]
    expires_at: Option<Timestamp>,
    traceparent: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    created_at: Timestamp,
    /// The last cursor an attempt of this task saved (`POST /v1/leases/{token}/checkpoint`):
    /// resume from here. `null` on a first run.
    #[schema(value_type = Option<serde_json::Value>)]
    checkpoint: Option<Box<RawValue>>,
}

/// A duration field of a lease request, bounded by the `setting` that caps it.
fn duration(
    field: &str,
    v: Option<&str>,
    default: Duration,
    (max, setting): (Duration, &str),
) -> Result<Duration, Problem> {
    let d = v
        .map(parse_duration)
        .transpose()
        .map_err(|e| Problem::invalid(format!("{field}: {e}")))?
        .unwrap_or(default);
    if d > max {
        return Err(Problem::invalid(format!(
            "{field} may be at most {} ({setting}), got {}",
            backstop_core::duration::format_duration(max),
            backstop_core::duration::format_duration(d)
        )));
    }
    Ok(d)
}

/// Lease due tasks of pull kinds, waiting up to `wait` for work (long poll).
#[utoipa::path(post, path = "/v1/leases", tag = "leases",
    request_body = LeaseBody,
    responses(
        (status = 200, description = "Leased tasks (empty when none became due within `wait`)", body = LeaseResponse),
        MalformedJson,
        Unauthorized,
        UnknownKind,
        BodyOverLimit,
        NotJson,
        (status = 422, description = "Invalid fields, a kind that is not `pull`, or a bound exceeded", body = Problem, content_type = "application/problem+json"),
    ))]
async fn lease(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<LeaseBody>,
) -> Result<Json<LeaseResponse>, Problem> {
    let limits = state.limits();
    let max = body.max.unwrap_or(1);
    if max == 0 || max > limits.max_lease_tasks {
        return Err(Problem::invalid(format!(
            "max must be between 1 and {}, got {max} (api.max_lease_tasks)",
            limits.max_lease_tasks
        )));
    }
    let default_lease = body
        .kinds
        .iter()
        .filter_map(|k| state.engine().kinds().get(k).map(|c| c.lease))
        .min()
        .unwrap_or(Duration::from_secs(60))
        .min(limits.max_lease);
    let lease_for = duration(
        "lease",
        body.lease.as_deref(),
        default_lease,
        (limits.max_lease, "api.max_lease"),
    )?;
    let wait = duration(
        "wait",
        body.wait.as_deref(),
        Duration::ZERO,
        (limits.max_wait, "api.max_wait"),
    )?;
    let r = LeaseRequest {
        kinds: body.kinds,
        max,
        lease: lease_for,
        worker: body.worker,
        wait,
    };
    let leased = state.engine().lease(r, state.stopping()).await?;
    let tasks = leased
        .into_iter()
        .map(|l| LeasedTask {
            token: l.token,
            id: l.task.id.to_string(),
            payload: payload_json(&l.task.payload),
            kind: l.task.kind,
            key: l.task.key,
            attempt: l.task.attempt,
            max_attempts: l.task.max_attempts,
            lease_until: l.lease_until,
            expires_at: l.task.expires_at,
            traceparent: l.task.traceparent,
            created_at: l.task.created_at,
            // Stored as the JSON text a checkpoint gave, so it goes out as it came.
            checkpoint: l
                .task
                .checkpoint
                .and_then(|c| RawValue::from_string(c).ok()),
        })
        .collect();
    Ok(Json(LeaseResponse { tasks }))
}

/// The lease after a heartbeat.
#[derive(Serialize, ToSchema)]
pub struct HeartbeatResponse {
    #[schema(value_type = String, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::serialize")]
    lease_until: Timestamp,
}

/// Extend a lease by the length it was taken with.
#[utoipa::path(post, path = "/v1/leases/{token}/heartbeat", tag = "leases",
    params(("token" = String, Path, description = "The lease token")),
    responses(
        (status = 200, description = "Extended", body = HeartbeatResponse),
        Unauthorized,
        NotALeaseToken,
        (status = 409, description = "The lease was lost: stop working on the task", body = Problem, content_type = "application/problem+json"),
    ))]
async fn heartbeat(
    State(state): State<AppState>,
    ApiPath(token): ApiPath<String>,
) -> Result<Json<HeartbeatResponse>, Problem> {
    let lease_until = state.engine().heartbeat_lease(&token).await?;
    Ok(Json(HeartbeatResponse { lease_until }))
}

/// How an attempt ended.
#[derive(Deserialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeName {
    Succeeded,
    Retry,
    Failed,
    Skip,
}

/// The outcome of a leased attempt.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// `succeeded`, `retry` (transient: retried with backoff while attempts remain), `failed`
    /// (permanent: dead letter now) or `skip` (compensated with `reason`). Required: a
    /// worker that says nothing has not said the work was done.
    outcome: OutcomeName,
    /// What went wrong, for `retry` and `failed` (kept up to 4096 bytes; longer text is
    /// truncated, never refused).
    error: Option<String>,
    /// Why, for `skip` (kept up to 4096 bytes).
    reason: Option<String>,
    /// For `retry`: wait this long (`30s`), within the kind's backoff cap.
    #[schema(pattern = r"^([0-9]+(ms|s|m|h|d))+$")]
    retry_after: Option<String>,
}

/// What the task became.
#[derive(Serialize, ToSchema)]
pub struct CompleteResponse {
    /// pending (retry), succeeded, failed or compensated.
    #[schema(value_type = String, example = "succeeded")]
    status: &'static str,
    /// When a retried task runs again.
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(serialize_with = "backstop_core::wire_time::option::serialize")]
    run_at: Option<Timestamp>,
}

const MAX_TEXT: usize = 4096;

/// Cuts a worker's text to [`MAX_TEXT`] bytes on a character boundary, saying so: an outcome
/// with a long traceback is still recorded.
fn truncate(mut s: String) -> String {
    const MARK: &str = "… [truncated]";
    if s.len() > MAX_TEXT {
        let mut end = MAX_TEXT - MARK.len();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(MARK);
    }
    s
}

/// Report the outcome of a leased attempt.
///
/// The same completion sent again (a retry after a lost answer) is answered as the first
/// was; a different outcome for an attempt already recorded is a `409`.
#[utoipa::path(post, path = "/v1/leases/{token}/complete", tag = "leases",
    params(("token" = String, Path, description = "The lease token")),
    request_body(content = CompleteBody, description = "The outcome, always explicit"),
    responses(
        (status = 200, description = "Recorded (or the same outcome was already recorded)", body = CompleteResponse),
        MalformedJson,
        Unauthorized,
        NotALeaseToken,
        (status = 409, description = "Stale token: the lease was lost and the outcome was not recorded as the task's (`lease-lost`); or this attempt already ended with another outcome (`already-completed`)", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        (status = 422, description = "No outcome given (an empty body, `null` or `{}`), or invalid fields", body = Problem, content_type = "application/problem+json"),
    ))]
async fn complete(
    State(state): State<AppState>,
    ApiPath(token): ApiPath<String>,
    OptionalJson(body): OptionalJson<Option<CompleteBody>>,
) -> Result<Json<CompleteResponse>, Problem> {
    let body = body.ok_or_else(|| {
        Problem::invalid(
            "outcome is required: send {\"outcome\": \"succeeded\"} (or retry, failed, skip)",
        )
    })?;
    let (error, reason) = (body.error.map(truncate), body.reason.map(truncate));
    let after = body
        .retry_after
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| Problem::invalid(format!("retry_after: {e}")))?;
    let outcome = match body.outcome {
        OutcomeName::Succeeded => Outcome::Success,
        OutcomeName::Retry => Outcome::Retry {
            error: error.unwrap_or_else(|| "retry requested by the worker".into()),
            after,
        },
        OutcomeName::Failed => Outcome::Fail {
            error: error.unwrap_or_else(|| "failed by the worker".into()),
        },
        OutcomeName::Skip => Outcome::Skip {
            reason: reason.unwrap_or_else(|| "skipped by the worker".into()),
        },
    };
    let done = state.engine().complete_lease(&token, outcome).await?;
    Ok(Json(CompleteResponse {
        status: done.status.as_str(),
        run_at: done.run_at,
    }))
}

/// How a task is given back.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    /// Resumable: the task goes back without spending this attempt and resumes from its last
    /// checkpoint. Implied by `cursor`.
    #[serde(default)]
    suspend: bool,
    /// A last cursor to save as the task is given back (any JSON value, up to 64 KiB).
    #[schema(value_type = Option<serde_json::Value>)]
    cursor: Option<Box<RawValue>>,
}

/// Give a leased task back unfinished (a worker shutting down): it is due again at once.
///
/// With no body, the attempt is recorded as interrupted and counts against the task's
/// attempts. With `{"suspend": true}` or `{"cursor": …}` the task is resumable: the cursor is
/// saved, the attempt is recorded as `suspended` and not counted.
#[utoipa::path(post, path = "/v1/leases/{token}/release", tag = "leases",
    params(("token" = String, Path, description = "The lease token")),
    request_body(content = Option<ReleaseBody>, description = "Optional: suspend a resumable task"),
    responses(
        (status = 204, description = "Released: the attempt is recorded as interrupted, or as suspended (not counted)"),
        MalformedJson,
        Unauthorized,
        NotALeaseToken,
        (status = 409, description = "The lease was already lost or completed", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        (status = 422, description = "Invalid fields, or a cursor over 64 KiB", body = Problem, content_type = "application/problem+json"),
    ))]
async fn release(
    State(state): State<AppState>,
    ApiPath(token): ApiPath<String>,
    AddedJson(body): AddedJson<ReleaseBody>,
) -> Result<axum::http::StatusCode, Problem> {
    if body.suspend || body.cursor.is_some() {
        let cursor = body.cursor.map(|c| c.get().to_string());
        state.engine().suspend_lease(&token, cursor).await?;
    } else {
        state.engine().release_lease(&token).await?;
    }
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// A cursor to save.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointBody {
    /// Where a later attempt resumes: any JSON value (an offset, a last id, an object), up to
    /// 64 KiB. The next lease of this task returns it as `checkpoint`.
    #[schema(value_type = serde_json::Value, example = json!({"offset": 1000}))]
    cursor: Box<RawValue>,
}

/// Save a cursor for the leased attempt, fenced by the lease: durable when this answers `204`.
///
/// A checkpoint from a lease that was lost (it expired and the task was leased again) is
/// refused with `409 lease-lost` and recorded on the task's timeline as `checkpoint_rejected`;
/// the newer attempt's cursor stands. A checkpoint does not extend the lease: heartbeat as
/// usual.
#[utoipa::path(post, path = "/v1/leases/{token}/checkpoint", tag = "leases",
    params(("token" = String, Path, description = "The lease token")),
    request_body = CheckpointBody,
    responses(
        (status = 204, description = "Saved"),
        MalformedJson,
        Unauthorized,
        NotALeaseToken,
        (status = 409, description = "The lease was lost: the checkpoint was not saved; stop working on the task", body = Problem, content_type = "application/problem+json"),
        BodyOverLimit,
        NotJson,
        (status = 422, description = "No cursor, or a cursor over 64 KiB", body = Problem, content_type = "application/problem+json"),
    ))]
async fn checkpoint(
    State(state): State<AppState>,
    ApiPath(token): ApiPath<String>,
    ApiJson(body): ApiJson<CheckpointBody>,
) -> Result<axum::http::StatusCode, Problem> {
    let cursor = body.cursor.get().to_string();
    state.engine().checkpoint_lease(&token, cursor).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
