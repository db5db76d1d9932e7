//! `/v1/hooks/{source}`: inbound provider callbacks, and the record of what each source
//! received.
//!
//! `POST /v1/hooks/{source}` is authenticated by the source's signature scheme, not by the
//! API's bearer token (a payment provider cannot send our token), so it is served outside the
//! token check ([`inbound`]). The body is taken as raw bytes, never parsed before its
//! signature is checked. The reply is sent as soon as the request and its task are durable:
//! business processing happens later, as the task's delivery, so a slow handler never makes
//! a provider time out and resend.
//!
//! `GET /v1/hooks/{source}/requests` lists recent requests with their verdicts, behind the
//! token like the rest of the API ([`router`]).

use super::problems::{BadQuery, NoSuchSource, Unauthorized};
use crate::extract::{ApiPath, ApiQuery, BodyError, read_body_within};
use crate::problem::Problem;
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use backstop_core::{CallbackId, CallbackRecord, ListCallbacksParams};
use backstop_engine::{CallbackError, CallbackReceipt, CallbackRequest};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes behind the API token: the record of received requests.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(requests))
}

/// The callback endpoint itself, authenticated by each source's signature scheme.
pub fn inbound() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(receive))
}

/// WeChat Pay's failure reply.
#[derive(Serialize, ToSchema)]
pub struct WechatFailure {
    #[schema(example = "FAIL")]
    code: String,
    message: String,
}

fn unknown_source(source: &str) -> Problem {
    Problem::not_found(format!(
        "no inbound source {source:?} is configured (add [sources.{source}] to backstop.toml)"
    ))
}

/// Receive one provider callback.
///
/// In order: the body size limit (`sources.NAME.max_body`), the signature and timestamp by
/// the source's scheme, the replay check (the same provider event id again is acknowledged
/// and creates nothing), the durable record of the raw request, a task of the source's kind
/// keyed by the event id, and the reply the provider expects: `204` (Alipay: `200 success`).
/// A rejected request is recorded with its reason and answered in the provider's failure
/// format (`401`, `400` or `413`; problem details, WeChat Pay's `{"code":"FAIL",…}`, or
/// Alipay's `fail`). The reply is sent once the record is durable, before any processing.
#[utoipa::path(post, path = "/v1/hooks/{source}", tag = "hooks",
    params(("source" = String, Path, description = "A configured `[sources.NAME]`")),
    request_body(description = "The provider's request, exactly as sent (JSON or form)",
        content(
            (serde_json::Value = "application/json"),
            (String = "application/x-www-form-urlencoded"),
        )),
    responses(
        (status = 204, description = "Accepted (or a duplicate of an accepted event)"),
        (status = 200, description = "Accepted, Alipay's reply", body = String, content_type = "text/plain"),
        (status = 400, description = "Verified but unusable (no event id, malformed body)", content(
            (Problem = "application/problem+json"), (WechatFailure = "application/json"), (String = "text/plain"))),
        (status = 401, description = "Signature, timestamp or a required header wrong or missing", content(
            (Problem = "application/problem+json"), (WechatFailure = "application/json"), (String = "text/plain"))),
        NoSuchSource,
        (status = 413, description = "Body over the source's limit", content(
            (Problem = "application/problem+json"), (WechatFailure = "application/json"), (String = "text/plain"))),
        (status = 503, description = "The ledger could not record it; the provider sends it again", content(
            (Problem = "application/problem+json"), (WechatFailure = "application/json"), (String = "text/plain"))),
    ))]
async fn receive(
    State(state): State<AppState>,
    ApiPath(source): ApiPath<String>,
    request: Request,
) -> Response {
    let engine = state.engine();
    let received_at = engine.clock().now();
    let Some(src) = engine.callback_source(&source) else {
        return unknown_source(&source).into_response();
    };
    let scheme = src.scheme();
    let limit = src.max_body;
    let (parts, body) = request.into_parts();
    let announced = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let result = match announced {
        Some(n) if n > limit as u64 => {
            engine
                .reject_oversized_callback(&source, &parts.headers, &[], n, received_at)
                .await
        }
        _ => match read_body_within(body, limit, state.limits().body_timeout).await {
            Err(BodyError::TimedOut(p)) => return p.into_response(),
            Ok(bytes) => {
                engine
                    .accept_callback(
                        &source,
                        CallbackRequest {
                            headers: &parts.headers,
                            body: &bytes,
                            received_at,
                        },
                    )
                    .await
            }
            Err(_) => {
                engine
                    .reject_oversized_callback(
                        &source,
                        &parts.headers,
                        &[],
                        limit as u64 + 1,
                        received_at,
                    )
                    .await
            }
        },
    };
    match result {
        Ok(receipt) => reply(receipt),
        Err(CallbackError::UnknownSource(_)) => unknown_source(&source).into_response(),
        Err(CallbackError::Store(e)) => {
            tracing::error!(source, error = %e, "an inbound callback could not be recorded");
            let r = scheme.failure_reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "the ledger could not record the callback; send it again later",
            );
            raw(r.status, r.content_type, r.body)
        }
    }
}

fn reply(receipt: CallbackReceipt) -> Response {
    let r = receipt.reply;
    let mut response = raw(r.status, r.content_type, r.body);
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&receipt.id.to_string()) {
        h.insert("backstop-callback-id", v);
    }
    h.insert(
        "backstop-callback-verdict",
        HeaderValue::from_static(receipt.verdict.as_str()),
    );
    response
}

fn raw(status: StatusCode, content_type: Option<&'static str>, body: Vec<u8>) -> Response {
    let mut response = (status, Body::from(body)).into_response();
    if let Some(ct) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    response
}

/// Paging of the requests listing.
#[derive(Deserialize, IntoParams, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RequestsQuery {
    /// Most requests to return (default 50, at most `api.max_list`).
    #[param(value_type = Option<usize>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// One received request.
#[derive(Serialize, ToSchema)]
pub struct RequestView {
    id: String,
    /// When it arrived (RFC 3339).
    received_at: String,
    /// `accepted` (task created), `duplicate` (its event was accepted before) or `rejected`.
    #[schema(example = "accepted")]
    verdict: &'static str,
    /// Why it was rejected, or what differed in a duplicate.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The provider's event id (the task's key).
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<String>,
    /// The task it created or is a duplicate of.
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
    /// The headers kept, as `[name, value]` pairs in the order received.
    #[schema(value_type = Vec<Vec<String>>)]
    headers: Box<RawValue>,
    /// The body as text (absent when it is not UTF-8; see `body_base64`). For a rejected
    /// request, only its first KiB is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    /// The body's size as received, in bytes.
    body_len: u64,
}

impl RequestView {
    fn new(r: CallbackRecord) -> Self {
        let headers = RawValue::from_string(r.headers)
            .unwrap_or_else(|_| RawValue::from_string("[]".into()).expect("valid JSON"));
        let (body, body_base64) = match String::from_utf8(r.body) {
            Ok(text) => (Some(text), None),
            Err(e) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(e.as_bytes())),
            ),
        };
        RequestView {
            id: r.id.to_string(),
            received_at: backstop_core::wire_time::format(r.received_at),
            verdict: r.verdict.as_str(),
            reason: r.reason,
            event_id: r.event_id,
            task_id: r.task_id.map(|t| t.to_string()),
            headers,
            body,
            body_base64,
            body_len: r.body_len,
        }
    }
}

/// One page of received requests, newest first.
#[derive(Serialize, ToSchema)]
pub struct RequestPage {
    requests: Vec<RequestView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// Recent requests of one source, newest first, with their verdicts.
#[utoipa::path(get, path = "/v1/hooks/{source}/requests", tag = "hooks", operation_id = "list_hook_requests",
    params(("source" = String, Path, description = "A configured `[sources.NAME]`"), RequestsQuery),
    responses(
        (status = 200, description = "One page of requests", body = RequestPage),
        Unauthorized,
        NoSuchSource,
        BadQuery,
    ))]
async fn requests(
    State(state): State<AppState>,
    ApiPath(source): ApiPath<String>,
    ApiQuery(mut q): ApiQuery<RequestsQuery>,
) -> Result<Response, Problem> {
    if q.cursor.as_deref().is_some_and(str::is_empty) {
        q.cursor = None;
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
    let before = q
        .cursor
        .as_deref()
        .map(|c| {
            c.parse::<CallbackId>()
                .map_err(|_| Problem::invalid(format!("cursor {c:?} is not a next_cursor value")))
        })
        .transpose()?;
    if state.engine().callback_source(&source).is_none() {
        return Err(unknown_source(&source));
    }
    let records = state
        .engine()
        .store()
        .list_callbacks(ListCallbacksParams {
            source,
            limit: limit + 1,
            before,
        })
        .await?;
    let more = records.len() > limit;
    let shown: Vec<CallbackRecord> = records.into_iter().take(limit).collect();
    let next_cursor = more
        .then(|| shown.last().map(|r| r.id.to_string()))
        .flatten();
    let page = RequestPage {
        requests: shown.into_iter().map(RequestView::new).collect(),
        next_cursor,
    };
    Ok(Json(page).into_response())
}
