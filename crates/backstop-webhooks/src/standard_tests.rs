//! Published Standard Webhooks vectors plus the rejections a verifier must make.

use super::*;

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

const TOLERANCE: i64 = 300;

fn sw1() -> StandardWebhooks {
    StandardWebhooks::from_secret(SW1_SECRET).unwrap()
}

/// Verifies SW-1's id and body with the given header values at `now`.
fn verify_sw1(ts: Option<&str>, sig: Option<&str>, now: i64) -> Result<(), VerifyError> {
    sw1().verify(Some(SW1_ID), ts, sig, SW1_BODY, now, TOLERANCE)
}

#[test]
fn sign_matches_published_vectors() {
    assert_eq!(sw1().sign(SW1_ID, SW1_TS, SW1_BODY), SW1_SIG);
    let sw2 = StandardWebhooks::from_secret(SW2_SECRET).unwrap();
    assert_eq!(sw2.sign(SW2_ID, SW2_TS, SW2_BODY), SW2_SIG);
}

#[test]
fn verify_accepts_published_vectors() {
    let ts1 = SW1_TS.to_string();
    assert_eq!(verify_sw1(Some(&ts1), Some(SW1_SIG), SW1_TS), Ok(()));
    let sw2 = StandardWebhooks::from_secret(SW2_SECRET).unwrap();
    let ts2 = SW2_TS.to_string();
    let got = sw2.verify(
        Some(SW2_ID),
        Some(&ts2),
        Some(SW2_SIG),
        SW2_BODY,
        SW2_TS,
        TOLERANCE,
    );
    assert_eq!(got, Ok(()));
}

/// Without `whsec_` the string is most likely a raw secret the receiver uses as is: decoding
/// it as base64 would sign with other bytes, and every delivery would fail verification.
#[test]
fn a_secret_without_the_prefix_is_refused() {
    for bare in [
        &SW1_SECRET["whsec_".len()..],
        "my-shared-secret",
        "WHSEC_abcd",
    ] {
        let e = StandardWebhooks::from_secret(bare).unwrap_err();
        assert_eq!(e, SecretError::MissingPrefix, "{bare}");
        let said = e.to_string();
        assert!(said.contains("`whsec_` followed by base64"), "{said}");
        assert!(
            !said.contains(bare),
            "the message never quotes the secret: {said}"
        );
    }
}

#[test]
fn wrong_or_malformed_signatures_are_rejected() {
    let ts = SW1_TS.to_string();
    let bad = [
        "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
        "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=",
        "v1,",
        &SW1_SIG[..8],
        "",
        "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    ];
    for sig in bad {
        assert_eq!(
            verify_sw1(Some(&ts), Some(sig), SW1_TS),
            Err(VerifyError::NoMatchingSignature),
            "{sig:?}"
        );
    }
}

#[test]
fn any_matching_v1_entry_is_accepted() {
    let ts = SW1_TS.to_string();
    let header = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= \
                  v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    assert_eq!(verify_sw1(Some(&ts), Some(header), SW1_TS), Ok(()));
}

#[test]
fn missing_headers_are_named() {
    let ts = SW1_TS.to_string();
    let s = sw1();
    let no_id = s.verify(None, Some(&ts), Some(SW1_SIG), SW1_BODY, SW1_TS, TOLERANCE);
    assert_eq!(no_id, Err(VerifyError::MissingHeader("webhook-id")));
    assert_eq!(
        verify_sw1(None, Some(SW1_SIG), SW1_TS),
        Err(VerifyError::MissingHeader("webhook-timestamp"))
    );
    assert_eq!(
        verify_sw1(Some(&ts), None, SW1_TS),
        Err(VerifyError::MissingHeader("webhook-signature"))
    );
}

#[test]
fn non_integer_timestamp_is_rejected() {
    assert_eq!(
        verify_sw1(Some("hello"), Some(SW1_SIG), SW1_TS),
        Err(VerifyError::InvalidTimestamp)
    );
}

#[test]
fn timestamp_tolerance_is_inclusive() {
    let ts = SW1_TS.to_string();
    // `now` moves instead of the timestamp, so the signature stays valid.
    for now in [SW1_TS - 300, SW1_TS + 300] {
        assert_eq!(verify_sw1(Some(&ts), Some(SW1_SIG), now), Ok(()), "{now}");
    }
    for now in [SW1_TS - 301, SW1_TS + 301] {
        assert!(
            matches!(
                verify_sw1(Some(&ts), Some(SW1_SIG), now),
                Err(VerifyError::TimestampOutOfTolerance { skew_secs: 301, .. })
            ),
            "{now}"
        );
    }
}

#[test]
fn tampered_body_is_rejected() {
    let ts = SW1_TS.to_string();
    let got = sw1().verify(
        Some(SW1_ID),
        Some(&ts),
        Some(SW1_SIG),
        br#"{"test":2432232314}"#,
        SW1_TS,
        TOLERANCE,
    );
    assert_eq!(got, Err(VerifyError::NoMatchingSignature));
}

#[test]
fn bad_secrets_are_rejected() {
    assert_eq!(
        StandardWebhooks::from_secret("whsec_").unwrap_err(),
        SecretError::Empty
    );
    assert_eq!(
        StandardWebhooks::from_secret("").unwrap_err(),
        SecretError::MissingPrefix
    );
    assert_eq!(
        StandardWebhooks::from_secret("whsec_not base64!").unwrap_err(),
        SecretError::InvalidBase64
    );
}

#[test]
fn debug_does_not_print_the_key() {
    let shown = format!("{:?}", sw1());
    assert!(shown.contains("redacted"), "{shown}");
    assert!(!shown.contains("MfKQ9r8G"), "{shown}");
}
