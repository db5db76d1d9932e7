//! `/v1/schedules`: every schedule with its next instants and last ticks; run one now, pause,
//! resume and backfill a range.

use super::problems::{
    BodyOverLimit, InvalidFields, MalformedJson, NoSuchSchedule, NotJson, Unauthorized,
};
use crate::auth::Actor;
use crate::extract::{ApiJson, ApiPath, OptionalJson};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use backstop_core::schedule::ScheduleDef;
use backstop_core::wire_time;
use backstop_engine::schedules::{ScheduleActionError, ScheduleView};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, register))
        .routes(routes!(remove))
        .routes(routes!(trigger))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(backfill))
}

/// Every schedule.
#[derive(Serialize, ToSchema)]
pub struct ScheduleList {
    schedules: Vec<ScheduleEntry>,
}

/// One schedule.
#[derive(Serialize, ToSchema)]
pub struct ScheduleEntry {
    name: String,
    cron: String,
    /// IANA time zone.
    timezone: String,
    kind: String,
    /// `skip`, `allow` or `queue_one`.
    overlap: String,
    /// `skip`, `latest` or `all`.
    catch_up: String,
    paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    paused_note: Option<String>,
    /// Every instant up to here has its row (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    planned_until: Option<String>,
    /// A `queue_one` instant waiting for the running tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<String>,
    /// The next instants (RFC 3339).
    next: Vec<String>,
    /// The last instants, newest first, with their rows.
    last_ticks: Vec<TickEntry>,
    /// Instants compensated as missed, ever.
    missed: u64,
    /// Instants compensated as overlapping, ever.
    overlapped: u64,
    /// Ticks not started `late_after` past their instant, as the reconciler's last pass found
    /// them.
    late: u64,
    /// Ticks running past `max_runtime`, as the reconciler's last pass found them.
    overrun: u64,
    /// Recent planned instants without their row, as the reconciler's last pass found them.
    rows_missing: u64,
    /// Nothing plans this schedule (the reconciler's last pass found its planning silent).
    silent: bool,
    /// Registered over the API (`POST /v1/schedules`), not in the configuration file.
    registered: bool,
}

/// One instant and its row.
#[derive(Serialize, ToSchema)]
pub struct TickEntry {
    instant: String,
    key: String,
    /// Absent: no row (not planned yet, or pruned by retention).
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

fn entry(v: ScheduleView) -> ScheduleEntry {
    ScheduleEntry {
        overlap: v.overlap.as_str().to_string(),
        catch_up: v.catch_up.as_str().to_string(),
        name: v.name,
        cron: v.cron,
        timezone: v.timezone,
        kind: v.kind,
        paused: v.paused,
        paused_note: v.paused_note,
        planned_until: v.planned_until.map(wire_time::format),
        waiting: v.waiting.map(wire_time::format),
        next: v.next.into_iter().map(wire_time::format).collect(),
        last_ticks: v
            .last_ticks
            .into_iter()
            .map(|t| TickEntry {
                instant: wire_time::format(t.instant),
                key: t.key,
                id: t.id.map(|id| id.to_string()),
                status: t.status.map(|s| s.as_str().to_string()),
                reason: t.reason,
            })
            .collect(),
        missed: v.missed,
        overlapped: v.overlapped,
        late: v.late,
        overrun: v.overrun,
        rows_missing: v.rows_missing,
        silent: v.silent,
        registered: v.registered,
    }
}

fn refused(e: ScheduleActionError) -> Problem {
    match e {
        ScheduleActionError::Unknown(..) => Problem::not_found(e.to_string()),
        ScheduleActionError::BadRange(d) => Problem::invalid(d),
        ScheduleActionError::Invalid(e) => Problem::invalid(e.to_string()),
        ScheduleActionError::Configured(_) => {
            Problem::new(StatusCode::CONFLICT, "Conflict", e.to_string())
        }
        ScheduleActionError::Store(e) => e.into(),
    }
}

/// Every configured schedule: next instants, last ticks with their status, missed and
/// overlapped counts.
#[utoipa::path(get, path = "/v1/schedules", tag = "schedules", operation_id = "list_schedules",
    responses(
        (status = 200, description = "The schedules", body = ScheduleList),
        Unauthorized,
    ))]
async fn list(State(state): State<AppState>) -> Result<Json<ScheduleList>, Problem> {
    let views = state.engine().schedules().await?;
    Ok(Json(ScheduleList {
        schedules: views.into_iter().map(entry).collect(),
    }))
}

/// A schedule to register: its name and the fields of `[schedules.NAME]`.
#[derive(Deserialize, ToSchema)]
pub struct RegisterBody {
    /// 1 to 100 of `A-Z a-z 0-9 . _ -`.
    name: String,
    /// The fields of `[schedules.NAME]`: `cron`, `seconds`, `timezone`, `kind`, `payload`,
    /// `overlap`, `catch_up`, `catchup_window`, `catchup_max`, `jitter`, `max_runtime`,
    /// `paused`.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    definition: serde_json::Map<String, serde_json::Value>,
}

/// Registers (or replaces) a schedule; every process plans it within a few seconds. Its
/// definition is checked as the configuration file's are.
#[utoipa::path(post, path = "/v1/schedules", tag = "schedules", operation_id = "register_schedule",
    request_body = RegisterBody,
    responses(
        (status = 201, description = "The schedule", body = ScheduleEntry),
        MalformedJson,
        Unauthorized,
        BodyOverLimit,
        NotJson,
        (status = 409, description = "A schedule of the configuration file has this name", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A field is wrong (the detail names it)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn register(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    ApiJson(body): ApiJson<RegisterBody>,
) -> Result<(StatusCode, Json<ScheduleEntry>), Problem> {
    let def: ScheduleDef = serde_json::from_value(serde_json::Value::Object(body.definition))
        .map_err(|e| Problem::invalid(format!("schedule {:?}: {e}", body.name)))?;
    let v = state
        .engine()
        .register_schedule(&body.name, def)
        .await
        .map_err(refused)?;
    tracing::info!(schedule = %body.name, actor = %actor.0, "schedule registered over the API");
    Ok((StatusCode::CREATED, Json(entry(v))))
}

/// Removes a schedule registered over the API: no instant is planned any more; its ticks stay.
#[utoipa::path(delete, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 204, description = "Removed"),
        Unauthorized,
        NoSuchSchedule,
        (status = 409, description = "The schedule is in the configuration file", body = Problem, content_type = "application/problem+json"),
    ))]
async fn remove(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    Extension(actor): Extension<Actor>,
) -> Result<StatusCode, Problem> {
    state
        .engine()
        .remove_schedule(&name)
        .await
        .map_err(refused)?;
    tracing::info!(schedule = %name, actor = %actor.0, "schedule removed over the API");
    Ok(StatusCode::NO_CONTENT)
}

/// A manual run.
#[derive(Serialize, ToSchema)]
pub struct TriggeredEntry {
    schedule: String,
    /// `<schedule>@manual:<when>`.
    key: String,
    id: String,
}

/// Runs the schedule now, by hand: a task keyed `<schedule>@manual:<now>`, recorded as such.
#[utoipa::path(post, path = "/v1/schedules/{name}/trigger", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 201, description = "The manual run's task", body = TriggeredEntry),
        Unauthorized,
        NoSuchSchedule,
    ))]
async fn trigger(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    Extension(actor): Extension<Actor>,
) -> Result<(StatusCode, Json<TriggeredEntry>), Problem> {
    let t = state
        .engine()
        .trigger_schedule(&name, &actor.0)
        .await
        .map_err(refused)?;
    Ok((
        StatusCode::CREATED,
        Json(TriggeredEntry {
            schedule: t.schedule,
            key: t.key,
            id: t.id.to_string(),
        }),
    ))
}

/// Why a schedule is paused.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    #[serde(default)]
    reason: Option<String>,
}

/// Pauses the schedule: each instant until resumed is a `compensated` row (`paused: …`).
#[utoipa::path(post, path = "/v1/schedules/{name}/pause", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    request_body(content = Option<PauseBody>, description = "Optional reason"),
    responses(
        (status = 200, description = "The schedule", body = ScheduleEntry),
        MalformedJson,
        Unauthorized,
        NoSuchSchedule,
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn pause(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    Extension(actor): Extension<Actor>,
    OptionalJson(body): OptionalJson<PauseBody>,
) -> Result<Json<ScheduleEntry>, Problem> {
    let note = match body.reason {
        Some(r) => format!("{}: {r}", actor.0),
        None => actor.0,
    };
    let v = state
        .engine()
        .pause_schedule(&name, true, Some(note))
        .await
        .map_err(refused)?;
    Ok(Json(entry(v)))
}

/// Resumes a schedule paused by hand.
#[utoipa::path(post, path = "/v1/schedules/{name}/resume", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses(
        (status = 200, description = "The schedule", body = ScheduleEntry),
        Unauthorized,
        NoSuchSchedule,
    ))]
async fn resume(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ScheduleEntry>, Problem> {
    let v = state
        .engine()
        .pause_schedule(&name, false, None)
        .await
        .map_err(refused)?;
    Ok(Json(entry(v)))
}

/// A range to backfill.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillBody {
    /// RFC 3339.
    from: String,
    /// RFC 3339; not in the future.
    to: String,
    #[serde(default)]
    dry_run: bool,
}

/// What a backfill did or would do.
#[derive(Serialize, ToSchema)]
pub struct BackfillEntry {
    schedule: String,
    from: String,
    to: String,
    instants: usize,
    created: usize,
    existing: usize,
    dry_run: bool,
}

/// Creates the rows of every instant in `[from, to]` that has none, to run now (`dry_run`:
/// counts them). Idempotent: a second backfill creates nothing.
#[utoipa::path(post, path = "/v1/schedules/{name}/backfill", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    request_body = BackfillBody,
    responses(
        (status = 200, description = "What was (or would be) created", body = BackfillEntry),
        MalformedJson,
        Unauthorized,
        NoSuchSchedule,
        BodyOverLimit,
        NotJson,
        (status = 422, description = "A bad range", body = Problem, content_type = "application/problem+json"),
    ))]
async fn backfill(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<BackfillBody>,
) -> Result<Json<BackfillEntry>, Problem> {
    let time = |field: &str, v: &str| {
        v.parse::<jiff::Timestamp>().map_err(|_| {
            Problem::invalid(format!(
                "{field}: {v:?} is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)"
            ))
        })
    };
    let (from, to) = (time("from", &body.from)?, time("to", &body.to)?);
    let r = state
        .engine()
        .backfill_schedule(&name, from, to, body.dry_run)
        .await
        .map_err(refused)?;
    Ok(Json(BackfillEntry {
        schedule: r.schedule,
        from: wire_time::format(r.from),
        to: wire_time::format(r.to),
        instants: r.instants,
        created: r.created,
        existing: r.existing,
        dry_run: r.dry_run,
    }))
}
