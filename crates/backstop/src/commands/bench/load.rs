//! The load generator of `backstop bench http`: one keep-alive HTTP client POSTing prepared
//! bodies with a fixed number of requests in flight, timing each request.

use anyhow::{Context, Result, bail};
use axum::body::Bytes;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A client built like the engine's delivery client: keep-alive pool, no proxy, no
/// redirects.
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("backstop-bench/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("cannot build the HTTP client")
}

/// What one run of requests measured.
#[derive(Serialize)]
pub struct Measured {
    pub requests: usize,
    pub requests_per_s: f64,
    /// Tasks carried per second (requests/s times tasks per request).
    pub tasks_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// POSTs every body of `bodies` to `url` as JSON, `concurrency` requests at a time (each
/// worker reuses its keep-alive connection), and fails unless every answer is `expect`.
/// `tasks_per_body` converts requests/s into tasks/s.
pub async fn post_all(
    client: &reqwest::Client,
    url: &str,
    bodies: Arc<[Bytes]>,
    concurrency: usize,
    expect: StatusCode,
    tasks_per_body: usize,
) -> Result<Measured> {
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..concurrency.min(bodies.len()))
        .map(|_| {
            let (client, url, bodies, next) = (
                client.clone(),
                url.to_string(),
                bodies.clone(),
                next.clone(),
            );
            tokio::spawn(async move {
                let mut latencies_us = Vec::with_capacity(bodies.len() / concurrency + 1);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(i) else {
                        return Ok::<_, anyhow::Error>(latencies_us);
                    };
                    let sent = Instant::now();
                    let response = client
                        .post(&url)
                        .header(CONTENT_TYPE, "application/json")
                        .body(body.clone())
                        .send()
                        .await
                        .with_context(|| format!("POST {url}"))?;
                    let status = response.status();
                    // Read the whole answer, so the connection goes back to the pool.
                    let text = response.bytes().await?;
                    if status != expect {
                        bail!(
                            "POST {url}: {status}: {}",
                            String::from_utf8_lossy(&text[..text.len().min(300)])
                        );
                    }
                    latencies_us.push(sent.elapsed().as_micros() as u64);
                }
            })
        })
        .collect();
    let mut latencies_us = Vec::with_capacity(bodies.len());
    for w in workers {
        latencies_us.extend(w.await??);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    latencies_us.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies_us.len() - 1) as f64 * p).round() as usize;
        latencies_us[i] as f64 / 1000.0
    };
    let requests_per_s = bodies.len() as f64 / elapsed;
    Ok(Measured {
        requests: bodies.len(),
        requests_per_s,
        tasks_per_s: requests_per_s * tasks_per_body as f64,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
    })
}
