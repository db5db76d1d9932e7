//! `/v1/kinds`: the configured kinds, their policies and live counts; pausing and resuming a
//! kind's dispatch by hand, and what pauses it now.

use super::problems::{
    BodyOverLimit, InvalidFields, MalformedJson, NoSuchKind, NotJson, PausedInConfig, Unauthorized,
};
use crate::auth::Actor;
use crate::extract::{ApiJson, ApiPath, OptionalJson};
use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use backstop_core::duration::format_duration;
use backstop_core::store::CountsParams;
use backstop_core::{RetryPolicy, Status, Target};
use backstop_engine::{KindPauseError, KindPauseView};
use serde::Deserialize;
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(pause_state))
        .routes(routes!(pause))
        .routes(routes!(resume))
}

/// Every configured kind.
#[derive(Serialize, ToSchema)]
pub struct KindList {
    kinds: Vec<KindView>,
}

/// One kind: where its tasks go, its policy, and how many tasks it has in each status.
#[derive(Serialize, ToSchema)]
pub struct KindView {
    name: String,
    /// `push` (HTTP), `pull` (leased over this API) or `in_process`.
    target: &'static str,
    /// The push URL (push kinds only).
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    max_attempts: u32,
    retry: RetryView,
    /// Longest an attempt may take (`30s`); push and in-process kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    /// Attempts that may run at once in one process; push and in-process kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency: Option<usize>,
    /// Lease length of a claim (for pull kinds: the default of a lease request).
    lease: String,
    /// Default business validity of a task.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_in: Option<String>,
    /// Tasks per status: pending, running, succeeded, failed, compensated.
    counts: BTreeMap<String, u64>,
    /// Its dispatch in this process: `open`, `paused` (by hand, in config, by its breaker, by
    /// a `Retry-After`) or `probing` (the breaker sends one task at a time).
    dispatch: &'static str,
    /// Its limits per key as configured: `concurrency` (`key`, `max`) and `rate` (`key`,
    /// `limit`, `period`, `burst`); overrides per key are under `/v1/limits/{kind}`. `host`
    /// (`host`, `max`, `kinds`): its target host's limit, shared with the kinds listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    limits: Option<serde_json::Value>,
    /// Its circuit breakers as configured: `kind` (its own) and `host` (its target host's,
    /// counting the `kinds` listed together), each with `failures`, `cool_down`,
    /// `max_cool_down`, `probes` and, when set, `failure_rate`, `window`, `min_attempts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    breaker: Option<serde_json::Value>,
}

/// A kind's configured breakers, for its view.
fn breaker_view(k: &backstop_core::KindConfig) -> Option<serde_json::Value> {
    fn one(
        b: &backstop_core::breaker::BreakerConfig,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut v = serde_json::Map::new();
        v.insert("failures".into(), b.failures.into());
        v.insert("cool_down".into(), format_duration(b.cool_down).into());
        v.insert(
            "max_cool_down".into(),
            format_duration(b.max_cool_down).into(),
        );
        v.insert("probes".into(), b.probes.into());
        if let Some(r) = &b.rate {
            v.insert("failure_rate".into(), r.ratio.into());
            v.insert("window".into(), format_duration(r.window).into());
            v.insert("min_attempts".into(), r.min_attempts.into());
        }
        v
    }
    if k.breaker.is_none() && k.host_breaker.is_none() {
        return None;
    }
    let mut v = serde_json::Map::new();
    if let Some(b) = &k.breaker {
        v.insert("kind".into(), one(b).into());
    }
    if let Some(h) = &k.host_breaker {
        let mut b = one(&h.config);
        b.insert("host".into(), h.host.clone().into());
        b.insert("kinds".into(), h.kinds.clone().into());
        v.insert("host".into(), b.into());
    }
    Some(serde_json::Value::Object(v))
}

/// A kind's configured limits per key, for its view.
fn limits_view(k: &backstop_core::KindConfig) -> Option<serde_json::Value> {
    if k.concurrency_limit.is_none() && k.rate_limit.is_none() && k.host_limit.is_none() {
        return None;
    }
    let mut v = serde_json::Map::new();
    if let Some(c) = &k.concurrency_limit {
        v.insert(
            "concurrency".into(),
            serde_json::json!({"key": c.key, "max": c.max, "missing_key": c.missing_key.as_str()}),
        );
    }
    if let Some(r) = &k.rate_limit {
        v.insert(
            "rate".into(),
            serde_json::json!({
                "key": r.key,
                "limit": r.limit,
                "period": format_duration(r.period),
                "burst": r.burst,
                "missing_key": r.missing_key.as_str(),
            }),
        );
    }
    if let Some(h) = &k.host_limit {
        v.insert(
            "host".into(),
            serde_json::json!({"host": h.host, "max": h.max, "kinds": h.kinds}),
        );
    }
    Some(serde_json::Value::Object(v))
}

/// The retry policy.
#[derive(Serialize, ToSchema)]
pub struct RetryView {
    /// `exponential` or `schedule`.
    policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    base: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cap: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jitter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule: Option<Vec<String>>,
}

fn retry_view(p: &RetryPolicy) -> RetryView {
    match p {
        RetryPolicy::Exponential { base, cap, jitter } => RetryView {
            policy: "exponential",
            base: Some(format_duration(*base)),
            cap: Some(format_duration(*cap)),
            jitter: Some(*jitter),
            schedule: None,
        },
        RetryPolicy::Schedule(d) => RetryView {
            policy: "schedule",
            base: None,
            cap: None,
            jitter: None,
            schedule: Some(d.iter().map(|d| format_duration(*d)).collect()),
        },
    }
}

/// The configured kinds, with their policy and live counts per status.
#[utoipa::path(get, path = "/v1/kinds", tag = "kinds", operation_id = "list_kinds",
    responses(
        (status = 200, description = "The configured kinds", body = KindList),
        Unauthorized,
    ))]
async fn list(State(state): State<AppState>) -> Result<Json<KindList>, Problem> {
    let engine = state.engine();
    let mut names: Vec<&String> = engine.kinds().keys().collect();
    names.sort();
    let mut kinds = Vec::with_capacity(names.len());
    for name in names {
        let k = &engine.kinds()[name];
        let c = engine
            .store()
            .counts(CountsParams {
                kind: Some(name.to_string()),
            })
            .await?;
        let (target, url) = match &k.target {
            Target::HttpPush { url, .. } => ("push", Some(url.clone())),
            Target::Pull => ("pull", None),
            Target::InProcess => ("in_process", None),
            Target::Broker(b) => (
                match b.broker.scheme().as_str() {
                    "redis" | "rediss" => "redis",
                    _ => "rabbitmq",
                },
                Some(b.broker.redacted()),
            ),
        };
        kinds.push(KindView {
            name: name.clone(),
            target,
            url,
            max_attempts: k.max_attempts,
            retry: retry_view(&k.retry),
            timeout: (target != "pull").then(|| format_duration(k.timeout)),
            concurrency: (target != "pull").then_some(k.concurrency),
            lease: format_duration(k.lease),
            expires_in: k.expires_in.map(format_duration),
            counts: Status::ALL
                .iter()
                .map(|s| (s.as_str().to_string(), c.get(*s)))
                .collect(),
            dispatch: engine.dispatch_state(name).unwrap_or("open"),
            limits: limits_view(k),
            breaker: breaker_view(k),
        });
    }
    Ok(Json(KindList { kinds }))
}

/// A kind's dispatch: open, paused or probing, what pauses it (cause, reason, who, since,
/// until), its stored pauses and its latest history.
#[derive(Serialize, ToSchema)]
pub struct KindPause {
    kind: String,
    /// `open`, `paused` or `probing`.
    state: &'static str,
    /// `manual`, `breaker` or `retry_after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    cause: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// When the pause ends by itself (RFC 3339); absent for a pause by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    /// Every stored pause (a pause by hand and a breaker's can stand together).
    #[schema(value_type = Vec<Object>)]
    pauses: serde_json::Value,
    /// The latest pauses and resumes, newest first: `at`, `action` (`pause`/`resume`),
    /// `cause`, `reason`, `by`, `until`.
    #[schema(value_type = Vec<Object>)]
    history: serde_json::Value,
}

fn pause_view(v: KindPauseView) -> KindPause {
    let t = |t: jiff::Timestamp| backstop_core::wire_time::format(t);
    KindPause {
        state: v.state,
        cause: v.cause,
        reason: v.reason,
        until: v.until.map(t),
        by: v.by,
        since: v.since.map(t),
        pauses: serde_json::to_value(&v.pauses).unwrap_or_default(),
        history: serde_json::to_value(&v.history).unwrap_or_default(),
        kind: v.kind,
    }
}

fn refused(e: KindPauseError) -> Problem {
    match e {
        KindPauseError::Unknown(..) => Problem::not_found(e.to_string()),
        KindPauseError::NoReason => Problem::invalid(e.to_string()),
        KindPauseError::PausedInConfig(_) => {
            Problem::new(StatusCode::CONFLICT, "Conflict", e.to_string())
        }
        KindPauseError::Store(e) => e.into(),
    }
}

/// Why a kind is paused or resumed; kept in its history with the token's name.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KindPauseBody {
    #[serde(default)]
    reason: Option<String>,
}

/// What pauses a kind now, and its history.
#[utoipa::path(get, path = "/v1/kinds/{kind}/pause", tag = "kinds", operation_id = "show_kind_pause",
    params(("kind" = String, Path, description = "Kind name")),
    responses(
        (status = 200, description = "The kind's dispatch", body = KindPause),
        Unauthorized,
        NoSuchKind,
    ))]
async fn pause_state(
    State(state): State<AppState>,
    ApiPath(kind): ApiPath<String>,
) -> Result<Json<KindPause>, Problem> {
    let v = state.engine().kind_pause(&kind).await.map_err(refused)?;
    Ok(Json(pause_view(v)))
}

/// Pauses a kind by hand: nothing of it is claimed or leased, by any process on this ledger,
/// until it is resumed; its tasks stay pending and spend no attempts. `reason` is required.
#[utoipa::path(post, path = "/v1/kinds/{kind}/pause", tag = "kinds", operation_id = "pause_kind",
    params(("kind" = String, Path, description = "Kind name")),
    request_body(content = KindPauseBody, description = "Why (required)"),
    responses(
        (status = 200, description = "The kind's dispatch", body = KindPause),
        MalformedJson,
        Unauthorized,
        NoSuchKind,
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn pause(
    State(state): State<AppState>,
    ApiPath(kind): ApiPath<String>,
    Extension(actor): Extension<Actor>,
    ApiJson(body): ApiJson<KindPauseBody>,
) -> Result<Json<KindPause>, Problem> {
    let reason = body.reason.unwrap_or_default();
    let v = state
        .engine()
        .pause_kind(&kind, &reason, &actor.0)
        .await
        .map_err(refused)?;
    Ok(Json(pause_view(v)))
}

/// Resumes a kind: clears its pause by hand and any breaker or `Retry-After` pause. A kind
/// paused in the configuration is a 409.
#[utoipa::path(post, path = "/v1/kinds/{kind}/resume", tag = "kinds", operation_id = "resume_kind",
    params(("kind" = String, Path, description = "Kind name")),
    request_body(content = Option<KindPauseBody>, description = "Optional reason"),
    responses(
        (status = 200, description = "The kind's dispatch", body = KindPause),
        MalformedJson,
        Unauthorized,
        NoSuchKind,
        PausedInConfig,
        BodyOverLimit,
        NotJson,
        InvalidFields,
    ))]
async fn resume(
    State(state): State<AppState>,
    ApiPath(kind): ApiPath<String>,
    Extension(actor): Extension<Actor>,
    OptionalJson(body): OptionalJson<KindPauseBody>,
) -> Result<Json<KindPause>, Problem> {
    let reason = body.reason.unwrap_or_default();
    let v = state
        .engine()
        .resume_kind(&kind, &reason, &actor.0)
        .await
        .map_err(refused)?;
    Ok(Json(pause_view(v)))
}
