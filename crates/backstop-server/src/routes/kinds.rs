//! `/v1/kinds`: the configured kinds, their policies and live counts.

use super::problems::Unauthorized;
use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use backstop_core::duration::format_duration;
use backstop_core::store::CountsParams;
use backstop_core::{RetryPolicy, Status, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this resource.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
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
        });
    }
    Ok(Json(KindList { kinds }))
}
