//! `hmac-sha256`: GitHub's published example, hex and base64, a custom header, rotation.

use crate::support::{check, config, headers};
use backstop_webhooks::verify::{ConfigError, Rejection, Scheme, Verifier, VerifierConfig};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

// GitHub's documented example for `X-Hub-Signature-256`.
const SECRET: &str = "It's a Secret to Everybody";
const BODY: &[u8] = b"Hello, World!";
const HEX: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

fn with_header(header: &str) -> VerifierConfig {
    let mut cfg = config(Scheme::HmacSha256, &[SECRET]);
    cfg.signature_header = Some(header.to_string());
    cfg
}

fn base64_sig() -> String {
    let bytes: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&HEX[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    STANDARD.encode(bytes)
}

#[test]
fn github_example_in_every_accepted_format() {
    let github = Verifier::new(&with_header("X-Hub-Signature-256")).unwrap();
    let h = headers(&[("X-Hub-Signature-256", &format!("sha256={HEX}"))]);
    let verified = check(&github, &h, BODY, 0).unwrap();
    assert_eq!(verified.payload, BODY);
    assert_eq!(
        verified.event_id, None,
        "the generic scheme defines no event id"
    );

    let default = Verifier::new(&config(Scheme::HmacSha256, &[SECRET])).unwrap();
    for value in [
        HEX.to_string(),
        HEX.to_uppercase(),
        format!("sha256={HEX}"),
        base64_sig(),
        format!("sha256={}", base64_sig()),
    ] {
        let h = headers(&[("X-Signature", &value)]);
        assert!(check(&default, &h, BODY, 0).is_ok(), "{value}");
    }
}

#[test]
fn wrong_missing_or_malformed_signatures() {
    let v = Verifier::new(&config(Scheme::HmacSha256, &[SECRET])).unwrap();
    let h = headers(&[("X-Signature", HEX)]);
    assert_eq!(
        check(&v, &h, b"Hello, World?", 0),
        Err(Rejection::NoMatchingSignature)
    );
    assert_eq!(
        check(&v, &headers(&[("X-Other", HEX)]), BODY, 0),
        Err(Rejection::MissingHeader("X-Signature".into()))
    );
    for malformed in ["sha256=", "xyz", &HEX[..62]] {
        assert!(
            matches!(
                check(&v, &headers(&[("X-Signature", malformed)]), BODY, 0),
                Err(Rejection::MalformedHeader { .. })
            ),
            "{malformed}"
        );
    }
    let wrong = Verifier::new(&config(Scheme::HmacSha256, &["another secret"])).unwrap();
    assert_eq!(
        check(&wrong, &h, BODY, 0),
        Err(Rejection::NoMatchingSignature)
    );
    let rotated = Verifier::new(&config(Scheme::HmacSha256, &["another secret", SECRET])).unwrap();
    assert!(check(&rotated, &h, BODY, 0).is_ok());
}

#[test]
fn configuration_errors() {
    assert!(matches!(
        Verifier::new(&with_header("bad header")),
        Err(ConfigError::InvalidHeaderName(_))
    ));
    assert!(matches!(
        Verifier::new(&config(Scheme::HmacSha256, &[""])),
        Err(ConfigError::EmptyKey { index: 0 })
    ));
}

#[test]
fn key_locators_on_headers_and_form_bodies() {
    let mut cfg = with_header("X-Hub-Signature-256");
    cfg.key_locator = Some("header:X-GitHub-Delivery".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    let h = headers(&[
        ("X-Hub-Signature-256", &format!("sha256={HEX}")),
        ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
    ]);
    assert_eq!(
        check(&v, &h, BODY, 0).unwrap().event_id.as_deref(),
        Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
    );

    let form_body = b"event=paid&id=ord%2D7";
    let tag = aws_lc_rs::hmac::sign(
        &aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, SECRET.as_bytes()),
        form_body,
    );
    let mut cfg = config(Scheme::HmacSha256, &[SECRET]);
    cfg.key_locator = Some("form:id".parse().unwrap());
    let v = Verifier::new(&cfg).unwrap();
    let h = headers(&[("X-Signature", &STANDARD.encode(tag.as_ref()))]);
    assert_eq!(
        check(&v, &h, form_body, 0).unwrap().event_id.as_deref(),
        Some("ord-7")
    );
}
