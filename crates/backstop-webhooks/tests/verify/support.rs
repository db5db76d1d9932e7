//! Helpers shared by the scheme tests.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{self, KeyPair as _};
use backstop_webhooks::verify::{
    InboundRequest, Rejection, Scheme, Verified, Verifier, VerifierConfig,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderName, HeaderValue};
use jiff::Timestamp;

/// A header map from `(name, value)` pairs.
pub fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// The instant `secs` seconds after the Unix epoch.
pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

/// A configuration of `scheme` with `keys`.
pub fn config(scheme: Scheme, keys: &[&str]) -> VerifierConfig {
    let mut config = VerifierConfig::new(scheme);
    config.keys = keys.iter().map(|k| k.to_string()).collect();
    config
}

/// Runs one verification.
pub fn check(
    verifier: &Verifier,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, Rejection> {
    verifier.verify(&InboundRequest {
        headers,
        body,
        now: at(now),
    })
}

/// A fresh RSA-2048 key pair (the way a test stands in for a provider without published
/// vectors).
pub fn rsa_key_pair() -> KeyPair {
    KeyPair::generate(KeySize::Rsa2048).unwrap()
}

/// base64 SHA256withRSA (PKCS#1 v1.5) of `message`.
pub fn rsa_sign(key: &KeyPair, message: &[u8]) -> String {
    let mut signature = vec![0; key.public_modulus_len()];
    key.sign(
        &signature::RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        message,
        &mut signature,
    )
    .unwrap();
    STANDARD.encode(signature)
}

/// The key pair's public key as base64 SubjectPublicKeyInfo DER (Alipay console format).
pub fn public_key_base64(key: &KeyPair) -> String {
    STANDARD.encode(key.public_key().as_der().unwrap().as_ref())
}

/// The key pair's public key as a `PUBLIC KEY` PEM.
pub fn public_key_pem(key: &KeyPair) -> String {
    let b64 = public_key_base64(key);
    let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END PUBLIC KEY-----\n");
    pem
}

/// `application/x-www-form-urlencoded` encoding of one component (everything but unreserved
/// characters escaped).
pub fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The payload as a JSON value.
pub fn json(payload: &[u8]) -> serde_json::Value {
    serde_json::from_slice(payload).unwrap()
}
