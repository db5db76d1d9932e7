//! The receiving target: an HTTP server on loopback that appends every delivery to a file and
//! fsyncs it before it answers, so the verdict reads what the target really received, even
//! across a crash of the harness.
//!
//! Requests that arrive together share one `fdatasync` (a writer task takes every line that is
//! waiting, writes and syncs them, then releases their answers): each delivery is still on disk
//! before its answer leaves.

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// How the target answers, by phase: misbehaving (slow or failing) until a moment, then well.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// 200 after a few milliseconds, always.
    Healthy,
    /// Every answer is delayed by `delay` (past the kind's timeout) until `until_ms`.
    Slow { delay: Duration, until_ms: u64 },
    /// 503 until `until_ms`.
    Failing { until_ms: u64 },
}

/// One line of the delivery log.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// When the target logged it (Unix milliseconds).
    pub at_ms: u64,
    /// The task id (`webhook-id`), which is also its idempotency key.
    pub id: String,
    /// The business key (`backstop-key`).
    pub key: String,
    /// `backstop-attempt`.
    pub attempt: u32,
    /// The status the target answered (or meant to: a slow answer may arrive after the
    /// timeout).
    pub status: u16,
}

impl Delivery {
    fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\n",
            self.at_ms, self.id, self.key, self.attempt, self.status
        )
    }

    fn parse(line: &str) -> Option<Delivery> {
        let mut f = line.split('\t');
        Some(Delivery {
            at_ms: f.next()?.parse().ok()?,
            id: f.next()?.to_string(),
            key: f.next()?.to_string(),
            attempt: f.next()?.parse().ok()?,
            status: f.next()?.parse().ok()?,
        })
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[derive(Clone)]
struct Shared {
    behaviour: Arc<std::sync::Mutex<Behaviour>>,
    log: mpsc::UnboundedSender<(Delivery, oneshot::Sender<()>)>,
    /// Keys that got a 2xx, for the harness's progress check (the verdict reads the file).
    delivered: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// A running target.
pub struct Target {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The delivery log.
    pub path: PathBuf,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Target {
    /// Starts a target that logs to `path`.
    pub async fn start(path: &Path) -> anyhow::Result<Target> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open the delivery log {}", path.display()))?;
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || write_loop(file, rx));
        let shared = Shared {
            behaviour: Arc::new(std::sync::Mutex::new(Behaviour::Healthy)),
            log: tx,
            delivered: Arc::default(),
        };
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Target {
            base: format!("http://{addr}"),
            path: path.to_path_buf(),
            shared,
            server,
        })
    }

    /// Answers as `behaviour` says from now on.
    pub fn behave(&self, behaviour: Behaviour) {
        *self.shared.behaviour.lock().expect("lock") = behaviour;
    }

    /// Whether `key` has had a 2xx answer.
    pub fn has(&self, key: &str) -> bool {
        self.shared.delivered.lock().expect("lock").contains(key)
    }

    /// Stops answering.
    pub fn stop(self) {
        self.server.abort();
    }
}

/// Reads a delivery log back (lines that do not parse, such as a torn last line, are
/// skipped: the target answers only after a whole line is synced).
pub fn read_log(path: &Path) -> anyhow::Result<Vec<Delivery>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the delivery log {}", path.display()))?;
    Ok(text.lines().filter_map(Delivery::parse).collect())
}

/// Writes waiting lines, one fdatasync for all of them, then releases their answers.
fn write_loop(
    mut file: std::fs::File,
    mut rx: mpsc::UnboundedReceiver<(Delivery, oneshot::Sender<()>)>,
) {
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let text: String = batch.iter().map(|(d, _)| d.line()).collect();
        // A target that cannot log must not answer: without the answer backstop retries.
        if file.write_all(text.as_bytes()).is_err() || file.sync_data().is_err() {
            eprintln!("chaos target: cannot write the delivery log; not answering");
            continue;
        }
        for (_, done) in batch {
            let _ = done.send(());
        }
    }
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

async fn handle(State(s): State<Shared>, headers: HeaderMap) -> StatusCode {
    let now = now_ms();
    let behaviour = *s.behaviour.lock().expect("lock");
    let (status, delay) = match behaviour {
        Behaviour::Slow { delay, until_ms } if now < until_ms => (200, delay),
        Behaviour::Failing { until_ms } if now < until_ms => (503, Duration::ZERO),
        _ => (200, Duration::from_millis(rand::random_range(2..15))),
    };
    let id = header(&headers, "webhook-id");
    let delivery = Delivery {
        at_ms: now,
        id: if id.is_empty() {
            header(&headers, "idempotency-key")
        } else {
            id
        },
        key: header(&headers, "backstop-key"),
        attempt: header(&headers, "backstop-attempt").parse().unwrap_or(0),
        status,
    };
    let key = delivery.key.clone();
    let (done, logged) = oneshot::channel();
    if s.log.send((delivery, done)).is_err() || logged.await.is_err() {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    if status == 200 {
        s.delivered.lock().expect("lock").insert(key);
    }
    tokio::time::sleep(delay).await;
    StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
}
