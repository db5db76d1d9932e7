//! `stripe`: the published vector, its tolerance boundary, rotation and malformed headers.

use crate::support::{check, config, headers};
use backstop_webhooks::verify::{ConfigError, Rejection, Scheme, Verifier};

const SECRET: &str = "whsec_test_secret";
const BODY: &[u8] = br#"{"id":"evt_test_webhook","object":"event"}"#;
const T: i64 = 1700000000;
const SIG: &str = "d95c6b7477fbd7e9f90b1b0ef5f9c7ac25abca5382460e0d988c2b2a5b71b990";

fn header() -> String {
    format!("t={T},v1={SIG}")
}

fn verify_with(secrets: &[&str], header: &str, body: &[u8], now: i64) -> Result<(), Rejection> {
    let v = Verifier::new(&config(Scheme::Stripe, secrets)).unwrap();
    check(&v, &headers(&[("Stripe-Signature", header)]), body, now).map(|_| ())
}

#[test]
fn published_vector_verifies_with_the_event_id() {
    let v = Verifier::new(&config(Scheme::Stripe, &[SECRET])).unwrap();
    let verified = check(&v, &headers(&[("Stripe-Signature", &header())]), BODY, T).unwrap();
    assert_eq!(verified.payload, BODY);
    assert_eq!(verified.event_id.as_deref(), Some("evt_test_webhook"));
}

#[test]
fn accepted_until_1700000300_rejected_at_1700000301() {
    for now in [T, T + 1, T + 299, T + 300] {
        assert_eq!(
            verify_with(&[SECRET], &header(), BODY, now),
            Ok(()),
            "{now}"
        );
    }
    assert_eq!(
        verify_with(&[SECRET], &header(), BODY, 1700000301),
        Err(Rejection::OutsideTolerance {
            skew_secs: 301,
            tolerance_secs: 300
        })
    );
    // The window is symmetric: a timestamp 301 s ahead of the clock is rejected too.
    assert!(matches!(
        verify_with(&[SECRET], &header(), BODY, T - 301),
        Err(Rejection::OutsideTolerance { .. })
    ));
}

#[test]
fn several_v1_entries_and_other_schemes() {
    let wrong = "0".repeat(64);
    for h in [
        format!("t={T},v1={wrong},v1={SIG}"),
        format!("t={T},v0={wrong},v1={SIG},x=1"),
        format!("t={T}, v1={SIG}"),
        format!("v1={SIG},t={T}"),
        format!("t={T},v1={}", SIG.to_uppercase()),
    ] {
        assert_eq!(verify_with(&[SECRET], &h, BODY, T), Ok(()), "{h}");
    }
    // Only a v0 entry (or a v0 carrying the right value) does not count.
    assert_eq!(
        verify_with(&[SECRET], &format!("t={T},v0={SIG}"), BODY, T),
        Err(Rejection::NoMatchingSignature)
    );
}

#[test]
fn rotation_and_wrong_secrets() {
    assert_eq!(
        verify_with(&["whsec_other", SECRET], &header(), BODY, T),
        Ok(())
    );
    assert_eq!(
        verify_with(&["whsec_other"], &header(), BODY, T),
        Err(Rejection::NoMatchingSignature)
    );
    assert!(matches!(
        Verifier::new(&config(Scheme::Stripe, &[""])),
        Err(ConfigError::EmptyKey { index: 0 })
    ));
    assert!(matches!(
        Verifier::new(&config(Scheme::Stripe, &[])),
        Err(ConfigError::NoKeys { .. })
    ));
}

#[test]
fn tampered_or_malformed_requests_are_rejected() {
    assert_eq!(
        verify_with(
            &[SECRET],
            &header(),
            br#"{"id":"evt_test_webhook","object":"event" }"#,
            T
        ),
        Err(Rejection::NoMatchingSignature)
    );
    let v = Verifier::new(&config(Scheme::Stripe, &[SECRET])).unwrap();
    assert_eq!(
        check(&v, &headers(&[]), BODY, T),
        Err(Rejection::MissingHeader("Stripe-Signature".into()))
    );
    let bad_ts = Err(Rejection::BadTimestamp {
        header: "Stripe-Signature",
    });
    assert_eq!(
        verify_with(&[SECRET], &format!("v1={SIG}"), BODY, T),
        bad_ts
    );
    assert_eq!(
        verify_with(&[SECRET], &format!("t=soon,v1={SIG}"), BODY, T),
        bad_ts
    );
    assert_eq!(
        verify_with(&[SECRET], &format!("t={T}"), BODY, T),
        Err(Rejection::NoMatchingSignature)
    );
    assert_eq!(
        verify_with(&[SECRET], &format!("t={T},v1={}", &SIG[..63]), BODY, T),
        Err(Rejection::NoMatchingSignature)
    );
}
