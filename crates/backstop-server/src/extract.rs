//! Request extractors whose rejections are problem documents: a body that is too large,
//! malformed, of the wrong shape or not declared as JSON gets a 4xx that says which, never
//! axum's plain text.

use crate::problem::Problem;
use crate::state::AppState;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// A JSON body, read up to the configured size limit.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Problem> {
        let bytes = read_body(req, state).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// A JSON body that may be empty or `null` (then `T::default()`).
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for OptionalJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Problem> {
        let bytes = read_body(req, state).await?;
        // Absent means no bytes at all: a body of only whitespace is sent, and is not JSON.
        if bytes.is_empty() || bytes.trim_ascii() == b"null" {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&bytes).map(OptionalJson)
    }
}

/// Options in a JSON body added to an endpoint that took none: no body at all (and no content
/// type) still means the defaults, as it did; a body must be JSON like any other.
pub struct AddedJson<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for AddedJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Problem> {
        let typed = require_json(req.headers());
        let bytes = read_body_unchecked(req, state).await?;
        if bytes.is_empty() {
            return Ok(AddedJson(T::default()));
        }
        typed?;
        if bytes.trim_ascii() == b"null" {
            return Ok(AddedJson(T::default()));
        }
        parse_json(&bytes).map(AddedJson)
    }
}

async fn read_body(req: Request, state: &AppState) -> Result<axum::body::Bytes, Problem> {
    require_json(req.headers())?;
    read_body_unchecked(req, state).await
}

/// Reads the body within the API's size and time limits, whatever its content type.
async fn read_body_unchecked(req: Request, state: &AppState) -> Result<axum::body::Bytes, Problem> {
    let limit = state.limits().max_body;
    read_body_within(req.into_body(), limit, state.limits().body_timeout)
        .await
        .map_err(|e| match e {
            BodyError::TimedOut(p) => p,
            BodyError::TooLarge => Problem::too_large(format!(
                "the request body is over the limit of {limit} bytes (api.max_body)"
            )),
        })
}

/// Why a body could not be read.
pub enum BodyError {
    /// Over the size limit, or the connection broke off while sending it.
    TooLarge,
    /// Not all of it arrived within `api.body_timeout`: the 408 to answer.
    TimedOut(Problem),
}

/// Reads a whole body of at most `limit` bytes, within `timeout`. A client that announces a
/// `Content-Length` and sends less would otherwise hold its connection (and a file
/// descriptor) for as long as it likes.
pub async fn read_body_within(
    body: axum::body::Body,
    limit: usize,
    timeout: Duration,
) -> Result<axum::body::Bytes, BodyError> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(BodyError::TooLarge),
        Err(_) => Err(BodyError::TimedOut(Problem::new(
            StatusCode::REQUEST_TIMEOUT,
            "body-timeout",
            format!(
                "the request body did not arrive within {} (api.body_timeout)",
                backstop_core::duration::format_duration(timeout)
            ),
        ))),
    }
}

/// A JSON body must say so: `text/plain`, form types or no content type at all are what a
/// browser sends cross-origin without asking first (a "simple request"), so accepting them
/// would let any web page on the machine write into an open loopback API. A 415 before the
/// body is read; `application/json` (any parameters) and `application/*+json` are JSON.
fn require_json(headers: &HeaderMap) -> Result<(), Problem> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let essence = given.as_deref().map(|v| {
        v.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    let json = essence.as_deref().is_some_and(|m| {
        m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
    });
    if json {
        return Ok(());
    }
    let what = match &given {
        Some(v) => format!("Content-Type {v:?}"),
        None => "no Content-Type".to_string(),
    };
    Err(Problem::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
        format!(
            "this endpoint takes JSON, and the request has {what}: send Content-Type: application/json (an empty body where the body is optional)"
        ),
    ))
}

/// Malformed JSON is a 400; well-formed JSON of the wrong shape is a 422 naming the field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    // Every request body is an object; serde would also fill a struct from an array
    // (`[null]` read as `{}`), which the documented schema does not allow.
    if bytes.trim_ascii_start().first() == Some(&b'[') {
        return Err(Problem::invalid(
            "the JSON body must be an object, not an array",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| json_problem(&e.path().to_string(), e.inner()))?;
    de.end().map_err(|e| json_problem(".", &e))?;
    Ok(v)
}

fn json_problem(path: &str, e: &serde_json::Error) -> Problem {
    use serde_json::error::Category;
    let at = if path == "." {
        String::new()
    } else {
        format!("{path}: ")
    };
    match e.classify() {
        Category::Data => Problem::invalid(format!("the JSON body does not fit: {at}{e}")),
        Category::Syntax | Category::Eof | Category::Io => {
            Problem::bad_request(format!("the body is not valid JSON: {e}"))
        }
    }
}

/// Query-string parameters.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let q = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(q)
            .map(ApiQuery)
            .map_err(|e| Problem::invalid(format!("bad query parameters: {e}")))
    }
}

/// Path parameters.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, s: &S) -> Result<Self, Problem> {
        Path::<T>::from_request_parts(parts, s)
            .await
            .map(|Path(t)| ApiPath(t))
            .map_err(|e| Problem::bad_request(format!("bad path: {}", e.body_text())))
    }
}
