//! Why a callback was rejected, and why a configuration cannot verify anything.

use super::Scheme;
use http::StatusCode;
use std::path::PathBuf;

/// Why an inbound callback was rejected. The message is safe to send back to the caller: it
/// never quotes a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// A header the scheme requires is absent; carries its name.
    #[error("missing the {0} header")]
    MissingHeader(String),
    /// A header is present but cannot be read (not visible ASCII, or not in the scheme's
    /// format).
    #[error("the {header} header is malformed: {reason}")]
    MalformedHeader {
        /// The header's name.
        header: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The signed timestamp is not an integer number of seconds.
    #[error("the timestamp in {header} is not a Unix time in seconds")]
    BadTimestamp {
        /// Where the timestamp was read from.
        header: &'static str,
    },
    /// The signed timestamp is too far from now (replay protection).
    #[error(
        "the signed timestamp is {skew_secs} s from now, outside the {tolerance_secs} s tolerance"
    )]
    OutsideTolerance {
        /// Absolute distance between the timestamp and now, in seconds.
        skew_secs: u64,
        /// The configured tolerance, in seconds.
        tolerance_secs: u64,
    },
    /// No signature matched the body under any configured key.
    #[error("no signature matched the request")]
    NoMatchingSignature,
    /// WeChat Pay: `Wechatpay-Serial` names no configured platform certificate or public key.
    #[error("no platform certificate or public key is configured for serial `{0}`")]
    UnknownSerial(String),
    /// The request names a signature or encryption algorithm this scheme does not support.
    #[error("unsupported algorithm `{0}`")]
    UnsupportedAlgorithm(String),
    /// The body is not in the scheme's format (after the signature checked out, or before it
    /// could be checked for a form body).
    #[error("malformed body: {0}")]
    MalformedBody(String),
    /// Alipay: a form field the scheme needs is absent.
    #[error("missing the form field `{0}`")]
    MissingField(&'static str),
    /// WeChat Pay: no configured APIv3 key decrypts `resource` (wrong key, or tampered data).
    #[error("the resource could not be decrypted with any configured APIv3 key")]
    DecryptFailed,
    /// The configured key locator found no event id in the verified request.
    #[error("no event id at `{locator}`")]
    MissingEventId {
        /// The locator, as configured.
        locator: String,
    },
}

impl Rejection {
    /// The HTTP status to answer with: 400 when the request is not in the scheme's format,
    /// 401 when it does not authenticate.
    pub fn status(&self) -> StatusCode {
        match self {
            Rejection::MalformedBody(_)
            | Rejection::MissingField(_)
            | Rejection::MissingEventId { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNAUTHORIZED,
        }
    }
}

/// Why a [`Verifier`](super::Verifier) could not be built. Messages never quote a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The scheme needs at least one key and none was configured.
    #[error("scheme {scheme} needs at least one {what}")]
    NoKeys {
        /// The scheme.
        scheme: Scheme,
        /// What kind of key is missing.
        what: &'static str,
    },
    /// `keys[index]` is empty.
    #[error("keys[{index}] is empty")]
    EmptyKey {
        /// Position in `keys`.
        index: usize,
    },
    /// `keys[index]` is not a Standard Webhooks secret.
    #[error("keys[{index}]: {source}")]
    Secret {
        /// Position in `keys`.
        index: usize,
        /// What is wrong with it.
        source: crate::SecretError,
    },
    /// `keys[index]` is not a 16- or 32-byte WeChat Pay APIv3 key.
    #[error(
        "keys[{index}] is {len} bytes: a WeChat Pay APIv3 key is 32 bytes (AES-256-GCM) or 16 \
         (AES-128-GCM)"
    )]
    ApiV3KeyLength {
        /// Position in `keys`.
        index: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// A key file could not be read.
    #[error("cannot read key file {path}: {source}")]
    ReadKeyFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A key file or inline key holds nothing usable, or something unusable.
    #[error("key {key}: {reason}")]
    BadKey {
        /// The file's path, or `keys[i]` / `inline PEM` for keys given inline.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two WeChat Pay platform keys have the same serial or id.
    #[error("two platform keys have the serial `{0}`")]
    DuplicateSerial(String),
    /// The configured signature header is not a valid header name.
    #[error("`{0}` is not a valid header name")]
    InvalidHeaderName(String),
    /// The key locator cannot apply to this scheme's body (e.g. `form:` on a JSON scheme).
    #[error("key locator `{locator}` does not apply to scheme {scheme}")]
    LocatorNotApplicable {
        /// The locator, as configured.
        locator: String,
        /// The scheme.
        scheme: Scheme,
    },
    /// An option was set that the scheme does not use (a likely mistake in the configuration).
    #[error("scheme {scheme} does not use `{option}`")]
    UnusedOption {
        /// The option's name.
        option: &'static str,
        /// The scheme.
        scheme: Scheme,
    },
}
