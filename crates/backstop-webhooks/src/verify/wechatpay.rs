//! `wechatpay-v3`: WeChat Pay API v3 notifications.
//!
//! Signature: base64 SHA256withRSA (PKCS#1 v1.5) over
//! `{Wechatpay-Timestamp}\n{Wechatpay-Nonce}\n{body}\n`, verified with the platform key whose
//! serial (or public key id) is `Wechatpay-Serial`. Window: rejected when
//! `|now − timestamp| >= tolerance`, WeChat's own rule. Then `resource` is decrypted: AES-GCM
//! with the APIv3 key (AES-256 for a 32-byte key, AES-128 for 16), nonce = `resource.nonce`,
//! AAD = `resource.associated_data`, ciphertext = base64 with the 16-byte tag at its end.

use super::headers::{clip, header, required_header};
use super::keys::{self, PublicKey};
use super::timestamps::{parse_timestamp, skew};
use super::{Checked, ConfigError, InboundRequest, KeyFile, Rejection, Scheme};
use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

const TIMESTAMP: &str = "Wechatpay-Timestamp";
const NONCE: &str = "Wechatpay-Nonce";
const SIGNATURE: &str = "Wechatpay-Signature";
const SERIAL: &str = "Wechatpay-Serial";
const SIGNATURE_TYPE: &str = "Wechatpay-Signature-Type";
/// The only signature type read (the SM2 variant is not supported).
const RSA_SIGNATURE_TYPE: &str = "WECHATPAY2-SHA256-RSA2048";
/// The resource algorithm WeChat names; the key's length picks AES-128 or AES-256.
const RESOURCE_ALGORITHM: &str = "AEAD_AES_256_GCM";

pub(super) struct Wechatpay {
    platform: Vec<PublicKey>,
    apiv3_keys: Vec<LessSafeKey>,
    tolerance_secs: u64,
}

impl Wechatpay {
    pub(super) fn new(
        secrets: &[String],
        key_files: &[KeyFile],
        tolerance_secs: u64,
    ) -> Result<Self, ConfigError> {
        if secrets.is_empty() {
            return Err(ConfigError::NoKeys {
                scheme: Scheme::WechatpayV3,
                what: "APIv3 key in `keys`",
            });
        }
        let apiv3_keys = secrets
            .iter()
            .enumerate()
            .map(|(index, secret)| {
                aes_gcm_key(secret.as_bytes()).ok_or(ConfigError::ApiV3KeyLength {
                    index,
                    len: secret.len(),
                })
            })
            .collect::<Result<_, _>>()?;
        if key_files.is_empty() {
            return Err(ConfigError::NoKeys {
                scheme: Scheme::WechatpayV3,
                what: "platform certificate or platform public key in `key_files`",
            });
        }
        let mut platform: Vec<PublicKey> = Vec::new();
        for file in key_files {
            for key in keys::load(file)? {
                let Some(id) = &key.id else {
                    return Err(ConfigError::BadKey {
                        key: file.label(),
                        reason: "a platform public key needs its id (`PUB_KEY_ID_…=path`)"
                            .to_string(),
                    });
                };
                if platform.iter().any(|k| {
                    k.id.as_deref()
                        .is_some_and(|other| other.eq_ignore_ascii_case(id))
                }) {
                    return Err(ConfigError::DuplicateSerial(id.clone()));
                }
                platform.push(key);
            }
        }
        Ok(Wechatpay {
            platform,
            apiv3_keys,
            tolerance_secs,
        })
    }

    pub(super) fn verify(&self, request: &InboundRequest<'_>) -> Result<Checked, Rejection> {
        let headers = request.headers;
        let timestamp = required_header(headers, TIMESTAMP)?;
        let nonce = required_header(headers, NONCE)?;
        let signature = required_header(headers, SIGNATURE)?;
        let serial = required_header(headers, SERIAL)?;
        if let Some(kind) = header(headers, SIGNATURE_TYPE)?
            && kind != RSA_SIGNATURE_TYPE
        {
            return Err(Rejection::UnsupportedAlgorithm(clip(kind)));
        }

        let ts = parse_timestamp(timestamp, TIMESTAMP)?;
        let skew_secs = skew(request.now, ts);
        if skew_secs >= self.tolerance_secs {
            return Err(Rejection::OutsideTolerance {
                skew_secs,
                tolerance_secs: self.tolerance_secs,
            });
        }

        let key = self
            .platform
            .iter()
            .find(|k| {
                k.id.as_deref()
                    .is_some_and(|id| id.eq_ignore_ascii_case(serial))
            })
            .ok_or_else(|| Rejection::UnknownSerial(clip(serial)))?;
        // A probe (`WECHATPAY/SIGNTEST/…`) fails here like any other bad signature.
        let signature = STANDARD
            .decode(signature)
            .map_err(|_| Rejection::NoMatchingSignature)?;
        let mut message =
            Vec::with_capacity(timestamp.len() + nonce.len() + request.body.len() + 3);
        for part in [timestamp.as_bytes(), nonce.as_bytes(), request.body] {
            message.extend_from_slice(part);
            message.push(b'\n');
        }
        key.key
            .verify_sig(&message, &signature)
            .map_err(|_| Rejection::NoMatchingSignature)?;

        self.decrypt_envelope(request.body)
    }

    /// Decrypts the verified envelope's `resource` and builds the payload.
    fn decrypt_envelope(&self, body: &[u8]) -> Result<Checked, Rejection> {
        let malformed = |what: &str| Rejection::MalformedBody(what.to_string());
        let mut envelope: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(body)
            .map_err(|_| malformed("the notification is not a JSON object"))?;
        let resource = envelope
            .get("resource")
            .ok_or_else(|| malformed("the notification has no `resource`"))?;
        let resource: serde_json::Value = serde_json::from_str(resource.get())
            .map_err(|_| malformed("`resource` is not JSON"))?;
        let field = |name: &str| resource.get(name).and_then(serde_json::Value::as_str);
        let algorithm =
            field("algorithm").ok_or_else(|| malformed("`resource.algorithm` is missing"))?;
        if algorithm != RESOURCE_ALGORITHM {
            return Err(Rejection::UnsupportedAlgorithm(clip(algorithm)));
        }
        let ciphertext =
            field("ciphertext").ok_or_else(|| malformed("`resource.ciphertext` is missing"))?;
        let nonce = field("nonce").ok_or_else(|| malformed("`resource.nonce` is missing"))?;
        let aad = field("associated_data").unwrap_or("");

        let sealed = STANDARD
            .decode(ciphertext)
            .map_err(|_| malformed("`resource.ciphertext` is not base64"))?;
        let plaintext = self
            .apiv3_keys
            .iter()
            .find_map(|key| open(key, nonce.as_bytes(), aad.as_bytes(), &sealed))
            .ok_or(Rejection::DecryptFailed)?;

        // Kept byte for byte when it is JSON (it always is today); otherwise carried as a JSON
        // string rather than dropped.
        let resource = match std::str::from_utf8(&plaintext)
            .ok()
            .and_then(|text| RawValue::from_string(text.to_string()).ok())
        {
            Some(json) => json,
            None => serde_json::value::to_raw_value(&String::from_utf8_lossy(&plaintext))
                .map_err(|_| malformed("the decrypted resource cannot be carried"))?,
        };
        let event_id = envelope
            .get("id")
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
            .filter(|id| !id.is_empty());
        envelope.insert("resource".to_string(), resource);
        let payload = serde_json::to_vec(&envelope)
            .map_err(|_| malformed("the notification cannot be re-encoded"))?;
        Ok(Checked { payload, event_id })
    }
}

/// AES-256-GCM for a 32-byte key, AES-128-GCM for a 16-byte one.
fn aes_gcm_key(key: &[u8]) -> Option<LessSafeKey> {
    let algorithm = match key.len() {
        32 => &aead::AES_256_GCM,
        16 => &aead::AES_128_GCM,
        _ => return None,
    };
    UnboundKey::new(algorithm, key).ok().map(LessSafeKey::new)
}

/// Opens a copy of `sealed` (ciphertext ‖ tag); `None` when the key, nonce, AAD or data do
/// not match.
fn open(key: &LessSafeKey, nonce: &[u8], aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut buffer = sealed.to_vec();
    key.open_in_place(nonce, Aad::from(aad), &mut buffer)
        .ok()
        .map(|plain| plain.to_vec())
}

/// Decrypts a WeChat Pay API v3 encrypted object (a notification's `resource`, or the
/// `encrypt_certificate` of the platform-certificate download): AES-GCM keyed by the APIv3
/// key's bytes (32 → AES-256, 16 → AES-128), `nonce` and `associated_data` as sent,
/// `ciphertext` base64 with the 16-byte tag appended.
///
/// Fails with [`Rejection::DecryptFailed`] for a wrong key (or a key of another length),
/// nonce, AAD or tampered data, and [`Rejection::MalformedBody`] when `ciphertext` is not
/// base64.
pub fn decrypt_resource(
    apiv3_key: &[u8],
    nonce: &str,
    associated_data: &str,
    ciphertext: &str,
) -> Result<Vec<u8>, Rejection> {
    let sealed = STANDARD
        .decode(ciphertext)
        .map_err(|_| Rejection::MalformedBody("the ciphertext is not base64".to_string()))?;
    let key = aes_gcm_key(apiv3_key).ok_or(Rejection::DecryptFailed)?;
    open(&key, nonce.as_bytes(), associated_data.as_bytes(), &sealed)
        .ok_or(Rejection::DecryptFailed)
}
