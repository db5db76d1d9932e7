//! `DeliveryClient` against a real HTTP server on loopback.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use backstop_core::{AttemptReport, Outcome};
use backstop_webhooks::{Delivery, DeliveryClient, StandardWebhooks, Url};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TASK_ID: &str = "0190b5e4-7c1a-7000-8000-000000000001";

/// What the test server saw.
#[derive(Default)]
struct Seen {
    request: Mutex<Option<(HeaderMap, Bytes)>>,
    target_hits: AtomicUsize,
}

/// Starts the test server and returns its base URL and what it records.
async fn serve() -> (String, Arc<Seen>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let redirect_to = format!("{base}/target");
    let app = Router::new()
        .route("/echo", post(echo))
        .route("/ok", post(|| async { StatusCode::OK }))
        .route(
            "/busy",
            post(|| async { (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "7")]) }),
        )
        .route(
            "/bad",
            post(|| async { (StatusCode::BAD_REQUEST, "amount must be positive") }),
        )
        .route("/gone", post(|| async { StatusCode::GONE }))
        .route(
            "/skip",
            post(|| async { (StatusCode::OK, [("backstop-outcome", "skip")]) }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                StatusCode::OK
            }),
        )
        .route(
            "/redirect",
            post(move || async move { (StatusCode::FOUND, [(header::LOCATION, redirect_to)]) }),
        )
        .route("/target", post(target).get(target))
        .with_state(seen.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

async fn echo(State(seen): State<Arc<Seen>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    *seen.request.lock().unwrap() = Some((headers, body));
    StatusCode::OK
}

async fn target(State(seen): State<Arc<Seen>>) -> impl IntoResponse {
    seen.target_hits.fetch_add(1, Ordering::SeqCst);
    StatusCode::OK
}

/// A delivery to `url` with ordinary defaults.
fn delivery<'a>(url: &'a Url, body: &'a [u8]) -> Delivery<'a> {
    Delivery {
        url,
        signer: None,
        task_id: TASK_ID,
        kind: "payments.capture",
        key: "order-42",
        attempt: 3,
        traceparent: None,
        body,
        timeout: Duration::from_secs(5),
    }
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

async fn deliver_to(base: &str, path: &str) -> AttemptReport {
    let url: Url = format!("{base}{path}").parse().unwrap();
    let client = DeliveryClient::new().unwrap();
    client.deliver(&delivery(&url, b"{}"), now()).await
}

#[tokio::test]
async fn sends_exact_body_and_verifiable_headers() {
    let (base, seen) = serve().await;
    let url: Url = format!("{base}/echo").parse().unwrap();
    let signer = StandardWebhooks::from_secret(SECRET).unwrap();
    let body = br#"{"a": 1,  "b":[ ]}"#;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let d = Delivery {
        signer: Some(&signer),
        traceparent: Some(traceparent),
        ..delivery(&url, body)
    };
    let sent_at = now();
    let report = DeliveryClient::new().unwrap().deliver(&d, sent_at).await;
    assert_eq!(report.outcome, Outcome::Success);

    let (headers, received) = seen.request.lock().unwrap().take().unwrap();
    assert_eq!(&received[..], body);
    let h = |name: &str| headers.get(name).map(|v| v.to_str().unwrap());
    assert_eq!(h("content-type"), Some("application/json"));
    assert_eq!(h("webhook-id"), Some(TASK_ID));
    assert_eq!(h("idempotency-key"), Some(TASK_ID));
    assert_eq!(h("backstop-kind"), Some("payments.capture"));
    assert_eq!(h("backstop-key"), Some("order-42"));
    assert_eq!(h("backstop-attempt"), Some("3"));
    assert_eq!(h("traceparent"), Some(traceparent));
    assert!(h("user-agent").unwrap().starts_with("backstop/"));
    let ts = sent_at.as_second().to_string();
    assert_eq!(h("webhook-timestamp"), Some(ts.as_str()));
    let verified = signer.verify(
        h("webhook-id"),
        h("webhook-timestamp"),
        h("webhook-signature"),
        &received,
        sent_at.as_second(),
        300,
    );
    assert_eq!(verified, Ok(()));
}

#[tokio::test]
async fn unsigned_delivery_has_no_signature_and_encodes_odd_keys() {
    let (base, seen) = serve().await;
    let url: Url = format!("{base}/echo").parse().unwrap();
    let d = Delivery {
        key: "clé\n1",
        ..delivery(&url, b"{}")
    };
    let report = DeliveryClient::new().unwrap().deliver(&d, now()).await;
    assert_eq!(report.outcome, Outcome::Success);
    let (headers, _) = seen.request.lock().unwrap().take().unwrap();
    assert!(headers.get("webhook-signature").is_none());
    assert!(headers.get("traceparent").is_none());
    assert_eq!(headers["backstop-key"], "cl%C3%A9%0A1");
}

#[tokio::test]
async fn responses_are_classified() {
    let (base, _) = serve().await;

    let ok = deliver_to(&base, "/ok").await;
    assert_eq!(ok.outcome, Outcome::Success);
    assert_eq!(ok.http_status, Some(200));

    let busy = deliver_to(&base, "/busy").await;
    assert_eq!(busy.http_status, Some(503));
    assert!(
        matches!(busy.outcome, Outcome::Retry { after: Some(a), .. } if a == Duration::from_secs(7)),
        "{busy:?}"
    );

    let bad = deliver_to(&base, "/bad").await;
    assert_eq!(bad.http_status, Some(400));
    match bad.outcome {
        Outcome::Fail { error } => assert!(error.contains("amount must be positive"), "{error}"),
        other => panic!("expected Fail, got {other:?}"),
    }

    let gone = deliver_to(&base, "/gone").await;
    assert_eq!(gone.http_status, Some(410));
    assert!(matches!(gone.outcome, Outcome::Skip { .. }), "{gone:?}");

    let skip = deliver_to(&base, "/skip").await;
    assert_eq!(skip.http_status, Some(200));
    assert!(matches!(skip.outcome, Outcome::Skip { .. }), "{skip:?}");
}

#[tokio::test]
async fn slow_target_times_out_as_retry() {
    let (base, _) = serve().await;
    let url: Url = format!("{base}/slow").parse().unwrap();
    let d = Delivery {
        timeout: Duration::from_millis(500),
        ..delivery(&url, b"{}")
    };
    let started = Instant::now();
    let report = DeliveryClient::new().unwrap().deliver(&d, now()).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(report.http_status, None);
    match report.outcome {
        Outcome::Retry { error, .. } => assert!(error.starts_with("timed out"), "{error}"),
        other => panic!("expected Retry, got {other:?}"),
    }
}

#[tokio::test]
async fn redirects_fail_and_are_not_followed() {
    let (base, seen) = serve().await;
    let report = deliver_to(&base, "/redirect").await;
    assert_eq!(report.http_status, Some(302));
    assert!(matches!(report.outcome, Outcome::Fail { .. }), "{report:?}");
    // Give a wrongly followed redirect time to land before checking it never did.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(seen.target_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn refused_connection_is_retried() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url: Url = format!("http://{}/", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    drop(listener);
    let report = DeliveryClient::new()
        .unwrap()
        .deliver(&delivery(&url, b"{}"), now())
        .await;
    assert_eq!(report.http_status, None);
    match report.outcome {
        Outcome::Retry { error, .. } => {
            assert!(error.starts_with("connection failed"), "{error}");
            assert!(!error.contains("127.0.0.1"), "URL leaked: {error}");
        }
        other => panic!("expected Retry, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unsupported_url_is_permanent() {
    let url: Url = "ftp://127.0.0.1/x".parse().unwrap();
    let report = DeliveryClient::new()
        .unwrap()
        .deliver(&delivery(&url, b"{}"), now())
        .await;
    assert!(matches!(report.outcome, Outcome::Fail { .. }), "{report:?}");
}
