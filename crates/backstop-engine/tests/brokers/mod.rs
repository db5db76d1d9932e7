//! What the broker suites share: the test server from an environment variable (or a visible
//! `skipped:` line), names no other run uses, a fresh SQLite ledger, quick engine options, an
//! engine run in the background, and waiting for a bridge to reach a state.

#![allow(dead_code)] // Each test file uses its own part.

pub mod kafka;

use backstop_core::Store;
use backstop_core::store::{CountsParams, StatusCounts};
use backstop_engine::{BridgeView, Engine, EngineOptions, EnqueueRequest};
use backstop_store_sqlite::SqliteStore;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The URL in `var`, or `None` after saying `skipped:` on stderr.
pub fn server(var: &str) -> Option<String> {
    let u = std::env::var(var).ok().filter(|u| !u.is_empty());
    if u.is_none() {
        eprintln!("skipped: {var} is not set");
    }
    u
}

/// A queue, list or stream name no other test or run uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}.{}", uuid::Uuid::now_v7().simple())
}

/// A fresh SQLite ledger in `dir`.
pub async fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("t.db").display().to_string();
    Arc::new(SqliteStore::open(&path).await.unwrap())
}

/// Enqueues `n` tasks of `kind` keyed `O-0` … with a JSON body naming the key; their ids.
pub async fn enqueue_numbered(engine: &Engine, kind: &str, n: usize) -> HashSet<String> {
    let reqs = (0..n)
        .map(|i| EnqueueRequest {
            kind: kind.into(),
            key: format!("O-{i}"),
            payload: format!(r#"{{"order_id":"O-{i}"}}"#).into_bytes(),
            ..Default::default()
        })
        .collect();
    engine
        .enqueue_many(reqs)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap().id.to_string())
        .collect()
}

/// The ledger's counts by status of one kind.
pub async fn counts(store: &Arc<dyn Store>, kind: &str) -> StatusCounts {
    store
        .counts(CountsParams {
            kind: Some(kind.into()),
        })
        .await
        .unwrap()
}

/// A kind published to `destination` on `url` that retries every `retry` (100 attempts,
/// 64 in flight, `timeout` a publish): for drills where the broker goes away mid-stream.
pub fn patient_broker_kind(
    name: &str,
    url: &str,
    destination: backstop_core::broker::Destination,
    retry: Duration,
    timeout: Duration,
) -> backstop_core::KindConfig {
    use backstop_core::broker::{BrokerTarget, BrokerUrl};
    let mut k = backstop_core::KindConfig::new(
        name,
        backstop_core::Target::Broker(BrokerTarget {
            broker: BrokerUrl::new(url),
            destination,
        }),
    );
    k.max_attempts = 100;
    k.retry = backstop_core::RetryPolicy::Schedule(vec![retry]);
    k.timeout = timeout;
    k.concurrency = 64;
    k
}

/// The engine of a restart drill: a bridge `in` taking `source` on `url` into the pull kind
/// `order.in` (keys from `key`, 32 at a time), beside the kind `out` publishing back.
pub fn drill_engine(
    store: &Arc<dyn Store>,
    url: &str,
    source: backstop_core::broker::BridgeSource,
    key: backstop_core::broker::KeySource,
    out: backstop_core::KindConfig,
) -> Engine {
    Engine::builder(store.clone())
        .kind(backstop_core::KindConfig::new(
            "order.in",
            backstop_core::Target::Pull,
        ))
        .kind(out)
        .bridge(backstop_core::broker::BridgeConfig {
            name: "in".into(),
            broker: backstop_core::broker::BrokerUrl::new(url),
            source,
            kind: "order.in".into(),
            key,
            prefetch: 32,
            dead_letters: false,
            max_message: 1 << 16,
        })
        .options(options())
        .build()
        .unwrap()
}

/// Quick polls and beats, so tests see changes at once.
pub fn options() -> EngineOptions {
    EngineOptions {
        poll_interval: Duration::from_millis(20),
        bridge_beat: Duration::from_millis(100),
        ..Default::default()
    }
}

/// An engine running in the background until [`Running::stop`].
pub struct Running(
    Option<tokio::sync::oneshot::Sender<()>>,
    tokio::task::JoinHandle<()>,
);

impl Running {
    pub fn start(engine: &Engine) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let e = engine.clone();
        let run = tokio::spawn(async move {
            e.run(async {
                let _ = stopped.await;
            })
            .await
        });
        Running(Some(stop), run)
    }

    /// Stops the engine and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.0.take().unwrap().send(());
        let _ = (&mut self.1).await;
    }
}

/// Waits (20 s at most) until the engine's bridges satisfy `f`; returns the first bridge.
pub async fn until<F: Fn(&[BridgeView]) -> bool>(engine: &Engine, what: &str, f: F) -> BridgeView {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let views = engine.bridges();
        if f(&views) {
            return views[0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (`limit` at most) until `done` says so.
pub async fn wait(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An alert sink on loopback taking `events`, aggregating per 100 ms: the options to give the
/// engine, and every alert group it received (`{"event": …, "count": …, …}`).
pub async fn alert_sink(
    events: Vec<backstop_engine::alerts::AlertName>,
) -> (
    backstop_engine::alerts::AlertOptions,
    Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    use axum::routing::post;
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let g = got.clone();
    let app = axum::Router::new().route(
        "/alerts",
        post(move |body: axum::body::Bytes| {
            let g = g.clone();
            async move {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let mut g = g.lock().unwrap();
                g.extend(v["alerts"].as_array().cloned().unwrap_or_default());
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alerts", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let options = backstop_engine::alerts::AlertOptions {
        sinks: vec![backstop_engine::alerts::AlertSink {
            name: "ops".into(),
            url,
            format: backstop_engine::alerts::AlertFormat::Generic,
            events,
            secret: None,
        }],
        window: Duration::from_millis(100),
        failure_rate: None,
    };
    (options, got)
}
