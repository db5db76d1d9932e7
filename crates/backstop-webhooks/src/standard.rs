//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`.

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::fmt;
use subtle::ConstantTimeEq;

/// The prefix Standard Webhooks puts before a base64 secret. Required: a secret without it
/// is most likely a raw shared string that the receiver uses as is, and decoding it as base64
/// would sign every delivery with other key bytes than the receiver's.
const SECRET_PREFIX: &str = "whsec_";

/// Why a webhook secret could not be used.
///
/// The messages never quote the secret itself.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    /// The secret lacks the `whsec_` prefix of the Standard Webhooks form.
    #[error(
        "webhook secret does not start with `whsec_`: a Standard Webhooks secret is `whsec_` followed by base64 key bytes (e.g. `whsec_` + the output of `openssl rand -base64 32`), the same string the receiver's library is given"
    )]
    MissingPrefix,
    /// The secret decodes to no key bytes at all.
    #[error("webhook secret is empty: expected `whsec_` followed by base64 key bytes")]
    Empty,
    /// The part after `whsec_` is not standard base64.
    #[error("webhook secret is not valid base64 after the `whsec_` prefix")]
    InvalidBase64,
}

/// Why an inbound webhook was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A required header was absent; carries the header's name.
    #[error("missing the {0} header")]
    MissingHeader(&'static str),
    /// `webhook-timestamp` is not an integer number of seconds.
    #[error("the webhook-timestamp header is not an integer")]
    InvalidTimestamp,
    /// The timestamp is further from now than the tolerance allows (replay protection).
    #[error(
        "the webhook timestamp is {skew_secs} s from now, beyond the {tolerance_secs} s tolerance"
    )]
    TimestampOutOfTolerance {
        /// Absolute distance between the timestamp and now, in seconds.
        skew_secs: u64,
        /// The tolerance that was exceeded, in seconds.
        tolerance_secs: i64,
    },
    /// No `v1` entry of `webhook-signature` matched the body.
    #[error("no webhook signature matched")]
    NoMatchingSignature,
}

/// A Standard Webhooks signer and verifier holding one HMAC key.
#[derive(Clone)]
pub struct StandardWebhooks {
    key: hmac::Key,
}

// Written by hand so the key can never reach a log through `{:?}`.
impl fmt::Debug for StandardWebhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StandardWebhooks")
            .field("key", &"<redacted>")
            .finish()
    }
}

impl StandardWebhooks {
    /// Builds a signer from `whsec_<base64>`; anything else is refused.
    pub fn from_secret(secret: &str) -> Result<Self, SecretError> {
        let encoded = secret
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| SecretError::InvalidBase64)?;
        if key.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(StandardWebhooks {
            key: hmac::Key::new(hmac::HMAC_SHA256, &key),
        })
    }

    /// Signs a message: returns the `webhook-signature` value `v1,<base64>`.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let tag = self.tag(msg_id, &timestamp.to_string(), body);
        format!("v1,{}", STANDARD.encode(tag.as_ref()))
    }

    /// Verifies an inbound message from its three headers and its exact body bytes.
    ///
    /// Accepts when the timestamp is within `tolerance_secs` of `now_unix` (inclusive) and any
    /// `v1` entry of the space-separated `signature_header` matches; other versions are ignored.
    pub fn verify(
        &self,
        msg_id: Option<&str>,
        timestamp: Option<&str>,
        signature_header: Option<&str>,
        body: &[u8],
        now_unix: i64,
        tolerance_secs: i64,
    ) -> Result<(), VerifyError> {
        let msg_id = msg_id.ok_or(VerifyError::MissingHeader("webhook-id"))?;
        let timestamp = timestamp.ok_or(VerifyError::MissingHeader("webhook-timestamp"))?;
        let header = signature_header.ok_or(VerifyError::MissingHeader("webhook-signature"))?;

        let ts: i64 = timestamp
            .parse()
            .map_err(|_| VerifyError::InvalidTimestamp)?;
        let skew_secs = now_unix.abs_diff(ts);
        if skew_secs > tolerance_secs.max(0).unsigned_abs() {
            return Err(VerifyError::TimestampOutOfTolerance {
                skew_secs,
                tolerance_secs,
            });
        }

        // Sign the timestamp exactly as received: that string is what the sender signed.
        let expected = self.tag(msg_id, timestamp, body);
        let matched = header
            .split_ascii_whitespace()
            .filter_map(|entry| entry.split_once(','))
            .filter(|(version, _)| *version == "v1")
            .filter_map(|(_, sig)| STANDARD.decode(sig).ok())
            .any(|candidate| tags_equal(expected.as_ref(), &candidate));
        if matched {
            Ok(())
        } else {
            Err(VerifyError::NoMatchingSignature)
        }
    }

    /// HMAC-SHA256 over `{msg_id}.{timestamp}.` followed by the raw body bytes.
    fn tag(&self, msg_id: &str, timestamp: &str, body: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(msg_id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.as_bytes());
        ctx.update(b".");
        ctx.update(body);
        ctx.sign()
    }
}

/// Constant-time comparison; a length mismatch is not secret (tags have a fixed length).
fn tags_equal(expected: &[u8], candidate: &[u8]) -> bool {
    expected.len() == candidate.len() && bool::from(expected.ct_eq(candidate))
}

#[cfg(test)]
#[path = "standard_tests.rs"]
mod tests;
