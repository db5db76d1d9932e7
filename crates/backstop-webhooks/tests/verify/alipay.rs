//! `alipay-rsa2`: no published signature exists, so a generated RSA-2048 key stands in for
//! Alipay's; the canonical content is checked against the documented example.

use crate::support::{
    check, config, form_encode, headers, json, public_key_base64, public_key_pem, rsa_key_pair,
    rsa_sign,
};
use backstop_webhooks::verify::{
    ConfigError, KeyFile, Rejection, Scheme, Verifier, VerifierConfig, alipay_sign_content,
};
use http::StatusCode;

/// The documented example's canonical content.
const EXAMPLE_CONTENT: &str = "a=1&b=2&notify_id=x&total_amount=0.01";

fn pem_config(public_pem: String) -> VerifierConfig {
    let mut cfg = config(Scheme::AlipayRsa2, &[]);
    cfg.key_files = vec![KeyFile::pem(public_pem)];
    cfg
}

/// A form body of `fields` (each name and value form-encoded), in the given order.
fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn canonical_content_matches_the_documented_example() {
    let fields = [
        ("sign", "xxx"),
        ("sign_type", "RSA2"),
        ("b", "2"),
        ("a", "1"),
        ("notify_id", "x"),
        ("total_amount", "0.01"),
    ];
    assert_eq!(alipay_sign_content(&fields), EXAMPLE_CONTENT);
}

#[test]
fn documented_example_signed_with_a_generated_key_verifies() {
    let key = rsa_key_pair();
    let sign = rsa_sign(&key, EXAMPLE_CONTENT.as_bytes());
    // Fields in the provider's (unsorted) order, sign first.
    let body = form(&[
        ("sign", &sign),
        ("sign_type", "RSA2"),
        ("b", "2"),
        ("a", "1"),
        ("notify_id", "x"),
        ("total_amount", "0.01"),
    ]);
    let v = Verifier::new(&pem_config(public_key_pem(&key))).unwrap();
    let verified = check(&v, &headers(&[]), body.as_bytes(), 0).unwrap();
    assert_eq!(verified.event_id.as_deref(), Some("x"), "notify_id");
    assert_eq!(
        json(&verified.payload),
        serde_json::json!({"a": "1", "b": "2", "notify_id": "x", "total_amount": "0.01"})
    );

    // Any other key, or one changed value, fails.
    let other = Verifier::new(&pem_config(public_key_pem(&rsa_key_pair()))).unwrap();
    assert_eq!(
        check(&other, &headers(&[]), body.as_bytes(), 0),
        Err(Rejection::NoMatchingSignature)
    );
    let tampered = body.replace("total_amount=0.01", "total_amount=100.01");
    assert_eq!(
        check(&v, &headers(&[]), tampered.as_bytes(), 0),
        Err(Rejection::NoMatchingSignature)
    );
    // An extra field is signed content too.
    let extra = format!("{body}&refund_fee=0.01");
    assert_eq!(
        check(&v, &headers(&[]), extra.as_bytes(), 0),
        Err(Rejection::NoMatchingSignature)
    );
}

#[test]
fn values_are_decoded_before_signing() {
    let key = rsa_key_pair();
    let fields = [
        ("notify_time", "2024-05-01 12:00:00"),
        ("subject", "测试 & more=1"),
        ("notify_id", "2024050100222120000000001234"),
        ("out_trade_no", "order-123"),
        ("trade_status", "TRADE_SUCCESS"),
        ("app_id", "2021000000000000"),
    ];
    let sign = rsa_sign(&key, alipay_sign_content(&fields).as_bytes());
    let mut all = fields.to_vec();
    all.push(("sign_type", "RSA2"));
    all.push(("sign", &sign));
    // `+` for spaces, as browsers and Alipay send them.
    let body = form(&all).replace("%20", "+");

    let mut cfg = pem_config(public_key_pem(&key));
    cfg.key_locator = Some("form:out_trade_no".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    let verified = check(&v, &headers(&[]), body.as_bytes(), 0).unwrap();
    assert_eq!(verified.event_id.as_deref(), Some("order-123"));
    assert_eq!(json(&verified.payload)["subject"], "测试 & more=1");

    // A `+` of the signature left unescaped arrives as a space and still verifies.
    let loose = body.replace("%2B", "+");
    assert!(check(&v, &headers(&[]), loose.as_bytes(), 0).is_ok());

    // A JSON pointer reads the payload object.
    cfg.key_locator = Some("/notify_id".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    assert_eq!(
        check(&v, &headers(&[]), body.as_bytes(), 0)
            .unwrap()
            .event_id
            .as_deref(),
        Some("2024050100222120000000001234")
    );
}

#[test]
fn malformed_notifications() {
    let key = rsa_key_pair();
    let v = Verifier::new(&pem_config(public_key_pem(&key))).unwrap();
    let sign = rsa_sign(&key, EXAMPLE_CONTENT.as_bytes());

    let unsigned = form(&[("a", "1"), ("notify_id", "x")]);
    let rejection = check(&v, &headers(&[]), unsigned.as_bytes(), 0).unwrap_err();
    assert_eq!(rejection, Rejection::MissingField("sign"));
    assert_eq!(rejection.status(), StatusCode::BAD_REQUEST);

    let rsa1 = form(&[("sign", &sign), ("sign_type", "RSA"), ("a", "1")]);
    assert_eq!(
        check(&v, &headers(&[]), rsa1.as_bytes(), 0),
        Err(Rejection::UnsupportedAlgorithm("RSA".into()))
    );

    let twice = form(&[("sign", &sign), ("a", "1"), ("a", "2")]);
    assert!(matches!(
        check(&v, &headers(&[]), twice.as_bytes(), 0),
        Err(Rejection::MalformedBody(_))
    ));

    let garbage = form(&[("sign", "***"), ("a", "1")]);
    assert_eq!(
        check(&v, &headers(&[]), garbage.as_bytes(), 0),
        Err(Rejection::NoMatchingSignature)
    );
    assert_eq!(
        check(&v, &headers(&[]), b"", 0),
        Err(Rejection::MissingField("sign"))
    );

    // sign_type may be absent (RSA2 is the only type this scheme reads).
    let body = format!("{}&{EXAMPLE_CONTENT}", form(&[("sign", &sign)]));
    assert!(check(&v, &headers(&[]), body.as_bytes(), 0).is_ok());
}

#[test]
fn public_keys_inline_in_base64_or_pem_and_rotation() {
    let old = rsa_key_pair();
    let new = rsa_key_pair();
    let sign = rsa_sign(&new, EXAMPLE_CONTENT.as_bytes());
    let body = format!(
        "{}&{EXAMPLE_CONTENT}",
        form(&[("sign", &sign), ("sign_type", "RSA2")])
    );

    // The console's bare base64, and a PEM pasted inline, in `keys`; rotation tries each.
    let cfg = config(
        Scheme::AlipayRsa2,
        &[&public_key_base64(&old), &public_key_pem(&new)],
    );
    let v = Verifier::new(&cfg).unwrap();
    assert!(check(&v, &headers(&[]), body.as_bytes(), 0).is_ok());
    let only_old = config(Scheme::AlipayRsa2, &[&public_key_base64(&old)]);
    assert_eq!(
        check(
            &Verifier::new(&only_old).unwrap(),
            &headers(&[]),
            body.as_bytes(),
            0
        ),
        Err(Rejection::NoMatchingSignature)
    );
    // A base64 key in a file, wrapped over lines.
    let wrapped: String = public_key_base64(&new)
        .as_bytes()
        .chunks(64)
        .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
        .collect();
    let v = Verifier::new(&pem_config(wrapped)).unwrap();
    assert!(check(&v, &headers(&[]), body.as_bytes(), 0).is_ok());
}

#[test]
fn configuration_errors() {
    assert!(matches!(
        Verifier::new(&config(Scheme::AlipayRsa2, &[])),
        Err(ConfigError::NoKeys { .. })
    ));
    let private = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
    let err = Verifier::new(&pem_config(private.to_string())).unwrap_err();
    assert!(err.to_string().contains("private key"), "{err}");
    assert!(matches!(
        Verifier::new(&config(Scheme::AlipayRsa2, &["not a key"])),
        Err(ConfigError::BadKey { .. })
    ));
    // A real RSA-512 public key: too small for RSA2.
    let small = "MFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBANoEYZUwGbYFJ2bmO5rWwb0lfncqOQC+PxBNPsBLEvp8G3fLkFtWbS+EHVwJQUGXG1JkcMGX6rlZzybSI9vhsH0CAwEAAQ==";
    let err = Verifier::new(&config(Scheme::AlipayRsa2, &[small])).unwrap_err();
    assert!(err.to_string().contains("2048 to 8192 bits"), "{err}");
}

#[test]
fn replies_are_exactly_success_and_fail() {
    let v = Verifier::new(&pem_config(public_key_pem(&rsa_key_pair()))).unwrap();
    let ok = v.success_reply();
    assert_eq!(ok.status, StatusCode::OK);
    assert_eq!(ok.content_type, Some("text/plain"));
    assert_eq!(ok.body, b"success");
    assert_eq!(ok.body.len(), 7);
    let reply = v.rejection_reply(&Rejection::NoMatchingSignature);
    assert_eq!(reply.body, b"fail");
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
}
