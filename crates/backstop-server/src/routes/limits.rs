//! `/v1/limits`: a kind's limits per key as configured with every key's override; one key's
//! limits in force and its history; overriding them for one key at run time, and clearing the
//! override. Each change is kept in the key's history with the token's name and the reason.

use super::problems::{
    BodyOverLimit, InvalidFields, MalformedJson, NoSuchKind, NotJson, Unauthorized,
};
use crate::auth::Actor;
use crate::extract::{ApiJson, ApiPath, OptionalJson};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use backstop_core::duration::parse_duration;
use backstop_core::limit::RateSpec;
use backstop_engine::{KeyLimits, LimitOverrideError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(kind_limits))
        .routes(routes!(key_limits, set_key_limits, clear_key_limits))
}

/// A kind's limits (`concurrency`, `rate`) and its `overrides`, or one key's limits in force
/// with its `override` and `history` (`action`, `max`, `rate`, `by`, `reason`, `at`).
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct Limits(serde_json::Value);

/// A key's new limits, and why.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetKeyLimitsBody {
    /// Most attempts of the key running at once (the kind needs `limits.concurrency`).
    #[serde(default)]
    max: Option<u32>,
    /// The key's rate (the kind needs `limits.rate`).
    #[serde(default)]
    rate: Option<RateBody>,
    /// Why; kept in the key's history (required).
    #[serde(default)]
    reason: Option<String>,
}

/// A rate: `limit` starts per `period` (default `1s`), `burst` at once (default 1).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateBody {
    limit: u32,
    #[serde(default)]
    period: Option<String>,
    #[serde(default)]
    burst: Option<u32>,
}

/// Why an override is cleared.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClearKeyLimitsBody {
    #[serde(default)]
    reason: Option<String>,
}

fn refused(e: LimitOverrideError) -> Problem {
    match e {
        LimitOverrideError::Unknown(..) | LimitOverrideError::NoOverride(..) => {
            Problem::not_found(e.to_string())
        }
        LimitOverrideError::NotLimited(_)
        | LimitOverrideError::NoConcurrencyLimit(_)
        | LimitOverrideError::NoRateLimit(_) => {
            Problem::new(StatusCode::CONFLICT, "Conflict", e.to_string())
        }
        LimitOverrideError::Empty
        | LimitOverrideError::Invalid(_)
        | LimitOverrideError::NoReason
        | LimitOverrideError::KeyTooLong(_) => Problem::invalid(e.to_string()),
        LimitOverrideError::Store(e) => e.into(),
    }
}

fn rate(r: RateBody) -> Result<RateSpec, Problem> {
    let period = match r.period.as_deref() {
        None => std::time::Duration::from_secs(1),
        Some(p) => parse_duration(p).map_err(|e| Problem::invalid(format!("rate.period: {e}")))?,
    };
    if period.as_millis() == 0 {
        return Err(Problem::invalid(
            "rate.period: give at least 1ms, e.g. \"1s\"",
        ));
    }
    if r.limit == 0 {
        return Err(Problem::invalid(
            "rate.limit: 0 would never let a task start: give at least 1",
        ));
    }
    if r.burst == Some(0) {
        return Err(Problem::invalid(
            "rate.burst: 0 would never let a task start: give at least 1",
        ));
    }
    Ok(RateSpec {
        limit: r.limit,
        period,
        burst: r.burst.unwrap_or(1),
    })
}

fn json(v: impl Serialize) -> Json<Limits> {
    Json(Limits(serde_json::to_value(v).unwrap_or_default()))
}

/// A kind's limits per key as configured, with every key's override.
#[utoipa::path(get, path = "/v1/limits/{kind}", tag = "limits", operation_id = "show_kind_limits",
    params(("kind" = String, Path, description = "Kind name")),
    responses(
        (status = 200, description = "The kind's limits and overrides", body = Limits),
        (status = 409, description = "The kind has no limits per key", content_type = "application/problem+json"),
        Unauthorized,
        NoSuchKind,
    ))]
async fn kind_limits(
    State(state): State<AppState>,
    ApiPath(kind): ApiPath<String>,
) -> Result<Json<Limits>, Problem> {
    let v = state.engine().kind_limits(&kind).await.map_err(refused)?;
    Ok(json(v))
}

/// One key's limits in force (its override's, else the kind's), its override and its history.
#[utoipa::path(get, path = "/v1/limits/{kind}/keys/{key}", tag = "limits", operation_id = "show_key_limits",
    params(("kind" = String, Path, description = "Kind name"), ("key" = String, Path, description = "The limit key (a tenant id, say)")),
    responses(
        (status = 200, description = "The key's limits", body = Limits),
        (status = 409, description = "The kind has no limits per key", content_type = "application/problem+json"),
        Unauthorized,
        NoSuchKind,
    ))]
async fn key_limits(
    State(state): State<AppState>,
    ApiPath((kind, key)): ApiPath<(String, String)>,
) -> Result<Json<Limits>, Problem> {
    let v = state
        .engine()
        .key_limits(&kind, &key)
        .await
        .map_err(refused)?;
    Ok(json(v))
}

/// Overrides one key's limits: `max` (most running at once) and/or `rate`, in place of the
/// kind's, from the next claim on, on every process. `reason` is required; the change is kept
/// in the key's history with the token's name.
#[utoipa::path(put, path = "/v1/limits/{kind}/keys/{key}", tag = "limits", operation_id = "set_key_limits",
    params(("kind" = String, Path, description = "Kind name"), ("key" = String, Path, description = "The limit key")),
    request_body(content = SetKeyLimitsBody, description = "The key's limits and why"),
    responses(
        (status = 200, description = "The key's limits", body = Limits),
        (status = 409, description = "The kind has no such limit to override", content_type = "application/problem+json"),
        MalformedJson,
        Unauthorized,
        NoSuchKind,
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn set_key_limits(
    State(state): State<AppState>,
    ApiPath((kind, key)): ApiPath<(String, String)>,
    Extension(actor): Extension<Actor>,
    ApiJson(body): ApiJson<SetKeyLimitsBody>,
) -> Result<Json<Limits>, Problem> {
    let limits = KeyLimits {
        max: body.max,
        rate: body.rate.map(rate).transpose()?,
    };
    let v = state
        .engine()
        .set_key_limits(
            &kind,
            &key,
            limits,
            body.reason.as_deref().unwrap_or_default(),
            &actor.0,
        )
        .await
        .map_err(refused)?;
    Ok(json(v))
}

/// Clears one key's override: it follows its kind's limits again. `reason` is required.
#[utoipa::path(delete, path = "/v1/limits/{kind}/keys/{key}", tag = "limits", operation_id = "clear_key_limits",
    params(("kind" = String, Path, description = "Kind name"), ("key" = String, Path, description = "The limit key")),
    request_body(content = ClearKeyLimitsBody, description = "Why"),
    responses(
        (status = 200, description = "The key's limits", body = Limits),
        (status = 409, description = "The kind has no limits per key", content_type = "application/problem+json"),
        MalformedJson,
        Unauthorized,
        NoSuchKind,
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn clear_key_limits(
    State(state): State<AppState>,
    ApiPath((kind, key)): ApiPath<(String, String)>,
    Extension(actor): Extension<Actor>,
    OptionalJson(body): OptionalJson<ClearKeyLimitsBody>,
) -> Result<Json<Limits>, Problem> {
    let v = state
        .engine()
        .clear_key_limits(
            &kind,
            &key,
            body.reason.as_deref().unwrap_or_default(),
            &actor.0,
        )
        .await
        .map_err(refused)?;
    Ok(json(v))
}
