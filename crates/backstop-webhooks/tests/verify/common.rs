//! What every scheme shares: names, configuration checks, replies.

use crate::support::config;
use backstop_webhooks::verify::{
    ConfigError, KeyFile, Rejection, Scheme, UnknownScheme, Verifier, VerifierConfig,
};
use http::StatusCode;

#[test]
fn scheme_names_round_trip() {
    for scheme in Scheme::ALL {
        assert_eq!(scheme.name().parse::<Scheme>(), Ok(scheme));
        assert_eq!(scheme.to_string(), scheme.name());
    }
    assert_eq!("wechatpay-v3".parse::<Scheme>(), Ok(Scheme::WechatpayV3));
    let err = "github".parse::<Scheme>().unwrap_err();
    assert_eq!(err, UnknownScheme("github".into()));
    assert!(err.to_string().contains("alipay-rsa2"));
}

#[test]
fn verifier_is_shareable_across_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Verifier>();
}

#[test]
fn options_a_scheme_does_not_use_are_refused() {
    let mut cfg = config(Scheme::Stripe, &["whsec_x"]);
    cfg.signature_header = Some("X-Signature".into());
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::UnusedOption {
            option: "signature_header",
            ..
        })
    ));
    let mut cfg = config(
        Scheme::StandardWebhooks,
        &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    );
    cfg.key_files = vec![KeyFile::path("/etc/x.pem")];
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::UnusedOption {
            option: "key_files",
            ..
        })
    ));
    let mut cfg = config(Scheme::Stripe, &["whsec_x"]);
    cfg.key_locator = Some("form:id".parse().unwrap());
    assert!(matches!(
        Verifier::new(&cfg),
        Err(ConfigError::LocatorNotApplicable { .. })
    ));
}

#[test]
fn secrets_stay_out_of_debug_output() {
    let cfg = config(Scheme::Stripe, &["whsec_very_secret"]);
    assert!(!format!("{cfg:?}").contains("very_secret"));
    let v = Verifier::new(&cfg).unwrap();
    assert!(!format!("{v:?}").contains("very_secret"));
    assert_eq!(VerifierConfig::new(Scheme::Stripe).tolerance.as_secs(), 300);
}

#[test]
fn success_replies() {
    for scheme in [
        Scheme::StandardWebhooks,
        Scheme::Stripe,
        Scheme::HmacSha256,
        Scheme::WechatpayV3,
    ] {
        let reply = scheme.success_reply();
        assert_eq!(reply.status, StatusCode::NO_CONTENT, "{scheme}");
        assert_eq!(reply.content_type, None);
        assert!(reply.body.is_empty());
    }
    let alipay = Scheme::AlipayRsa2.success_reply();
    assert_eq!(
        (alipay.status, alipay.body.as_slice()),
        (StatusCode::OK, &b"success"[..])
    );
}

#[test]
fn failure_replies_are_problem_details_for_the_hmac_schemes() {
    for scheme in [Scheme::StandardWebhooks, Scheme::Stripe, Scheme::HmacSha256] {
        let reply = scheme.rejection_reply(&Rejection::MissingHeader("webhook-id".into()));
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.content_type, Some("application/problem+json"));
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "type": "urn:backstop:problem:unauthorized",
                "title": "Unauthorized",
                "status": 401,
                "detail": "missing the webhook-id header",
            })
        );
    }
    let reply = Scheme::Stripe.rejection_reply(&Rejection::MalformedBody("x".into()));
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    // A server-side failure after verification, in the provider's format.
    let reply = Scheme::WechatpayV3.failure_reply(StatusCode::SERVICE_UNAVAILABLE, "ledger down");
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap(),
        serde_json::json!({"code": "FAIL", "message": "ledger down"})
    );
    let reply = Scheme::HmacSha256.failure_reply(StatusCode::SERVICE_UNAVAILABLE, "ledger down");
    assert!(
        String::from_utf8(reply.body)
            .unwrap()
            .contains("callback-failed")
    );
}
