//! A deliberately flaky HTTP target for the README walkthrough. It verifies every delivery's
//! Standard Webhooks signature and answers:
//!
//! - `/sms`: 503 to the first two deliveries of each task, then 200 (retried to success);
//! - `/refund`: 400 to the first delivery of each task, then 200 (dead-lettered, then
//!   succeeds when retried by hand);
//! - `/coupon`: 410 Gone (the campaign ended: compensated).
//!
//! Run: `cargo run --release -p backstop --example flaky_target [ADDR]` (default 127.0.0.1:8080).

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use backstop_webhooks::StandardWebhooks;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[derive(Clone)]
struct Seen(Arc<Mutex<HashMap<String, usize>>>);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let app = Router::new()
        .fallback(deliver)
        .with_state(Seen(Arc::default()));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("flaky target listening on http://{addr}");
    axum::serve(listener, app).await?;
    Ok(())
}

async fn deliver(
    State(seen): State<Seen>,
    uri: Uri,
    h: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    let header = |n: &str| h.get(n).and_then(|v| v.to_str().ok());
    let id = header("webhook-id").unwrap_or("?").to_string();
    let signed = StandardWebhooks::from_secret(SECRET)
        .ok()
        .and_then(|s| {
            let now = jiff::Timestamp::now().as_second();
            s.verify(
                Some(&id),
                header("webhook-timestamp"),
                header("webhook-signature"),
                &body,
                now,
                300,
            )
            .ok()
        })
        .is_some();
    let n = {
        let mut seen = seen.0.lock().unwrap();
        let n = seen.entry(format!("{}{id}", uri.path())).or_default();
        *n += 1;
        *n
    };
    let (status, text) = match (uri.path(), n) {
        ("/sms", 1 | 2) => (StatusCode::SERVICE_UNAVAILABLE, "SMS gateway busy"),
        ("/sms", _) => (StatusCode::OK, "sent"),
        ("/refund", 1) => (StatusCode::BAD_REQUEST, "account frozen"),
        ("/refund", _) => (StatusCode::OK, "refunded"),
        ("/coupon", _) => (StatusCode::GONE, "campaign ended"),
        _ => (StatusCode::NOT_FOUND, "no such route"),
    };
    println!(
        "{} {} key={} attempt={} signature={} -> {}",
        uri.path(),
        id,
        header("backstop-key").unwrap_or("?"),
        header("backstop-attempt").unwrap_or("?"),
        if signed { "ok" } else { "BAD" },
        status.as_u16()
    );
    (status, text)
}
