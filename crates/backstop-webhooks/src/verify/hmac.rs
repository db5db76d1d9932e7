//! `hmac-sha256`: a generic HMAC-SHA256 of the raw body in one header.
//!
//! The header (default `X-Signature`, configurable) holds the 32-byte tag as hex (64
//! characters, either case) or as base64 (standard or URL-safe alphabet, padding optional),
//! optionally after a `sha256=` prefix — so GitHub's `X-Hub-Signature-256: sha256=<hex>` and
//! Shopify's `X-Shopify-Hmac-Sha256: <base64>` both fit. The key is the secret string's UTF-8
//! bytes. The scheme signs no timestamp, so it has no replay window: replays are absorbed by
//! the ledger's uniqueness on the event id (configure a key locator).

use super::hex::{decode_hex, tags_equal};
use super::{Checked, ConfigError, InboundRequest, Rejection, Scheme};
use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use http::HeaderName;

/// Length of an HMAC-SHA256 tag.
const TAG_LEN: usize = 32;

pub(super) struct Hmac {
    keys: Vec<hmac::Key>,
    header: HeaderName,
    /// The header as configured, for messages (`HeaderName` is lower-case).
    header_label: String,
}

impl Hmac {
    pub(super) fn new(secrets: &[String], header: &str) -> Result<Self, ConfigError> {
        let name = HeaderName::from_bytes(header.as_bytes())
            .map_err(|_| ConfigError::InvalidHeaderName(header.to_string()))?;
        Ok(Hmac {
            keys: keys(secrets, Scheme::HmacSha256, "shared secret in `keys`")?,
            header: name,
            header_label: header.to_string(),
        })
    }

    pub(super) fn verify(&self, request: &InboundRequest<'_>) -> Result<Checked, Rejection> {
        let value = match request.headers.get(&self.header) {
            None => return Err(Rejection::MissingHeader(self.header_label.clone())),
            Some(value) => value.to_str().map_err(|_| Rejection::MalformedHeader {
                header: self.header_label.clone(),
                reason: "not visible ASCII",
            })?,
        };
        let candidate = decode_tag(value).ok_or_else(|| Rejection::MalformedHeader {
            header: self.header_label.clone(),
            reason: "expected a hex or base64 HMAC-SHA256, optionally after `sha256=`",
        })?;
        let matched = self.keys.iter().any(|key| {
            let expected = hmac::sign(key, request.body);
            tags_equal(expected.as_ref(), &candidate)
        });
        if !matched {
            return Err(Rejection::NoMatchingSignature);
        }
        Ok(Checked {
            payload: request.body.to_vec(),
            event_id: None,
        })
    }
}

/// The 32 tag bytes from `[sha256=]<hex or base64>`, or `None`.
fn decode_tag(value: &str) -> Option<Vec<u8>> {
    let value = value.trim();
    let value = match value.get(..7) {
        Some(prefix) if prefix.eq_ignore_ascii_case("sha256=") => &value[7..],
        _ => value,
    };
    let tag = if value.len() == 2 * TAG_LEN {
        decode_hex(value)?
    } else {
        [STANDARD, URL_SAFE, STANDARD_NO_PAD, URL_SAFE_NO_PAD]
            .iter()
            .find_map(|engine| engine.decode(value).ok())?
    };
    (tag.len() == TAG_LEN).then_some(tag)
}

/// HMAC-SHA256 keys from secret strings used as they are (Stripe, generic HMAC).
pub(super) fn keys(
    secrets: &[String],
    scheme: Scheme,
    what: &'static str,
) -> Result<Vec<hmac::Key>, ConfigError> {
    if secrets.is_empty() {
        return Err(ConfigError::NoKeys { scheme, what });
    }
    secrets
        .iter()
        .enumerate()
        .map(|(index, secret)| {
            if secret.is_empty() {
                Err(ConfigError::EmptyKey { index })
            } else {
                Ok(hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_formats() {
        let hex = "a".repeat(64);
        assert_eq!(decode_tag(&hex), Some(vec![0xaa; 32]));
        assert_eq!(decode_tag(&format!("sha256={hex}")), Some(vec![0xaa; 32]));
        assert_eq!(decode_tag(&format!("SHA256={hex}")), Some(vec![0xaa; 32]));
        let b64 = STANDARD.encode([0xfb; 32]);
        assert_eq!(decode_tag(&b64), Some(vec![0xfb; 32]));
        assert_eq!(
            decode_tag(&URL_SAFE_NO_PAD.encode([0xfb; 32])),
            Some(vec![0xfb; 32])
        );
        assert_eq!(decode_tag(&STANDARD.encode([1; 31])), None);
        assert_eq!(decode_tag("sha256="), None);
        assert_eq!(decode_tag("é"), None);
    }
}
