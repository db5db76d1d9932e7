//! Alerts end to end: dead letters and a stalled reconciler reach a real HTTP sink on
//! loopback, aggregated per window, and none is lost while the sink is down.

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::store::{CountsParams, GetParams, TimelineParams};
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

/// A `task.failed` sink named `ops` at `url`, aggregating per `window`.
fn task_failed_to(url: String, window: Duration) -> AlertOptions {
    AlertOptions {
        sinks: vec![AlertSink {
            name: "ops".into(),
            url,
            format: AlertFormat::Generic,
            events: vec![AlertName::TaskFailed],
            secret: None,
        }],
        window,
        failure_rate: None,
    }
}

/// Runs `engine` until the returned sender fires.
fn run_engine(
    engine: &Engine,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    (stop, run)
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
    let alerts = task_failed_to(url, Duration::from_millis(300));
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
    let (stop, run) = run_engine(&engine);
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
    let waiting = store
        .counts(CountsParams {
            kind: Some(alert_kind.to_string()),
        })
        .await
        .unwrap();
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
    // The sink answered; the outcome of that push reaches the ledger a commit later.
    let mut c = store
        .counts(CountsParams {
            kind: Some(alert_kind.to_string()),
        })
        .await
        .unwrap();
    while c.succeeded < got.len() as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        c = store
            .counts(CountsParams {
                kind: Some(alert_kind.to_string()),
            })
            .await
            .unwrap();
    }
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
    let (stop, run) = run_engine(&engine);
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

/// An attempt that fails after its lease was lost (the task was rescued meanwhile) made no
/// dead letter: its outcome is rejected as stale and no `task.failed` is raised for it, while
/// a task that really fails beside it is announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_rejected_as_stale_raises_no_dead_letter_alert() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    );
    let (url, got) = sink(Arc::new(AtomicBool::new(false))).await;
    let mut slow = KindConfig::new("charge.slow", Target::InProcess);
    slow.max_attempts = 1;
    let mut plain = KindConfig::new("charge.plain", Target::InProcess);
    plain.max_attempts = 1;
    let started = Arc::new(AtomicBool::new(false));
    let release = Arc::new(tokio::sync::Notify::new());
    let (s2, r2) = (started.clone(), release.clone());
    let engine = Engine::builder(store.clone())
        .kind(slow)
        .kind(plain)
        .handler(
            "charge.slow",
            handler(move |_| {
                let (started, release) = (s2.clone(), r2.clone());
                async move {
                    started.store(true, Ordering::SeqCst);
                    release.notified().await;
                    Outcome::fail("HTTP 402: card declined")
                }
            }),
        )
        .handler(
            "charge.plain",
            handler(|_| async { Outcome::fail("HTTP 402: card declined") }),
        )
        .alerts(task_failed_to(url, Duration::from_millis(200)))
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        })
        .build()
        .unwrap();
    let (stop, run) = run_engine(&engine);
    let enqueue = |kind: &str| EnqueueRequest {
        kind: kind.into(),
        key: "order-7".into(),
        payload: b"{}".to_vec(),
        ..Default::default()
    };
    let stale_id = engine.enqueue(enqueue("charge.slow")).await.unwrap().id;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(started.load(Ordering::SeqCst), "the slow attempt started");
    // The lease is lost while the attempt runs: rescued as if it had expired (its one attempt
    // spent, the rescue makes it the dead letter).
    let rescued = store
        .rescue(backstop_core::store::RescueParams {
            now: jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(rescued.len(), 1);
    release.notify_one();
    let plain_id = engine.enqueue(enqueue("charge.plain")).await.unwrap().id;
    // The late outcome reaches the ledger as a stale completion.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tl = store
            .timeline(TimelineParams { id: stale_id })
            .await
            .unwrap();
        if tl
            .iter()
            .any(|e| e.kind == backstop_core::EventType::StaleCompletion)
        {
            break;
        }
        assert!(Instant::now() < deadline, "no stale completion: {tl:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Several alert windows later, only the real dead letter was announced.
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&got.lock().unwrap(), "task.failed") < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got = got.lock().unwrap().clone();
    assert_eq!(count(&got, "task.failed"), 1, "{got:#?}");
    let tasks: Vec<String> = got
        .iter()
        .flat_map(|b| b["alerts"].as_array().unwrap().clone())
        .flat_map(|g| g["tasks"].as_array().unwrap().clone())
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(tasks, [plain_id.to_string()]);
    assert_eq!(
        store
            .get(GetParams { id: plain_id })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Failed
    );
    stop.send(()).unwrap();
    run.await.unwrap();
}
