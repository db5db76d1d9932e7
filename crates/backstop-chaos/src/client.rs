//! The enqueuing client: `POST /v1/tasks` for each business key, paced over a span of time,
//! retried (on another process, after a pause) until a 2xx acknowledges it. A connection
//! refused, a reset, a timeout or a 5xx is retried; a repeated enqueue of the same key and
//! payload is idempotent, so a retry after a lost answer returns the task already made.

use crate::fleet::KIND;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the client got, once it is done.
#[derive(Debug, Default)]
pub struct Acks {
    /// Business key → the task id its 2xx answer named.
    pub ids: HashMap<String, String>,
    /// Business key → when its 2xx came (Unix ms).
    pub acked_at: HashMap<String, u64>,
    /// Keys that never got a 2xx before the client's deadline.
    pub unacknowledged: Vec<String>,
    /// Keys refused for good (4xx other than 408/425/429): a harness or server bug.
    pub refused: Vec<(String, String)>,
    /// Answers that were not 2xx, and requests that got no answer.
    pub failed_tries: u64,
}

/// The business key of task `i`.
pub fn key(i: usize) -> String {
    format!("k-{i}")
}

/// Enqueues keys `0..tasks` over `span` (evenly paced), with `workers` requests in flight,
/// against `bases` (round-robin, moving on after a failure); gives up on a key at `deadline`.
/// Every try that fails is counted in `failed`.
pub async fn enqueue_all(
    http: reqwest::Client,
    bases: Vec<String>,
    tasks: usize,
    span: Duration,
    workers: usize,
    deadline: Instant,
    failed: Arc<AtomicU64>,
) -> Acks {
    let next = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let mut handles = Vec::new();
    for w in 0..workers {
        let (http, bases, next, failed) =
            (http.clone(), bases.clone(), next.clone(), failed.clone());
        handles.push(tokio::spawn(async move {
            let mut mine = Acks::default();
            let mut at = w;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    break;
                }
                // Pace: task i is due at i/tasks of the span.
                let due = began + span.mul_f64(i as f64 / tasks as f64);
                tokio::time::sleep_until(due.into()).await;
                let k = key(i);
                match one(&http, &bases, &mut at, &k, i, deadline, &failed).await {
                    Outcome::Acked(id) => {
                        mine.acked_at.insert(k.clone(), crate::target::now_ms());
                        mine.ids.insert(k, id);
                    }
                    Outcome::Refused(why) => mine.refused.push((k, why)),
                    Outcome::GaveUp => mine.unacknowledged.push(k),
                }
            }
            mine
        }));
    }
    let mut all = Acks::default();
    for h in handles {
        if let Ok(part) = h.await {
            all.ids.extend(part.ids);
            all.acked_at.extend(part.acked_at);
            all.unacknowledged.extend(part.unacknowledged);
            all.refused.extend(part.refused);
        }
    }
    all.failed_tries = failed.load(Ordering::Relaxed);
    all
}

enum Outcome {
    Acked(String),
    Refused(String),
    GaveUp,
}

/// Retries one key until a 2xx, a permanent refusal, or the deadline.
async fn one(
    http: &reqwest::Client,
    bases: &[String],
    at: &mut usize,
    key: &str,
    i: usize,
    deadline: Instant,
    failed: &AtomicU64,
) -> Outcome {
    let body = serde_json::json!({"kind": KIND, "key": key, "payload": {"n": i}}).to_string();
    loop {
        let base = &bases[*at % bases.len()];
        let sent = http
            .post(format!("{base}/v1/tasks"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                let text = r.text().await.unwrap_or_default();
                if let Some(id) = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_string))
                {
                    return Outcome::Acked(id);
                }
                // A 2xx without a readable id: the answer was cut; ask again.
            }
            Ok(r) if permanent(r.status().as_u16()) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                return Outcome::Refused(format!("{status}: {text}"));
            }
            _ => {}
        }
        failed.fetch_add(1, Ordering::Relaxed);
        *at += 1;
        if Instant::now() > deadline {
            return Outcome::GaveUp;
        }
        tokio::time::sleep(Duration::from_millis(rand::random_range(30..120))).await;
    }
}

/// A 4xx that repeating cannot change.
fn permanent(status: u16) -> bool {
    (400..500).contains(&status) && !matches!(status, 408 | 425 | 429)
}
