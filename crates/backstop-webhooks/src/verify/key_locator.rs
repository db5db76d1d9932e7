//! Where the provider's event id is: `"/json/pointer"`, `"header:NAME"` or `"form:FIELD"`.

use http::{HeaderMap, HeaderName};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Where to find the provider's event id in a verified request; the id becomes the task's
/// business key, so the provider's resends of one event land on one task.
///
/// Parsed from configuration:
/// - `"/json/pointer"`: an RFC 6901 pointer into the verified payload (the body for the JSON
///   schemes; for `wechatpay-v3` the envelope with its decrypted `resource`, so `/id` is the
///   envelope's id and `/resource/out_trade_no` a field of the decrypted data; for
///   `alipay-rsa2` the JSON object of form fields). A string is taken as it is, a number in
///   its JSON form; anything else, or an empty string, is no id.
/// - `"header:NAME"`: a request header (e.g. `header:X-GitHub-Delivery`).
/// - `"form:FIELD"`: a field of a form-encoded body (`alipay-rsa2`, `hmac-sha256`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLocator {
    /// An RFC 6901 JSON pointer into the verified payload (starts with `/`).
    JsonPointer(String),
    /// A request header.
    Header(HeaderName),
    /// A field of a form-encoded body (the decoded field name).
    Form(String),
}

/// A key locator string that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key locator `{0}` is not one of \"/json/pointer\", \"header:NAME\", \"form:FIELD\"")]
pub struct KeyLocatorError(pub String);

impl FromStr for KeyLocator {
    type Err = KeyLocatorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let error = || KeyLocatorError(s.to_string());
        if s.starts_with('/') {
            Ok(KeyLocator::JsonPointer(s.to_string()))
        } else if let Some(name) = s.strip_prefix("header:") {
            HeaderName::from_bytes(name.trim().as_bytes())
                .map(KeyLocator::Header)
                .map_err(|_| error())
        } else if let Some(field) = s.strip_prefix("form:") {
            if field.is_empty() {
                Err(error())
            } else {
                Ok(KeyLocator::Form(field.to_string()))
            }
        } else {
            Err(error())
        }
    }
}

impl fmt::Display for KeyLocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyLocator::JsonPointer(pointer) => f.write_str(pointer),
            KeyLocator::Header(name) => write!(f, "header:{name}"),
            KeyLocator::Form(field) => write!(f, "form:{field}"),
        }
    }
}

impl KeyLocator {
    /// The event id in a verified request, or `None` when it is absent or empty.
    pub(super) fn locate(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        payload: &[u8],
    ) -> Option<String> {
        let id = match self {
            KeyLocator::JsonPointer(pointer) => json_id_at(payload, pointer),
            KeyLocator::Header(name) => headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string),
            KeyLocator::Form(field) => super::form::parse(body)
                .into_iter()
                .find(|(name, _)| name.as_slice() == field.as_bytes())
                .and_then(|(_, value)| String::from_utf8(value).ok()),
        }?;
        (!id.is_empty()).then_some(id)
    }
}

/// The string or number at `pointer` in a JSON document; a number exactly as written (its
/// digits, not a float's rounding of them: ids past 2^64 stay distinct). Broker bridges take
/// their `key = "/pointer"` with it too.
pub fn json_id_at(json: &[u8], pointer: &str) -> Option<String> {
    let document: &RawValue = serde_json::from_slice(json).ok()?;
    let raw = raw_at(document, pointer)?.get().trim();
    match raw.as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(raw).ok(),
        b'-' | b'0'..=b'9' => Some(raw.to_string()),
        _ => None,
    }
}

/// The value at an RFC 6901 `pointer`, walked through the document's raw text so that no
/// number is parsed on the way.
fn raw_at<'a>(document: &'a RawValue, pointer: &str) -> Option<&'a RawValue> {
    if pointer.is_empty() {
        return Some(document);
    }
    let mut here = document;
    for token in pointer.strip_prefix('/')?.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        here = match here.get().trim_start().as_bytes().first()? {
            b'{' => {
                let object: BTreeMap<String, &RawValue> = serde_json::from_str(here.get()).ok()?;
                *object.get(&token)?
            }
            b'[' => {
                // RFC 6901: an index is `0` or digits without a leading zero.
                if token.is_empty() || (token.len() > 1 && token.starts_with('0')) {
                    return None;
                }
                let index: usize = token.parse().ok()?;
                let array: Vec<&RawValue> = serde_json::from_str(here.get()).ok()?;
                *array.get(index)?
            }
            _ => return None,
        };
    }
    Some(here)
}

/// The non-empty string at `pointer` in a JSON document (a scheme's default event id).
pub(super) fn json_string_at(json: &[u8], pointer: &str) -> Option<String> {
    let document: serde_json::Value = serde_json::from_slice(json).ok()?;
    match document.pointer(pointer)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays() {
        for text in [
            "/id",
            "/resource/out_trade_no",
            "header:x-request-id",
            "form:notify_id",
        ] {
            let locator: KeyLocator = text.parse().unwrap();
            assert_eq!(locator.to_string(), text);
        }
        assert_eq!(
            "header:X-GitHub-Delivery".parse::<KeyLocator>().unwrap(),
            KeyLocator::Header(HeaderName::from_static("x-github-delivery"))
        );
        for bad in [
            "",
            "id",
            "header:",
            "header:bad header",
            "form:",
            "json:/id",
        ] {
            assert_eq!(
                bad.parse::<KeyLocator>(),
                Err(KeyLocatorError(bad.to_string())),
                "{bad}"
            );
        }
    }

    #[test]
    fn locates_ids() {
        let mut headers = HeaderMap::new();
        headers.insert("x-id", "h-1".parse().unwrap());
        let body = b"a=1&notify_id=n%2D1";
        let payload = br#"{"id":"evt_1","n":42,"o":{},"e":"","deep":{"k":"v"}}"#;
        let locate = |s: &str| {
            s.parse::<KeyLocator>()
                .unwrap()
                .locate(&headers, body, payload)
        };
        assert_eq!(locate("/id").as_deref(), Some("evt_1"));
        assert_eq!(locate("/n").as_deref(), Some("42"));
        assert_eq!(locate("/deep/k").as_deref(), Some("v"));
        assert_eq!(locate("/o"), None);
        assert_eq!(locate("/e"), None);
        assert_eq!(locate("/missing"), None);
        assert_eq!(locate("header:X-Id").as_deref(), Some("h-1"));
        assert_eq!(locate("header:x-other"), None);
        assert_eq!(locate("form:notify_id").as_deref(), Some("n-1"));
        assert_eq!(locate("form:b"), None);
    }

    #[test]
    fn a_number_is_taken_digit_for_digit() {
        // Order ids past 2^64 (and past 2^53, where JavaScript already rounds) must keep
        // every digit: two orders whose ids round alike would share one task.
        let payload = br#"{"big":123456789012345678901234567890,"neg":-9223372036854775809,"f":1.50,"a":[{"id":18446744073709551617}]}"#;
        let at = |p: &str| json_id_at(payload, p);
        assert_eq!(
            at("/big").as_deref(),
            Some("123456789012345678901234567890")
        );
        assert_eq!(at("/neg").as_deref(), Some("-9223372036854775809"));
        assert_eq!(at("/f").as_deref(), Some("1.50"));
        assert_eq!(at("/a/0/id").as_deref(), Some("18446744073709551617"));
        assert_eq!(at("/a/00/id"), None, "no leading zeros in an index");
        let escaped = br#"{"a/b":{"~k":"x"}}"#;
        assert_eq!(json_id_at(escaped, "/a~1b/~0k").as_deref(), Some("x"));
    }
}
