//! How each provider signs a callback, for the tests: the test stands in for the provider.

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::hmac;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{self, KeyPair as _};
use backstop_webhooks::StandardWebhooks;
use backstop_webhooks::verify::alipay_sign_content;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The Standard Webhooks secret of the `orders` source.
pub const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The Stripe endpoint secret of the `stripe` source.
pub const STRIPE_SECRET: &str = "whsec_stripe_test_secret";
/// The shared secret of the `github` (hmac-sha256) source.
pub const HMAC_SECRET: &str = "github-shared-secret";

/// Seconds since the Unix epoch, now.
pub fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Standard Webhooks headers for `body`.
pub fn standard(id: &str, ts: i64, body: &str) -> Vec<(String, String)> {
    let signer = StandardWebhooks::from_secret(STANDARD_SECRET).unwrap();
    vec![
        ("webhook-id".into(), id.into()),
        ("webhook-timestamp".into(), ts.to_string()),
        (
            "webhook-signature".into(),
            signer.sign(id, ts, body.as_bytes()),
        ),
        ("content-type".into(), "application/json".into()),
    ]
}

fn hmac_hex(key: &[u8], message: &[u8]) -> String {
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), message);
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Stripe's `Stripe-Signature` header for `body`.
pub fn stripe(ts: i64, body: &str) -> Vec<(String, String)> {
    let sig = hmac_hex(STRIPE_SECRET.as_bytes(), format!("{ts}.{body}").as_bytes());
    vec![
        ("stripe-signature".into(), format!("t={ts},v1={sig}")),
        ("content-type".into(), "application/json".into()),
    ]
}

/// GitHub-style `X-Hub-Signature-256` with the delivery id header.
pub fn github(delivery: &str, body: &str) -> Vec<(String, String)> {
    vec![
        (
            "x-hub-signature-256".into(),
            format!(
                "sha256={}",
                hmac_hex(HMAC_SECRET.as_bytes(), body.as_bytes())
            ),
        ),
        ("x-github-delivery".into(), delivery.into()),
        ("content-type".into(), "application/json".into()),
    ]
}

/// Alipay's signing key, generated for the test (Alipay publishes no vectors).
pub struct AlipayKey(KeyPair);

impl AlipayKey {
    pub fn generate() -> Self {
        AlipayKey(KeyPair::generate(KeySize::Rsa2048).unwrap())
    }

    /// The public key, as the `PUBLIC KEY` PEM the source's key file holds.
    pub fn public_pem(&self) -> String {
        let b64 = STANDARD.encode(self.0.public_key().as_der().unwrap().as_ref());
        let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap());
            pem.push('\n');
        }
        pem.push_str("-----END PUBLIC KEY-----\n");
        pem
    }

    /// A signed, form-encoded notification of `fields`.
    pub fn notification(&self, fields: &[(&str, &str)]) -> String {
        let content = alipay_sign_content(fields);
        let mut sig = vec![0; self.0.public_modulus_len()];
        self.0
            .sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                content.as_bytes(),
                &mut sig,
            )
            .unwrap();
        let sign = STANDARD.encode(sig);
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        all.push(("sign_type", "RSA2"));
        all.push(("sign", &sign));
        all.iter()
            .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// WeChat Pay's published notification (the API v3 documentation's example): its body, its
/// headers, the platform certificate and the APIv3 key that decrypts it. Signed in 2021, so
/// the source that checks it is configured with a tolerance of years.
pub mod wechat {
    pub const BODY: &[u8] =
        include_bytes!("../../../backstop-webhooks/tests/vectors/wechatpay-v3-notify-body.json");
    pub const CERT: &str =
        include_str!("../../../backstop-webhooks/tests/vectors/wechatpay-v3-platform-cert.pem");
    pub const APIV3_KEY: &str = "testMchAPIv3Key0";
    pub const ENVELOPE_ID: &str = "3119dfba-e649-5eec-ab1e-3412bc4d2e17";

    pub fn headers() -> Vec<(String, String)> {
        [
            ("Wechatpay-Timestamp", "1624523846"),
            ("Wechatpay-Nonce", "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz"),
            ("Wechatpay-Serial", "D7CE59D1F522D701"),
            (
                "Wechatpay-Signature",
                "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyXFlbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9FjDR//rxELLwXvV1VEA1IBLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmPQvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY406ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrFmtxw2Q==",
            ),
            ("Content-Type", "application/json"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}
