//! RFC 9457 problem details: every error the API returns, with a `detail` that says what to
//! fix.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use backstop_core::StoreError;
use backstop_core::validate::InvalidInput;
use backstop_engine::{EnqueueError, PullError, TransitionError};
use serde::Serialize;
use utoipa::ToSchema;

/// An error response (`application/problem+json`). Branch on `type`:
/// `urn:backstop:problem:` + `bad-request` (unreadable body), `invalid` (a field is wrong),
/// `unauthorized`, `not-found`, `unknown-kind`, `unknown-machine`, `unknown-state` (not a
/// state of the machine), `conflict` (same kind and key, different payload; see
/// `existing_id`), `wrong-status` (the task is not in a status the action applies to),
/// `lease-lost` (stop working on the task; the outcome was not recorded),
/// `already-completed` (the attempt already ended with another outcome), `too-large`,
/// `unsupported-media-type` (a JSON body without `Content-Type: application/json`),
/// `body-timeout` (408: the body did not arrive within `api.body_timeout`),
/// `method-not-allowed`, `not-ready`, `ledger-unavailable` (503: the database is away, full
/// or read-only; nothing was written, send the same request again after `Retry-After`
/// seconds), `internal`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem (`urn:backstop:problem:<name>`).
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request, and how to fix it.
    pub detail: String,
    /// For conflicts: the id of the task that already holds the `(kind, key)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_id: Option<String>,
    /// For batches: the index of the item the problem is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
}

impl Problem {
    /// A problem of `status`, named `name`, explained by `detail`.
    pub fn new(status: StatusCode, name: &str, detail: impl Into<String>) -> Self {
        Problem {
            kind: format!("urn:backstop:problem:{name}"),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: detail.into(),
            existing_id: None,
            index: None,
        }
    }

    /// 400: the request could not be read.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, "bad-request", detail)
    }

    /// 422: the request was read but a field is wrong.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", detail)
    }

    /// 404.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not-found", detail)
    }

    /// 413.
    pub fn too_large(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", detail)
    }

    /// 503: the ledger cannot take the request now (see [`StoreError::Unavailable`]); sent
    /// with `Retry-After`.
    pub fn unavailable(error: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %error, "request refused: the ledger is unavailable");
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ledger-unavailable",
            format!("{error}; nothing was written, send the request again later"),
        )
    }

    /// 500: logged in full, described briefly.
    pub fn internal(error: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %error, "request failed");
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the ledger could not complete the request: {error}"),
        )
    }

    /// The same problem, about batch item `index`.
    pub fn at(mut self, index: usize) -> Self {
        self.detail = format!("tasks[{index}]: {}", self.detail);
        self.index = Some(index);
        self
    }
}

/// The `Retry-After` of every 503 (the ledger unavailable, not ready): about how long a
/// database takes to come back from a restart or a failover.
pub const RETRY_AFTER_SECS: u32 = 5;

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).expect("a problem serializes");
        let mut r = (status, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound(_) => Problem::not_found(e.to_string()),
            StoreError::WrongStatus { .. } => {
                Problem::new(StatusCode::CONFLICT, "wrong-status", e.to_string())
            }
            StoreError::Conflict { existing, .. } => {
                let mut p = Problem::new(StatusCode::CONFLICT, "conflict", e.to_string());
                p.existing_id = Some(existing.to_string());
                p
            }
            StoreError::Unavailable(_) => Problem::unavailable(&e.detail()),
            _ => Problem::internal(&e.detail()),
        }
    }
}

impl From<EnqueueError> for Problem {
    fn from(e: EnqueueError) -> Self {
        match e {
            EnqueueError::UnknownKind(..) => {
                Problem::new(StatusCode::NOT_FOUND, "unknown-kind", e.to_string())
            }
            EnqueueError::Invalid(InvalidInput::PayloadTooLarge { .. }) => {
                Problem::too_large(e.to_string())
            }
            EnqueueError::Invalid(_)
            | EnqueueError::ExpiresBeforeRun { .. }
            | EnqueueError::Group(_)
            | EnqueueError::LimitKey(_) => Problem::invalid(e.to_string()),
            EnqueueError::Conflict { existing, .. } => {
                let mut p = Problem::new(StatusCode::CONFLICT, "conflict", e.to_string());
                p.existing_id = Some(existing.to_string());
                p
            }
            EnqueueError::Item { index, error } => Problem::from(*error).at(index),
            EnqueueError::Store(s) => s.into(),
        }
    }
}

impl From<PullError> for Problem {
    fn from(e: PullError) -> Self {
        match e {
            PullError::UnknownKind(..) => {
                Problem::new(StatusCode::NOT_FOUND, "unknown-kind", e.to_string())
            }
            PullError::NotPull(_) | PullError::Invalid(_) => Problem::invalid(e.to_string()),
            PullError::BadToken(_) => Problem::not_found(format!("no such lease: {e}")),
            PullError::LeaseLost => Problem::new(StatusCode::CONFLICT, "lease-lost", e.to_string()),
            PullError::AlreadyCompleted { .. } => {
                Problem::new(StatusCode::CONFLICT, "already-completed", e.to_string())
            }
            PullError::Store(s) => s.into(),
        }
    }
}

impl From<TransitionError> for Problem {
    fn from(e: TransitionError) -> Self {
        match e {
            TransitionError::UnknownMachine(..) => {
                Problem::new(StatusCode::NOT_FOUND, "unknown-machine", e.to_string())
            }
            TransitionError::UnknownState { .. } => Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown-state",
                e.to_string(),
            ),
            TransitionError::Invalid(_) => Problem::invalid(e.to_string()),
            TransitionError::Store(s) => s.into(),
        }
    }
}
