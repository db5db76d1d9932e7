//! `backstop bench hooks`: inbound callbacks (`POST /v1/hooks/{source}`, Standard Webhooks)
//! on loopback, in one process on a fresh SQLite file (`synchronous = FULL`).
//!
//! 1. latency at a fixed rate: `--rate` signed callbacks per second for `--seconds`, each sent
//!    at its scheduled instant (open loop, so a slow reply delays no later request), the
//!    latency counted from that instant to the whole reply read: an upper bound of the
//!    server's time from request received to reply sent, client included;
//! 2. sustained throughput: `--requests` signed callbacks as fast as `--concurrency`
//!    keep-alive connections take them (closed loop), each acknowledged only after its record
//!    and task are committed (group commit).
//!
//! Every callback carries a distinct event id, so each creates a task; the bench checks that
//! the ledger holds exactly one task per callback. Requests are signed before the clock
//! starts, so the client's signing is not measured.

use super::place::TempDir;
use super::sink::Loopback;
use crate::cli::HooksBenchArgs;
use crate::commands::print_json;
use anyhow::{Context, Result, bail};
use axum::body::Bytes;
use backstop::{Engine, KindConfig, Target, open_store};
use backstop_core::store::CountsParams;
use backstop_engine::CallbackSource;
use backstop_server::{AppState, Limits};
use backstop_webhooks::StandardWebhooks;
use backstop_webhooks::verify::{Scheme, Verifier, VerifierConfig};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The kind each callback becomes: a pull kind, so nothing processes it during the bench.
const KIND: &str = "bench.callback";
/// The source under test.
const SOURCE: &str = "bench";
/// Its Standard Webhooks secret.
const SECRET: &str = "whsec_YmVuY2gtY2FsbGJhY2stc2VjcmV0";

#[derive(Serialize)]
struct Report {
    scheme: &'static str,
    durability: &'static str,
    fixed_rate: FixedRate,
    sustained: Sustained,
}

#[derive(Serialize)]
struct FixedRate {
    target_per_s: f64,
    achieved_per_s: f64,
    requests: usize,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

#[derive(Serialize)]
struct Sustained {
    requests: usize,
    concurrency: usize,
    callbacks_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// One prepared request: signed headers and body.
struct Prepared {
    headers: HeaderMap,
    body: Bytes,
}

/// Runs the bench and prints its report.
pub async fn run(a: HooksBenchArgs) -> Result<()> {
    if a.rate == 0 || a.seconds == 0 || a.requests == 0 || a.concurrency == 0 {
        bail!("--rate, --seconds, --requests and --concurrency must be at least 1");
    }
    let dir = TempDir::new("bench-hooks")?;
    let r = measure(&dir.sqlite_url(), &a).await?;
    if a.json {
        return print_json(&r);
    }
    let f = &r.fixed_rate;
    let s = &r.sustained;
    println!("scheme: {}", r.scheme);
    println!("durability: {}", r.durability);
    println!(
        "fixed rate: {:.0}/s asked, {:.0}/s sent, {} requests  p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        f.target_per_s, f.achieved_per_s, f.requests, f.p50_ms, f.p90_ms, f.p99_ms, f.max_ms
    );
    println!(
        "sustained: {:.0} verified callbacks/s ({} requests, {} connections)  p50 {:.2} ms  p99 {:.2} ms",
        s.callbacks_per_s, s.requests, s.concurrency, s.p50_ms, s.p99_ms
    );
    Ok(())
}

async fn measure(url: &str, a: &HooksBenchArgs) -> Result<Report> {
    let metrics = backstop_server::install_recorder();
    let store = open_store(url).await?;
    let mut config = VerifierConfig::new(Scheme::StandardWebhooks);
    config.keys = vec![SECRET.into()];
    let source = CallbackSource::new(SOURCE, KIND, Verifier::new(&config)?);
    let engine = Engine::builder(store)
        .kind(KindConfig::new(KIND, Target::Pull))
        .source(source)
        .build()?;
    let (stop, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let runner = {
        let (engine, rx) = (engine.clone(), stop_rx.clone());
        tokio::spawn(async move { engine.run(stopped(rx)).await })
    };
    let state = AppState::new(
        engine.clone(),
        Limits::default(),
        Vec::new(),
        stop_rx,
        Some(metrics),
    );
    let api = Loopback::start(backstop_server::app(state)).await?;
    let hook = api.url(&format!("/v1/hooks/{SOURCE}"));
    let client = super::load::client()?;

    let fixed_n = a.rate * a.seconds;
    let fixed = prepare("rate", fixed_n)?;
    let fixed_rate = fixed_rate(&client, &hook, fixed, a.rate).await?;
    let sustained_bodies = prepare("max", a.requests)?;
    let sustained = sustained(&client, &hook, sustained_bodies, a.concurrency).await?;

    let want = fixed_n + a.requests;
    let counts = engine
        .store()
        .counts(CountsParams {
            kind: Some(KIND.to_string()),
        })
        .await?;
    if counts.pending as usize != want {
        bail!(
            "expected one task per callback ({want}), found {}",
            counts.pending
        );
    }
    let _ = stop.send(true);
    runner.await?;
    drop(client);
    api.stop().await?;
    Ok(Report {
        scheme: "standard-webhooks (HMAC-SHA256)",
        durability: "full (WAL, synchronous=FULL)",
        fixed_rate,
        sustained,
    })
}

/// `n` signed callbacks with distinct event ids, timestamped now.
fn prepare(prefix: &str, n: usize) -> Result<Arc<[Prepared]>> {
    let signer = StandardWebhooks::from_secret(SECRET).context("the bench secret")?;
    let ts = jiff::Timestamp::now().as_second();
    (0..n)
        .map(|i| {
            let id = format!("msg_{prefix}_{i:08}");
            let body = format!(
                r#"{{"type":"payment.succeeded","data":{{"order":"order-{i:08}","amount":1999,"currency":"USD"}}}}"#
            );
            let mut headers = HeaderMap::new();
            headers.insert("webhook-id", HeaderValue::from_str(&id)?);
            headers.insert("webhook-timestamp", HeaderValue::from(ts));
            headers.insert(
                "webhook-signature",
                HeaderValue::from_str(&signer.sign(&id, ts, body.as_bytes()))?,
            );
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(Prepared {
                headers,
                body: Bytes::from(body),
            })
        })
        .collect()
}

/// Sends one prepared callback; fails unless it is acknowledged (204).
async fn send(client: &reqwest::Client, url: &str, p: &Prepared) -> Result<()> {
    let response = client
        .post(url)
        .headers(p.headers.clone())
        .body(p.body.clone())
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let text = response.bytes().await?;
    if status.as_u16() != 204 {
        bail!(
            "POST {url}: {status}: {}",
            String::from_utf8_lossy(&text[..text.len().min(300)])
        );
    }
    Ok(())
}

/// Open loop: request `i` leaves at `t0 + i / rate`; its latency counts from then.
async fn fixed_rate(
    client: &reqwest::Client,
    url: &str,
    requests: Arc<[Prepared]>,
    rate: usize,
) -> Result<FixedRate> {
    let n = requests.len();
    let t0 = Instant::now() + Duration::from_millis(20);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let due = t0 + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        let (client, url, requests) = (client.clone(), url.to_string(), requests.clone());
        tasks.push(tokio::spawn(async move {
            send(&client, &url, &requests[i]).await?;
            Ok::<_, anyhow::Error>(due.elapsed().as_micros() as u64)
        }));
    }
    let sent_in = t0.elapsed().as_secs_f64();
    let mut latencies = Vec::with_capacity(n);
    for t in tasks {
        latencies.push(t.await??);
    }
    latencies.sort_unstable();
    Ok(FixedRate {
        target_per_s: rate as f64,
        achieved_per_s: n as f64 / sent_in,
        requests: n,
        p50_ms: percentile(&latencies, 0.50),
        p90_ms: percentile(&latencies, 0.90),
        p99_ms: percentile(&latencies, 0.99),
        max_ms: percentile(&latencies, 1.0),
    })
}

/// Closed loop: `concurrency` workers, each on its keep-alive connection, send the next
/// callback as soon as the previous one is acknowledged.
async fn sustained(
    client: &reqwest::Client,
    url: &str,
    requests: Arc<[Prepared]>,
    concurrency: usize,
) -> Result<Sustained> {
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..concurrency.min(requests.len()))
        .map(|_| {
            let (client, url, requests, next) = (
                client.clone(),
                url.to_string(),
                requests.clone(),
                next.clone(),
            );
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = requests.get(i) else {
                        return Ok::<_, anyhow::Error>(latencies);
                    };
                    let sent = Instant::now();
                    send(&client, &url, p).await?;
                    latencies.push(sent.elapsed().as_micros() as u64);
                }
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(requests.len());
    for w in workers {
        latencies.extend(w.await??);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(Sustained {
        requests: requests.len(),
        concurrency,
        callbacks_per_s: requests.len() as f64 / elapsed,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
    })
}

fn percentile(sorted_us: &[u64], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() - 1) as f64 * p).round() as usize;
    sorted_us[i] as f64 / 1000.0
}
