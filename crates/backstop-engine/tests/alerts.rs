//! Alerts end to end: dead letters and a stalled reconciler reach a real HTTP sink on
//! loopback, aggregated per window, and none is lost while the sink is down.

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::{KindConfig, Outcome, Status, Store, Target};
use backstop_engine::alerts::{AlertFormat, AlertName, AlertOptions, AlertSink};
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, handler};
use backstop_store_sqlite::SqliteStore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A sink that answers 503 while `down`, and records every body it accepts.
async fn sink(down: Arc<AtomicBool>) -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = Router::new().route(
        "/alerts",
        post(move |body: Bytes| {
            let (down, got) = (down.clone(), g.clone());
            async move {
                if down.load(Ordering::SeqCst) {
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
                got.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                StatusCode::NO_CONTENT
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alerts", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, got)
}

fn count(got: &[serde_json::Value], event: &str) -> u64 {
    got.iter()
        .flat_map(|b| b["alerts"].as_array().unwrap().clone())
        .filter(|g| g["event"] == event)
        .map(|g| g["count"].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_reach_a_sink_that_was_down_aggregated_and_none_lost() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let down = Arc::new(AtomicBool::new(true));
    let (url, got) = sink(down.clone()).await;
    let mut bad = KindConfig::new("refund.create", Target::InProcess);
    bad.max_attempts = 1;
    let alerts = AlertOptions {
        sinks: vec![AlertSink {
            name: "ops".into(),
            url,
            format: AlertFormat::Generic,
            events: vec![AlertName::TaskFailed],
            secret: None,
        }],
        window: Duration::from_millis(300),
        failure_rate: None,
    };
    let engine = Engine::builder(store.clone())
        .kind(bad)
        .handler(
            "refund.create",
            handler(|_| async { Outcome::fail("HTTP 400: account frozen") }),
        )
        .alerts(alerts)
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        })
        .build()
        .unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    let reqs = (0..12)
        .map(|i| EnqueueRequest {
            kind: "refund.create".into(),
            key: format!("r{i}"),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .collect();
    engine.enqueue_many(reqs).await.unwrap();
    // Down for a while: the alert tasks retry (2 s backoff), nothing reaches the sink.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(got.lock().unwrap().is_empty());
    let alert_kind = "backstop.alert.ops";
    let waiting = store.counts(Some(alert_kind)).await.unwrap();
    assert!(waiting.total() >= 1, "alert messages are ledger tasks");
    assert_eq!(waiting.succeeded, 0);
    down.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(&got.lock().unwrap(), "task.failed") < 12 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = got.lock().unwrap().clone();
    assert_eq!(
        count(&got, "task.failed"),
        12,
        "every dead letter alerted: {got:#?}"
    );
    assert!(
        got.len() <= 3,
        "aggregated per window, not one per task: {}",
        got.len()
    );
    let group = &got[0]["alerts"][0];
    assert_eq!(group["kind"], "refund.create");
    assert!(
        group["tasks"].as_array().unwrap().len() <= 5,
        "the first few ids only"
    );
    assert!(got[0]["text"].as_str().unwrap().contains("task.failed"));
    let c = store.counts(Some(alert_kind)).await.unwrap();
    assert_eq!(c.succeeded, got.len() as u64, "each message delivered once");
    let retried = store
        .list(backstop_core::store::ListParams {
            kind: Some(alert_kind.into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        retried.iter().any(|t| t.attempts > 1),
        "the sink's 503s were retried"
    );
    assert!(retried.iter().all(|t| t.status == Status::Succeeded));
    stop.send(()).unwrap();
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reconciler_is_noticed_by_a_process_that_does_not_lead() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    // Someone else holds leadership and never passes: the reconciler is stalled.
    let now = jiff::Timestamp::now();
    store
        .acquire_leadership(backstop_core::store::LeadershipParams {
            name: backstop_engine::leader::SINGLETONS.into(),
            owner: "hung-leader".into(),
            now,
            until: now + jiff::SignedDuration::from_hours(1),
        })
        .await
        .unwrap();
    let (url, got) = sink(Arc::new(AtomicBool::new(false))).await;
    let engine = Engine::builder(store.clone())
        .alerts(AlertOptions {
            sinks: vec![AlertSink {
                name: "pager".into(),
                url,
                format: AlertFormat::Slack,
                events: vec![AlertName::ReconcilerStalled],
                secret: None,
            }],
            window: Duration::from_millis(200),
            failure_rate: None,
        })
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            node_beat: Duration::from_millis(100),
            stalled_after: Duration::from_millis(500),
            ..Default::default()
        })
        .build()
        .unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!engine.is_leader());
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    let text = got[0]["text"].as_str().unwrap();
    assert!(text.contains("reconciler.stalled ×1"), "{text}");
    stop.send(()).unwrap();
    run.await.unwrap();
}
