//! Reading the request's headers for a scheme, and quoting what the caller sent in a rejection.

use super::Rejection;
use http::HeaderMap;

/// The header's first value as text; `Ok(None)` when absent, a rejection when it is not
/// visible ASCII.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Rejection> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(Some)
            .map_err(|_| Rejection::MalformedHeader {
                header: name.to_string(),
                reason: "not visible ASCII",
            }),
    }
}

/// The header's first value as text; a missing header is a rejection that names it.
pub(super) fn required_header<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<&'a str, Rejection> {
    header(headers, name)?.ok_or_else(|| Rejection::MissingHeader(name.to_string()))
}

/// At most 64 characters of a value the caller sent, for a rejection message (which may be
/// logged and is sent back).
pub(super) fn clip(value: &str) -> String {
    value.chars().take(64).collect()
}
