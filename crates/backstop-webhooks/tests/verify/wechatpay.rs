//! `wechatpay-v3`: the published notification (signature, window, decryption), the AES-GCM
//! vectors, key formats, and a generated key for what the vector cannot show.

use crate::support::{check, config, headers, json, public_key_pem, rsa_key_pair, rsa_sign};
use backstop_webhooks::verify::{
    ConfigError, KeyFile, Rejection, Scheme, Verifier, VerifierConfig, wechatpay_decrypt_resource,
};
use http::StatusCode;

const BODY: &[u8] = include_bytes!("../vectors/wechatpay-v3-notify-body.json");
const CERT: &str = include_str!("../vectors/wechatpay-v3-platform-cert.pem");
const PUBKEY: &str = include_str!("../vectors/wechatpay-v3-platform-pubkey.pem");
const APIV3_KEY: &str = "testMchAPIv3Key0";
const SERIAL: &str = "D7CE59D1F522D701";
const NONCE: &str = "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz";
const TS: i64 = 1624523846;
const SIGNATURE: &str = "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyXFlbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9FjDR//rxELLwXvV1VEA1IBLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmPQvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY406ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrFmtxw2Q==";
const PLAINTEXT: &str = r#"{"mchid":"1234567890","appid":"054aa7d7a2a54ab5898df65bd96f001c","create_time":"2020-06-30T12:12:00+08:00","out_contract_code":"21640bdbd08e473e828f3206a2741c6e"}"#;
const ENVELOPE_ID: &str = "3119dfba-e649-5eec-ab1e-3412bc4d2e17";

fn cert_config(apiv3_keys: &[&str]) -> VerifierConfig {
    let mut cfg = config(Scheme::WechatpayV3, apiv3_keys);
    cfg.key_files = vec![KeyFile::path(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/wechatpay-v3-platform-cert.pem"
    ))];
    cfg
}

fn vector_verifier() -> Verifier {
    Verifier::new(&cert_config(&[APIV3_KEY])).unwrap()
}

/// The vector's headers, with `(name, value)` overrides; a value of `None` drops the header.
fn vector_headers(overrides: &[(&str, Option<&str>)]) -> http::HeaderMap {
    let ts = TS.to_string();
    let base = [
        ("Wechatpay-Timestamp", ts.as_str()),
        ("Wechatpay-Nonce", NONCE),
        ("Wechatpay-Serial", SERIAL),
        ("Wechatpay-Signature", SIGNATURE),
    ];
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for (name, value) in base {
        match overrides.iter().find(|(n, _)| *n == name) {
            Some((_, Some(v))) => pairs.push((name, v)),
            Some((_, None)) => {}
            None => pairs.push((name, value)),
        }
    }
    for (name, value) in overrides {
        if !base.iter().any(|(n, _)| n == name)
            && let Some(v) = value
        {
            pairs.push((name, v));
        }
    }
    headers(&pairs)
}

#[test]
fn the_vector_body_is_the_published_bytes() {
    assert_eq!(BODY.len(), 568);
    assert_ne!(BODY.last(), Some(&b'\n'));
}

#[test]
fn published_notification_verifies_and_decrypts() {
    let verified = check(&vector_verifier(), &vector_headers(&[]), BODY, TS).unwrap();
    assert_eq!(verified.event_id.as_deref(), Some(ENVELOPE_ID));
    let payload = json(&verified.payload);
    assert_eq!(payload["id"], ENVELOPE_ID);
    assert_eq!(payload["event_type"], "PAYSCORE.USER_OPEN_SERVICE");
    assert_eq!(payload["summary"], "签约成功");
    assert_eq!(
        payload["resource"],
        serde_json::from_str::<serde_json::Value>(PLAINTEXT).unwrap()
    );
    // The decrypted resource is carried byte for byte.
    let text = String::from_utf8(verified.payload).unwrap();
    assert!(
        text.contains(&format!(r#""resource":{PLAINTEXT}"#)),
        "{text}"
    );
    assert!(!text.contains("ciphertext"));
}

#[test]
fn one_changed_body_byte_fails() {
    let mut body = BODY.to_vec();
    let at = body.iter().position(|&b| b == b'P').unwrap(); // in "PAYSCORE"
    body[at] = b'Q';
    assert_eq!(
        check(&vector_verifier(), &vector_headers(&[]), &body, TS),
        Err(Rejection::NoMatchingSignature)
    );
    // A trailing newline is a changed body too.
    let mut body = BODY.to_vec();
    body.push(b'\n');
    assert_eq!(
        check(&vector_verifier(), &vector_headers(&[]), &body, TS),
        Err(Rejection::NoMatchingSignature)
    );
}

#[test]
fn rejected_when_the_skew_reaches_300_seconds() {
    let v = vector_verifier();
    let h = vector_headers(&[]);
    for now in [TS - 299, TS + 299] {
        assert!(check(&v, &h, BODY, now).is_ok(), "{now}");
    }
    for now in [TS - 300, TS + 300, TS + 301, TS - 86_400] {
        assert!(
            matches!(
                check(&v, &h, BODY, now),
                Err(Rejection::OutsideTolerance {
                    tolerance_secs: 300,
                    ..
                })
            ),
            "{now}"
        );
    }
}

#[test]
fn each_missing_header_is_explicit() {
    for name in [
        "Wechatpay-Timestamp",
        "Wechatpay-Nonce",
        "Wechatpay-Signature",
        "Wechatpay-Serial",
    ] {
        assert_eq!(
            check(
                &vector_verifier(),
                &vector_headers(&[(name, None)]),
                BODY,
                TS
            ),
            Err(Rejection::MissingHeader(name.to_string()))
        );
    }
    assert_eq!(
        check(
            &vector_verifier(),
            &vector_headers(&[("Wechatpay-Timestamp", Some("yesterday"))]),
            BODY,
            TS
        ),
        Err(Rejection::BadTimestamp {
            header: "Wechatpay-Timestamp"
        })
    );
}

#[test]
fn serial_selects_the_key() {
    let v = vector_verifier();
    assert_eq!(
        check(
            &v,
            &vector_headers(&[(
                "Wechatpay-Serial",
                Some("5157F09EFDC096DE15EBE81A47057A7232F1B8E1")
            )]),
            BODY,
            TS
        ),
        Err(Rejection::UnknownSerial(
            "5157F09EFDC096DE15EBE81A47057A7232F1B8E1".into()
        ))
    );
    assert!(
        check(
            &v,
            &vector_headers(&[("Wechatpay-Serial", Some("d7ce59d1f522d701"))]),
            BODY,
            TS
        )
        .is_ok()
    );
}

#[test]
fn signature_probes_and_garbage_fail_verification() {
    let v = vector_verifier();
    for signature in [
        "WECHATPAY/SIGNTEST/yZ3hGIHd0hd6XDUsjqN7JUmgg3+PTGM6=",
        "WECHATPAY/SIGNTEST/not base64 at all",
        "",
    ] {
        let h = vector_headers(&[("Wechatpay-Signature", Some(signature))]);
        assert_eq!(
            check(&v, &h, BODY, TS),
            Err(Rejection::NoMatchingSignature),
            "{signature}"
        );
    }
    let sm2 = vector_headers(&[("Wechatpay-Signature-Type", Some("WECHATPAY2-SM2-WITH-SM3"))]);
    assert_eq!(
        check(&v, &sm2, BODY, TS),
        Err(Rejection::UnsupportedAlgorithm(
            "WECHATPAY2-SM2-WITH-SM3".into()
        ))
    );
    let rsa = vector_headers(&[(
        "Wechatpay-Signature-Type",
        Some("WECHATPAY2-SHA256-RSA2048"),
    )]);
    assert!(check(&v, &rsa, BODY, TS).is_ok());
}

#[test]
fn the_apiv3_key_must_decrypt() {
    let wrong = Verifier::new(&cert_config(&["testMchAPIv3Key1"])).unwrap();
    let rejection = check(&wrong, &vector_headers(&[]), BODY, TS).unwrap_err();
    assert_eq!(rejection, Rejection::DecryptFailed);
    // Rotation: any configured key may decrypt.
    let rotated = Verifier::new(&cert_config(&["testMchAPIv3Key1", APIV3_KEY])).unwrap();
    assert!(check(&rotated, &vector_headers(&[]), BODY, TS).is_ok());
    // A 32-byte key is AES-256 and does not decrypt an AES-128 ciphertext.
    let long = Verifier::new(&cert_config(&["0123456789abcdef0123456789abcdef"])).unwrap();
    assert_eq!(
        check(&long, &vector_headers(&[]), BODY, TS),
        Err(Rejection::DecryptFailed)
    );
    for bad in ["", "short", "testMchAPIv3Key0testMchAPIv3Key"] {
        assert!(
            matches!(
                Verifier::new(&cert_config(&[bad])),
                Err(ConfigError::ApiV3KeyLength { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn aes_gcm_vectors() {
    let ciphertext = "FsdXzxryWfKwvLJKf8LG/ToRPTRh8RN9wROC";
    let nonce = "wCq51qZv4Yfg";
    let aad = "Dl56FrqWQJF1t9LtC3vEUsniZKvbqdR8";
    assert_eq!(
        wechatpay_decrypt_resource(b"testAPIv3Key0000", nonce, aad, ciphertext).unwrap(),
        b"Hello World"
    );
    assert_eq!(
        wechatpay_decrypt_resource(b"testAPIv3Key1111", nonce, aad, ciphertext),
        Err(Rejection::DecryptFailed)
    );
    assert_eq!(
        wechatpay_decrypt_resource(b"testAPIv3Key0000", nonce, "other", ciphertext),
        Err(Rejection::DecryptFailed)
    );
    assert_eq!(
        wechatpay_decrypt_resource(b"testAPIv3Key0000", "short", aad, ciphertext),
        Err(Rejection::DecryptFailed)
    );
    assert!(matches!(
        wechatpay_decrypt_resource(b"testAPIv3Key0000", nonce, aad, "%%%"),
        Err(Rejection::MalformedBody(_))
    ));
}

#[test]
fn platform_keys_in_every_form() {
    // The certificate inline, and the same key as a platform public key with an id.
    let mut cfg = config(Scheme::WechatpayV3, &[APIV3_KEY]);
    cfg.key_files = vec![
        KeyFile::pem(CERT),
        format!(
            "PUB_KEY_ID_0114232134912410000000000000={}/tests/vectors/wechatpay-v3-platform-pubkey.pem",
            env!("CARGO_MANIFEST_DIR")
        )
        .parse()
        .unwrap(),
    ];
    let v = Verifier::new(&cfg).unwrap();
    for serial in [SERIAL, "PUB_KEY_ID_0114232134912410000000000000"] {
        let h = vector_headers(&[("Wechatpay-Serial", Some(serial))]);
        assert!(check(&v, &h, BODY, TS).is_ok(), "{serial}");
    }

    // A public key without an id cannot be picked.
    cfg.key_files = vec![KeyFile::pem(PUBKEY)];
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::BadKey { .. })
    ));
    // The same serial twice.
    cfg.key_files = vec![
        KeyFile::pem(CERT),
        KeyFile::pem(PUBKEY).with_id("d7ce59d1f522d701"),
    ];
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::DuplicateSerial(_))
    ));
    // No platform key, an unreadable file.
    cfg.key_files = vec![];
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::NoKeys { .. })
    ));
    cfg.key_files = vec![KeyFile::path("/nonexistent/platform.pem")];
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::ReadKeyFile { .. })
    ));
    cfg.key_files = vec![KeyFile::pem(
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )];
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::BadKey { .. })
    ));
}

#[test]
fn key_locator_points_into_the_decrypted_envelope() {
    let mut cfg = cert_config(&[APIV3_KEY]);
    cfg.key_locator = Some("/resource/out_contract_code".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    assert_eq!(
        check(&v, &vector_headers(&[]), BODY, TS)
            .unwrap()
            .event_id
            .as_deref(),
        Some("21640bdbd08e473e828f3206a2741c6e")
    );
    cfg.key_locator = Some("/id".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    assert_eq!(
        check(&v, &vector_headers(&[]), BODY, TS)
            .unwrap()
            .event_id
            .as_deref(),
        Some(ENVELOPE_ID)
    );
    cfg.key_locator = Some("form:id".parse().unwrap());
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::LocatorNotApplicable { .. })
    ));
}

#[test]
fn replies() {
    let v = vector_verifier();
    let ok = v.success_reply();
    assert_eq!(ok.status, StatusCode::NO_CONTENT);
    assert!(ok.body.is_empty());
    let rejection = check(
        &v,
        &vector_headers(&[("Wechatpay-Timestamp", None)]),
        BODY,
        TS,
    )
    .unwrap_err();
    let reply = v.rejection_reply(&rejection);
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reply.content_type, Some("application/json"));
    assert_eq!(
        json(&reply.body),
        serde_json::json!({"code": "FAIL", "message": "missing the Wechatpay-Timestamp header"})
    );
}

/// A notification signed with a generated platform key and sealed with a 32-byte APIv3 key
/// (AES-256-GCM, as in production).
struct Generated {
    verifier: Verifier,
    key: aws_lc_rs::rsa::KeyPair,
    apiv3_key: [u8; 32],
}

const GEN_SERIAL: &str = "PUB_KEY_ID_TEST";

impl Generated {
    fn new() -> Self {
        let key = rsa_key_pair();
        let apiv3_key = *b"0123456789abcdef0123456789ABCDEF";
        let mut cfg = config(
            Scheme::WechatpayV3,
            &[std::str::from_utf8(&apiv3_key).unwrap()],
        );
        cfg.key_files = vec![KeyFile::pem(public_key_pem(&key)).with_id(GEN_SERIAL)];
        Generated {
            verifier: Verifier::new(&cfg).unwrap(),
            key,
            apiv3_key,
        }
    }

    /// base64 AES-256-GCM of `plaintext` (ciphertext ‖ tag).
    fn seal(&self, nonce: &str, aad: &str, plaintext: &[u8]) -> String {
        use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
        use base64::Engine as _;
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.apiv3_key).unwrap());
        let mut buffer = plaintext.to_vec();
        key.seal_in_place_append_tag(
            Nonce::try_assume_unique_for_key(nonce.as_bytes()).unwrap(),
            Aad::from(aad.as_bytes()),
            &mut buffer,
        )
        .unwrap();
        base64::engine::general_purpose::STANDARD.encode(buffer)
    }

    fn send(&self, body: &[u8]) -> Result<backstop_webhooks::verify::Verified, Rejection> {
        let ts = "1700000000";
        let nonce = "n0nce-0f-the-request";
        let message = [ts.as_bytes(), b"\n", nonce.as_bytes(), b"\n", body, b"\n"].concat();
        let signature = rsa_sign(&self.key, &message);
        let h = headers(&[
            ("Wechatpay-Timestamp", ts),
            ("Wechatpay-Nonce", nonce),
            ("Wechatpay-Serial", GEN_SERIAL),
            ("Wechatpay-Signature", &signature),
        ]);
        check(&self.verifier, &h, body, 1700000000)
    }
}

#[test]
fn generated_notification_with_an_aes_256_key() {
    let g = Generated::new();
    let plaintext =
        br#"{"out_trade_no":"order-123","trade_state":"SUCCESS","amount":{"total":100}}"#;
    let ciphertext = g.seal("abcdefghijkl", "transaction", plaintext);
    let body = format!(
        r#"{{"id":"evt-1","create_time":"2024-01-01T00:00:00+08:00","resource_type":"encrypt-resource","event_type":"TRANSACTION.SUCCESS","summary":"ok","resource":{{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM","ciphertext":"{ciphertext}","associated_data":"transaction","nonce":"abcdefghijkl"}}}}"#
    );
    let verified = g.send(body.as_bytes()).unwrap();
    assert_eq!(verified.event_id.as_deref(), Some("evt-1"));
    let payload = json(&verified.payload);
    assert_eq!(payload["event_type"], "TRANSACTION.SUCCESS");
    assert_eq!(payload["resource"]["out_trade_no"], "order-123");

    // Signed but not decryptable: the AAD was changed before signing.
    let tampered = body.replace(
        r#""associated_data":"transaction""#,
        r#""associated_data":"transactioN""#,
    );
    assert_eq!(g.send(tampered.as_bytes()), Err(Rejection::DecryptFailed));
}

#[test]
fn generated_notifications_with_malformed_envelopes() {
    let g = Generated::new();
    for body in [
        "not json",
        r#"{"id":"evt-1"}"#,
        r#"{"id":"evt-1","resource":{"algorithm":"AEAD_AES_256_GCM","nonce":"abcdefghijkl"}}"#,
        r#"{"id":"evt-1","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"%%","nonce":"abcdefghijkl"}}"#,
    ] {
        let rejection = g.send(body.as_bytes()).unwrap_err();
        assert!(
            matches!(rejection, Rejection::MalformedBody(_)),
            "{body}: {rejection}"
        );
        assert_eq!(rejection.status(), StatusCode::BAD_REQUEST);
    }
    let sm4 = r#"{"id":"e","resource":{"algorithm":"AEAD_SM4_GCM","ciphertext":"","nonce":"abcdefghijkl"}}"#;
    assert_eq!(
        g.send(sm4.as_bytes()),
        Err(Rejection::UnsupportedAlgorithm("AEAD_SM4_GCM".into()))
    );

    // A resource that is not JSON is carried as a string; no associated data is empty AAD.
    let ciphertext = g.seal("abcdefghijkl", "", b"plain text");
    let body = format!(
        r#"{{"id":"evt-2","resource":{{"algorithm":"AEAD_AES_256_GCM","ciphertext":"{ciphertext}","nonce":"abcdefghijkl"}}}}"#
    );
    let verified = g.send(body.as_bytes()).unwrap();
    assert_eq!(json(&verified.payload)["resource"], "plain text");
}
