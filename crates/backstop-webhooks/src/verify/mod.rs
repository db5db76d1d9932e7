//! Verification of inbound provider callbacks (`POST /v1/hooks/{source}`).
//!
//! One [`Verifier`] per configured source, built once from a [`VerifierConfig`] (the keys are
//! decoded and the key files read at that point, so a bad configuration fails at start-up),
//! then shared by every request: [`Verifier::verify`] takes the raw request and answers
//! [`Verified`] (the payload to enqueue and the provider's event id) or a [`Rejection`] that
//! says why. [`Scheme::success_reply`] and [`Scheme::rejection_reply`] give the answer each
//! provider expects.
//!
//! | scheme (config name) | signature | timestamp window | event id by default |
//! |---|---|---|---|
//! | `standard-webhooks` | `webhook-signature: v1,<base64 HMAC-SHA256>` over `{id}.{ts}.{body}`, key = base64 after `whsec_` | `abs(now − ts) ≤ tolerance` | `webhook-id` header |
//! | `stripe` | `Stripe-Signature: t=…,v1=<hex HMAC-SHA256>` over `{t}.{body}`, key = the secret string's bytes | `abs(now − t) ≤ tolerance` | body `/id` |
//! | `hmac-sha256` | hex or base64 HMAC-SHA256 of the body in one header (default `X-Signature`), optional `sha256=` prefix, key = the secret string's bytes | none | none |
//! | `wechatpay-v3` | `Wechatpay-Signature`: base64 SHA256withRSA over `{ts}\n{nonce}\n{body}\n`, key picked by `Wechatpay-Serial`; `resource` decrypted with the APIv3 key | `abs(now − ts) < tolerance` | envelope `id` |
//! | `alipay-rsa2` | form field `sign`: base64 SHA256withRSA over the sorted, decoded `k=v` pairs without `sign`/`sign_type` | none (Alipay resends for 25 h) | `notify_id` |
//!
//! Payloads: the exact body bytes for `standard-webhooks`, `stripe` and `hmac-sha256`; for
//! `wechatpay-v3` the envelope as JSON with `resource` replaced by the decrypted resource
//! (kept byte for byte when it is JSON); for `alipay-rsa2` a JSON object of the decoded form
//! fields without `sign` and `sign_type`.
//!
//! Replays inside the window are not detected here: the ledger's `(kind, key)` uniqueness on
//! the event id makes a replayed callback a no-op.

mod alipay;
mod error;
mod form;
mod headers;
mod hex;
mod hmac;
mod key_locator;
mod keys;
mod reply;
mod standard;
mod stripe;
mod timestamps;
mod wechatpay;

pub use alipay::alipay_sign_content;
pub use error::{ConfigError, Rejection};
pub use key_locator::{KeyLocator, KeyLocatorError, json_id_at};
pub use keys::{KeyFile, KeySource};
pub use reply::Reply;
pub use wechatpay::decrypt_resource as wechatpay_decrypt_resource;

use http::HeaderMap;
use jiff::Timestamp;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The tolerance used when a configuration does not set one: 300 s, the value Standard
/// Webhooks, Stripe and WeChat Pay all document.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The header the `hmac-sha256` scheme reads when none is configured.
pub const DEFAULT_HMAC_HEADER: &str = "X-Signature";

/// A callback verification scheme, named in configuration by its [`Scheme::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `standard-webhooks`: Standard Webhooks (`webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`), secrets `whsec_<base64>`.
    StandardWebhooks,
    /// `stripe`: the `Stripe-Signature` header, secrets `whsec_…` used as they are.
    Stripe,
    /// `hmac-sha256`: a generic HMAC-SHA256 of the raw body in one header (GitHub's
    /// `X-Hub-Signature-256: sha256=<hex>`, Shopify's `X-Shopify-Hmac-Sha256: <base64>`, …).
    HmacSha256,
    /// `wechatpay-v3`: WeChat Pay API v3 notifications (RSA signature, AES-GCM resource).
    WechatpayV3,
    /// `alipay-rsa2`: Alipay asynchronous notifications (form body, RSA2 `sign`).
    AlipayRsa2,
}

impl Scheme {
    /// Every scheme, in the order of the documentation.
    pub const ALL: [Scheme; 5] = [
        Scheme::StandardWebhooks,
        Scheme::Stripe,
        Scheme::HmacSha256,
        Scheme::WechatpayV3,
        Scheme::AlipayRsa2,
    ];

    /// The configuration name: `standard-webhooks`, `stripe`, `hmac-sha256`, `wechatpay-v3` or
    /// `alipay-rsa2`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standard-webhooks",
            Scheme::Stripe => "stripe",
            Scheme::HmacSha256 => "hmac-sha256",
            Scheme::WechatpayV3 => "wechatpay-v3",
            Scheme::AlipayRsa2 => "alipay-rsa2",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name that is not one of [`Scheme::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown callback scheme `{0}`: expected one of standard-webhooks, stripe, hmac-sha256, \
     wechatpay-v3, alipay-rsa2"
)]
pub struct UnknownScheme(pub String);

impl FromStr for Scheme {
    type Err = UnknownScheme;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.name() == s)
            .ok_or_else(|| UnknownScheme(s.to_string()))
    }
}

/// What a [`Verifier`] is built from: one inbound source's configuration.
///
/// What `keys` and `key_files` hold depends on the scheme:
///
/// | scheme | `keys` (several during rotation; any one may match) | `key_files` |
/// |---|---|---|
/// | `standard-webhooks` | `whsec_<base64>` secrets | — |
/// | `stripe` | endpoint secrets `whsec_…` | — |
/// | `hmac-sha256` | shared secrets (their UTF-8 bytes are the HMAC key) | — |
/// | `wechatpay-v3` | APIv3 keys (16 or 32 bytes: AES-128- or AES-256-GCM) | platform certificates (serial read from the certificate) or platform public keys (`PUB_KEY_ID_…=path`) |
/// | `alipay-rsa2` | Alipay public keys pasted inline (PEM or the console's bare base64) | Alipay public key (`PUBLIC KEY` PEM, bare base64) or Alipay public-key certificate |
#[derive(Clone)]
pub struct VerifierConfig {
    /// The scheme.
    pub scheme: Scheme,
    /// Secrets (or, for Alipay, inline public keys); see the table above.
    pub keys: Vec<String>,
    /// PEM files of the provider's public keys or certificates; see the table above.
    pub key_files: Vec<KeyFile>,
    /// How far a signed timestamp may be from now (whole seconds; sub-second parts are
    /// ignored). Unused by the schemes without a timestamp.
    pub tolerance: Duration,
    /// Where the provider's event id is; `None` uses the scheme's own (see the module docs).
    pub key_locator: Option<KeyLocator>,
    /// `hmac-sha256` only: the header carrying the signature (default [`DEFAULT_HMAC_HEADER`]).
    pub signature_header: Option<String>,
}

impl VerifierConfig {
    /// A configuration for `scheme` with no keys, the default tolerance, the scheme's own
    /// event id and the default signature header.
    pub fn new(scheme: Scheme) -> Self {
        VerifierConfig {
            scheme,
            keys: Vec::new(),
            key_files: Vec::new(),
            tolerance: DEFAULT_TOLERANCE,
            key_locator: None,
            signature_header: None,
        }
    }
}

// Written by hand so secrets never reach a log through `{:?}`.
impl fmt::Debug for VerifierConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifierConfig")
            .field("scheme", &self.scheme)
            .field("keys", &format_args!("<{} redacted>", self.keys.len()))
            .field("key_files", &self.key_files)
            .field("tolerance", &self.tolerance)
            .field("key_locator", &self.key_locator)
            .field("signature_header", &self.signature_header)
            .finish()
    }
}

/// One inbound request as the HTTP layer received it.
#[derive(Debug, Clone, Copy)]
pub struct InboundRequest<'a> {
    /// The request headers.
    pub headers: &'a HeaderMap,
    /// The exact body bytes (never re-serialised: that breaks signatures).
    pub body: &'a [u8],
    /// The current time, compared with the signed timestamp.
    pub now: Timestamp,
}

/// A callback whose signature checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The business payload to enqueue (see the module docs for each scheme's shape).
    pub payload: Vec<u8>,
    /// The provider's event id: from the configured [`KeyLocator`], else the scheme's own
    /// (`None` when the scheme defines none or the request carries none).
    pub event_id: Option<String>,
}

/// What a scheme's check hands back before the key locator runs.
struct Checked {
    payload: Vec<u8>,
    event_id: Option<String>,
}

/// Verifies one source's callbacks. Build it once with [`Verifier::new`]; it is `Send + Sync`.
pub struct Verifier {
    scheme: Scheme,
    check: Check,
    key_locator: Option<KeyLocator>,
}

enum Check {
    Standard(standard::Standard),
    Stripe(stripe::Stripe),
    Hmac(hmac::Hmac),
    Wechatpay(wechatpay::Wechatpay),
    Alipay(alipay::Alipay),
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("scheme", &self.scheme)
            .field("keys", &"<redacted>")
            .field("key_locator", &self.key_locator)
            .finish()
    }
}

impl Verifier {
    /// Decodes the keys and reads the key files of `config`.
    ///
    /// Fails on anything that could never verify a callback: no key, an empty or malformed
    /// secret, an APIv3 key of the wrong length, an unreadable or unparsable key file, a
    /// WeChat public key without an id, an option the scheme does not use.
    pub fn new(config: &VerifierConfig) -> Result<Self, ConfigError> {
        let scheme = config.scheme;
        let tolerance = config.tolerance.as_secs();
        if config.signature_header.is_some() && scheme != Scheme::HmacSha256 {
            return Err(ConfigError::UnusedOption {
                option: "signature_header",
                scheme,
            });
        }
        if let Some(locator) = &config.key_locator
            && matches!(locator, KeyLocator::Form(_))
            && !matches!(scheme, Scheme::AlipayRsa2 | Scheme::HmacSha256)
        {
            return Err(ConfigError::LocatorNotApplicable {
                locator: locator.to_string(),
                scheme,
            });
        }
        let check = match scheme {
            Scheme::StandardWebhooks => {
                no_key_files(config)?;
                Check::Standard(standard::Standard::new(&config.keys, tolerance)?)
            }
            Scheme::Stripe => {
                no_key_files(config)?;
                Check::Stripe(stripe::Stripe::new(&config.keys, tolerance)?)
            }
            Scheme::HmacSha256 => {
                no_key_files(config)?;
                let header = config
                    .signature_header
                    .as_deref()
                    .unwrap_or(DEFAULT_HMAC_HEADER);
                Check::Hmac(hmac::Hmac::new(&config.keys, header)?)
            }
            Scheme::WechatpayV3 => Check::Wechatpay(wechatpay::Wechatpay::new(
                &config.keys,
                &config.key_files,
                tolerance,
            )?),
            Scheme::AlipayRsa2 => {
                Check::Alipay(alipay::Alipay::new(&config.keys, &config.key_files)?)
            }
        };
        Ok(Verifier {
            scheme,
            check,
            key_locator: config.key_locator.clone(),
        })
    }

    /// The scheme this verifier checks.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Checks one request: headers, timestamp window, signature, then (WeChat) decryption and
    /// the event id. Nothing in the body is parsed before its signature has been checked.
    pub fn verify(&self, request: &InboundRequest<'_>) -> Result<Verified, Rejection> {
        let checked = match &self.check {
            Check::Standard(s) => s.verify(request)?,
            Check::Stripe(s) => s.verify(request)?,
            Check::Hmac(s) => s.verify(request)?,
            Check::Wechatpay(s) => s.verify(request)?,
            Check::Alipay(s) => s.verify(request)?,
        };
        let event_id = match &self.key_locator {
            None => checked.event_id,
            Some(locator) => Some(
                locator
                    .locate(request.headers, request.body, &checked.payload)
                    .ok_or_else(|| Rejection::MissingEventId {
                        locator: locator.to_string(),
                    })?,
            ),
        };
        Ok(Verified {
            payload: checked.payload,
            event_id,
        })
    }

    /// The reply that tells the provider the callback was taken: see
    /// [`Scheme::success_reply`].
    pub fn success_reply(&self) -> Reply {
        self.scheme.success_reply()
    }

    /// The reply for a rejected callback: see [`Scheme::rejection_reply`].
    pub fn rejection_reply(&self, rejection: &Rejection) -> Reply {
        self.scheme.rejection_reply(rejection)
    }
}

/// The HMAC schemes take secrets only.
fn no_key_files(config: &VerifierConfig) -> Result<(), ConfigError> {
    if config.key_files.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::UnusedOption {
            option: "key_files",
            scheme: config.scheme,
        })
    }
}
