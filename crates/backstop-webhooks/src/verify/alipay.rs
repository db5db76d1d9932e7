//! `alipay-rsa2`: Alipay asynchronous notifications.
//!
//! The body is a form; `sign` (base64) and `sign_type` (`RSA2`) are fields. The signed content
//! is every other field, decoded, sorted by name, joined as `k=v` with `&`; the signature is
//! SHA256withRSA (PKCS#1 v1.5) with Alipay's public key. The content is checked as decoded
//! bytes, so a notification in another charset than UTF-8 still verifies; its payload must
//! be UTF-8 to become JSON. Alipay resends a notification for about 25 hours with the same
//! `notify_id`, so there is no timestamp window.

use super::headers::clip;
use super::keys::{self, PublicKey};
use super::{Checked, ConfigError, InboundRequest, KeyFile, Rejection, Scheme};
use aws_lc_rs::signature::ParsedPublicKey;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

pub(super) struct Alipay {
    keys: Vec<ParsedPublicKey>,
}

impl Alipay {
    pub(super) fn new(inline: &[String], key_files: &[KeyFile]) -> Result<Self, ConfigError> {
        let mut keys: Vec<PublicKey> = Vec::new();
        for (index, text) in inline.iter().enumerate() {
            keys.extend(keys::parse(
                text.as_bytes(),
                &format!("keys[{index}]"),
                None,
            )?);
        }
        for file in key_files {
            keys.extend(keys::load(file)?);
        }
        if keys.is_empty() {
            return Err(ConfigError::NoKeys {
                scheme: Scheme::AlipayRsa2,
                what: "Alipay public key (in `key_files`, or inline in `keys`)",
            });
        }
        Ok(Alipay {
            keys: keys.into_iter().map(|k| k.key).collect(),
        })
    }

    pub(super) fn verify(&self, request: &InboundRequest<'_>) -> Result<Checked, Rejection> {
        let mut fields = super::form::parse(request.body);
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = fields.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(Rejection::MalformedBody(format!(
                "the form field `{}` appears twice",
                clip(&String::from_utf8_lossy(&pair[0].0))
            )));
        }
        let take = |fields: &mut Vec<(Vec<u8>, Vec<u8>)>, name: &[u8]| {
            fields
                .iter()
                .position(|(k, _)| k == name)
                .map(|at| fields.remove(at).1)
        };
        let sign = take(&mut fields, b"sign").ok_or(Rejection::MissingField("sign"))?;
        if let Some(sign_type) = take(&mut fields, b"sign_type")
            && sign_type != b"RSA2"
        {
            return Err(Rejection::UnsupportedAlgorithm(clip(
                &String::from_utf8_lossy(&sign_type),
            )));
        }
        // A `+` left unescaped by a sender arrives as a space; base64 has no spaces.
        let sign: Vec<u8> = sign
            .into_iter()
            .map(|b| if b == b' ' { b'+' } else { b })
            .collect();
        let signature = STANDARD
            .decode(&sign)
            .map_err(|_| Rejection::NoMatchingSignature)?;

        let mut content = Vec::with_capacity(request.body.len());
        for (i, (name, value)) in fields.iter().enumerate() {
            if i > 0 {
                content.push(b'&');
            }
            content.extend_from_slice(name);
            content.push(b'=');
            content.extend_from_slice(value);
        }
        if !self
            .keys
            .iter()
            .any(|key| key.verify_sig(&content, &signature).is_ok())
        {
            return Err(Rejection::NoMatchingSignature);
        }

        let mut object = serde_json::Map::new();
        for (name, value) in fields {
            let (Ok(name), Ok(value)) = (String::from_utf8(name), String::from_utf8(value)) else {
                return Err(Rejection::MalformedBody(
                    "the notification is not UTF-8: set charset=utf-8 in the app's requests"
                        .to_string(),
                ));
            };
            object.insert(name, serde_json::Value::String(value));
        }
        let event_id = object
            .get("notify_id")
            .and_then(serde_json::Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_string);
        let payload = serde_json::to_vec(&object).map_err(|e| {
            Rejection::MalformedBody(format!("the notification cannot be encoded: {e}"))
        })?;
        Ok(Checked { payload, event_id })
    }
}

/// The content Alipay signs for these `(name, value)` pairs: without `sign` and `sign_type`,
/// sorted by name, `k=v` joined with `&`. For tests and for signing test notifications.
pub fn alipay_sign_content(fields: &[(&str, &str)]) -> String {
    let mut kept: Vec<&(&str, &str)> = fields
        .iter()
        .filter(|(name, _)| *name != "sign" && *name != "sign_type")
        .collect();
    kept.sort_by(|a, b| a.0.cmp(b.0));
    kept.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}
