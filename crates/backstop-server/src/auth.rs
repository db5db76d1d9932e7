//! Bearer tokens: configured by name with the SHA-256 of the secret, compared in constant
//! time. Required when the API listens beyond loopback; optional on loopback when no token is
//! configured. The token's name is the actor recorded for manual actions.

use crate::problem::Problem;
use crate::state::AppState;
use aws_lc_rs::digest;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

/// One accepted token.
#[derive(Clone)]
pub struct ApiToken {
    /// Who the token belongs to; recorded on the timeline of manual actions.
    pub name: String,
    /// SHA-256 of the secret.
    pub sha256: [u8; 32],
}

// Written by hand so the hash never reaches a log line either.
impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ApiToken {
    /// A token from the secret itself (tests, and `backstop token`).
    pub fn from_secret(name: impl Into<String>, secret: &str) -> Self {
        ApiToken {
            name: name.into(),
            sha256: sha256(secret.as_bytes()),
        }
    }
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = digest::digest(&digest::SHA256, bytes);
    d.as_ref().try_into().expect("32 bytes")
}

/// Who made a request: a token's name, or `api` when no token is configured.
#[derive(Clone, Debug)]
pub struct Actor(pub String);

/// Finds the token a presented secret matches. Every configured token is compared, so the
/// time taken does not say which one (or whether any) matched.
pub fn matching<'a>(tokens: &'a [ApiToken], presented: &str) -> Option<&'a ApiToken> {
    let h = sha256(presented.as_bytes());
    let mut found = None;
    for t in tokens {
        if bool::from(t.sha256.ct_eq(&h)) {
            found = Some(t);
        }
    }
    found
}

/// Middleware: rejects requests without a valid token when tokens are configured, and adds
/// the [`Actor`] to every request.
pub async fn require(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let tokens = state.tokens();
    let actor = if tokens.is_empty() {
        Actor("api".into())
    } else {
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            });
        let Some(presented) = presented else {
            return Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this API needs `Authorization: Bearer <token>` with a token from [[api.tokens]]",
            )
            .into_response();
        };
        match matching(tokens, presented.trim()) {
            Some(t) => Actor(t.name.clone()),
            None => {
                return Problem::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "the bearer token is not one of the configured [[api.tokens]]",
                )
                .into_response();
            }
        }
    };
    req.extensions_mut().insert(actor);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_secret_matches_and_names_its_token() {
        let tokens = vec![
            ApiToken::from_secret("ops", "s3cret-ops"),
            ApiToken::from_secret("billing", "s3cret-billing"),
        ];
        assert_eq!(matching(&tokens, "s3cret-billing").unwrap().name, "billing");
        assert_eq!(matching(&tokens, "s3cret-ops").unwrap().name, "ops");
        assert!(matching(&tokens, "s3cret-op").is_none());
        assert!(matching(&tokens, "").is_none());
        assert!(!format!("{:?}", tokens[0]).contains("sha256"));
    }
}
