//! The problem responses several routes share, for the OpenAPI document: each is one status
//! with its description and an `application/problem+json` body, listed by type in a route's
//! `responses(...)` (`responses((status = 200, ...), MalformedJson, Unauthorized)`). A response
//! whose meaning is the route's own stays a tuple there.
//!
//! These types describe responses only; handlers answer with [`Problem`].

#![expect(
    dead_code,
    reason = "the types are read by utoipa's derive for their description, never built"
)]

use crate::Problem;
use utoipa::IntoResponses;

/// 400: the body is not JSON.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "Malformed JSON",
    content_type = "application/problem+json"
)]
pub struct MalformedJson(Problem);

/// 401: every route behind the bearer token.
#[derive(IntoResponses)]
#[response(
    status = 401,
    description = "Missing or wrong bearer token",
    content_type = "application/problem+json"
)]
pub struct Unauthorized(Problem);

/// 404: a task id that names no task.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such task",
    content_type = "application/problem+json"
)]
pub struct NoSuchTask(Problem);

/// 404: a kind that is not configured.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "Unknown kind",
    content_type = "application/problem+json"
)]
pub struct UnknownKind(Problem);

/// 404: a lease token the ledger never issued.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "Not a lease token",
    content_type = "application/problem+json"
)]
pub struct NotALeaseToken(Problem);

/// 404: a callback source that is not configured.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such source",
    content_type = "application/problem+json"
)]
pub struct NoSuchSource(Problem);

/// 404: a kind that is not configured.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such kind",
    content_type = "application/problem+json"
)]
pub struct NoSuchKind(Problem);

/// 409: the kind is paused in the configuration file, which only a restart changes.
#[derive(IntoResponses)]
#[response(
    status = 409,
    description = "Paused in the configuration",
    content_type = "application/problem+json"
)]
pub struct PausedInConfig(Problem);

/// 404: a schedule that is not configured.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such schedule",
    content_type = "application/problem+json"
)]
pub struct NoSuchSchedule(Problem);

/// 413: the body is larger than `api.max_body`.
#[derive(IntoResponses)]
#[response(
    status = 413,
    description = "Body over the limit",
    content_type = "application/problem+json"
)]
pub struct BodyOverLimit(Problem);

/// 415: a JSON route called without `Content-Type: application/json`.
#[derive(IntoResponses)]
#[response(
    status = 415,
    description = "The body is not declared as JSON (Content-Type: application/json)",
    content_type = "application/problem+json"
)]
pub struct NotJson(Problem);

/// 422: a JSON body whose fields do not check.
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "Invalid fields",
    content_type = "application/problem+json"
)]
pub struct InvalidFields(Problem);

/// 422: query parameters that do not check.
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "Invalid parameters",
    content_type = "application/problem+json"
)]
pub struct InvalidParameters(Problem);

/// 422: a list's query parameters that do not check.
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "Bad query parameters",
    content_type = "application/problem+json"
)]
pub struct BadQuery(Problem);

/// 503: the ledger cannot take the request now; added to every route that uses the ledger
/// (see `crate::document_refusals`).
#[derive(IntoResponses)]
#[response(
    status = 503,
    description = "The ledger cannot take the request now (unreachable, full, read-only or locked); nothing was written; send it again after Retry-After seconds",
    content_type = "application/problem+json",
    headers(("Retry-After" = u32, description = "Seconds to wait before sending it again"))
)]
pub struct LedgerUnavailable(Problem);

/// 408: the body did not arrive within `api.body_timeout`; added to every route that reads one.
#[derive(IntoResponses)]
#[response(
    status = 408,
    description = "The request body did not arrive within api.body_timeout",
    content_type = "application/problem+json"
)]
pub struct BodyTimeout(Problem);
