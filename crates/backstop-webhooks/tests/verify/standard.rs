//! `standard-webhooks`: the published vectors SW-1 and SW-2 and every listed rejection.

use crate::support::{check, config, headers};
use backstop_webhooks::verify::{ConfigError, KeyLocator, Rejection, Scheme, Verifier};

const SW1_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SW1_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SW1_TS: i64 = 1614265330;
const SW1_BODY: &[u8] = br#"{"test": 2432232314}"#;
const SW1_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

const SW2_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const SW2_ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
const SW2_TS: i64 = 1649367553;
const SW2_BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
const SW2_SIG: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

fn verifier(secrets: &[&str]) -> Verifier {
    Verifier::new(&config(Scheme::StandardWebhooks, secrets)).unwrap()
}

/// SW-1's id and body with the given timestamp and signature header, at `now`.
fn sw1(ts: &str, signature: &str, now: i64) -> Result<(), Rejection> {
    let h = headers(&[
        ("webhook-id", SW1_ID),
        ("webhook-timestamp", ts),
        ("webhook-signature", signature),
    ]);
    check(&verifier(&[SW1_SECRET]), &h, SW1_BODY, now).map(|_| ())
}

#[test]
fn published_vectors_verify() {
    let ts = SW1_TS.to_string();
    let h = headers(&[
        ("webhook-id", SW1_ID),
        ("webhook-timestamp", &ts),
        ("webhook-signature", SW1_SIG),
    ]);
    let verified = check(&verifier(&[SW1_SECRET]), &h, SW1_BODY, SW1_TS).unwrap();
    assert_eq!(verified.payload, SW1_BODY, "the body is kept byte for byte");
    assert_eq!(verified.event_id.as_deref(), Some(SW1_ID));

    let ts = SW2_TS.to_string();
    let h = headers(&[
        ("webhook-id", SW2_ID),
        ("webhook-timestamp", &ts),
        ("webhook-signature", SW2_SIG),
    ]);
    let verified = check(&verifier(&[SW2_SECRET]), &h, SW2_BODY, SW2_TS).unwrap();
    assert_eq!(verified.payload, SW2_BODY);
    assert_eq!(verified.event_id.as_deref(), Some(SW2_ID));
}

#[test]
fn listed_signatures_are_rejected() {
    let ts = SW1_TS.to_string();
    for bad in [
        "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
        "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=",
        "v1,",
        &SW1_SIG[..8],
    ] {
        assert_eq!(
            sw1(&ts, bad, SW1_TS),
            Err(Rejection::NoMatchingSignature),
            "{bad}"
        );
    }
}

#[test]
fn a_wrong_then_right_signature_is_accepted() {
    let ts = SW1_TS.to_string();
    let header = format!("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= {SW1_SIG}");
    assert_eq!(sw1(&ts, &header, SW1_TS), Ok(()));
}

#[test]
fn each_missing_header_is_named() {
    let ts = SW1_TS.to_string();
    let all = [
        ("webhook-id", SW1_ID),
        ("webhook-timestamp", ts.as_str()),
        ("webhook-signature", SW1_SIG),
    ];
    for missing in 0..all.len() {
        let present: Vec<_> = (0..all.len())
            .filter(|&i| i != missing)
            .map(|i| all[i])
            .collect();
        let got = check(
            &verifier(&[SW1_SECRET]),
            &headers(&present),
            SW1_BODY,
            SW1_TS,
        );
        assert_eq!(
            got,
            Err(Rejection::MissingHeader(all[missing].0.to_string()))
        );
    }
}

#[test]
fn a_timestamp_that_is_not_a_number_is_rejected() {
    assert_eq!(
        sw1("hello", SW1_SIG, SW1_TS),
        Err(Rejection::BadTimestamp {
            header: "webhook-timestamp"
        })
    );
}

#[test]
fn tolerance_boundary_300_accepted_301_rejected() {
    let ts = SW1_TS.to_string();
    assert_eq!(sw1(&ts, SW1_SIG, SW1_TS + 300), Ok(()));
    assert_eq!(sw1(&ts, SW1_SIG, SW1_TS - 300), Ok(()));
    let outside = Err(Rejection::OutsideTolerance {
        skew_secs: 301,
        tolerance_secs: 300,
    });
    // 301 s in the past and in the future.
    assert_eq!(sw1(&ts, SW1_SIG, SW1_TS + 301), outside);
    assert_eq!(sw1(&ts, SW1_SIG, SW1_TS - 301), outside);
}

#[test]
fn an_empty_secret_is_refused_at_configuration() {
    for empty in ["", "whsec_"] {
        let err = Verifier::new(&config(Scheme::StandardWebhooks, &[empty])).unwrap_err();
        assert!(
            matches!(err, ConfigError::Secret { index: 0, .. }),
            "{empty}: {err}"
        );
    }
    assert!(matches!(
        Verifier::new(&config(Scheme::StandardWebhooks, &[])),
        Err(ConfigError::NoKeys { .. })
    ));
    assert!(matches!(
        Verifier::new(&config(Scheme::StandardWebhooks, &["whsec_!!"])),
        Err(ConfigError::Secret { .. })
    ));
}

#[test]
fn rotation_accepts_any_configured_secret() {
    let ts = SW1_TS.to_string();
    let h = headers(&[
        ("webhook-id", SW1_ID),
        ("webhook-timestamp", &ts),
        ("webhook-signature", SW1_SIG),
    ]);
    let both = verifier(&[SW2_SECRET, SW1_SECRET]);
    assert!(check(&both, &h, SW1_BODY, SW1_TS).is_ok());
    let other = verifier(&[SW2_SECRET]);
    assert_eq!(
        check(&other, &h, SW1_BODY, SW1_TS),
        Err(Rejection::NoMatchingSignature)
    );
    // Timestamp errors do not depend on the key.
    assert!(matches!(
        check(&both, &h, SW1_BODY, SW1_TS + 301),
        Err(Rejection::OutsideTolerance { .. })
    ));
}

#[test]
fn a_reserialised_body_fails() {
    let ts = SW1_TS.to_string();
    let h = headers(&[
        ("webhook-id", SW1_ID),
        ("webhook-timestamp", &ts),
        ("webhook-signature", SW1_SIG),
    ]);
    assert_eq!(
        check(
            &verifier(&[SW1_SECRET]),
            &h,
            br#"{"test":2432232314}"#,
            SW1_TS
        ),
        Err(Rejection::NoMatchingSignature)
    );
}

#[test]
fn key_locator_overrides_the_webhook_id() {
    let ts = SW1_TS.to_string();
    let h = headers(&[
        ("webhook-id", SW1_ID),
        ("webhook-timestamp", &ts),
        ("webhook-signature", SW1_SIG),
    ]);
    let mut cfg = config(Scheme::StandardWebhooks, &[SW1_SECRET]);
    cfg.key_locator = Some("/test".parse::<KeyLocator>().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    assert_eq!(
        check(&v, &h, SW1_BODY, SW1_TS).unwrap().event_id.as_deref(),
        Some("2432232314")
    );

    cfg.key_locator = Some("/missing".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    let rejection = check(&v, &h, SW1_BODY, SW1_TS).unwrap_err();
    assert_eq!(
        rejection,
        Rejection::MissingEventId {
            locator: "/missing".into()
        }
    );
    assert_eq!(rejection.status(), http::StatusCode::BAD_REQUEST);
}
