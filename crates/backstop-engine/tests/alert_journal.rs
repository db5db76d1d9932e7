//! Alert events raised in a window still open survive the death of their process: the open
//! window is in the ledger, and another process sends it once the first is gone.

mod cut;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::store::{BeatsParams, GetParams};
use backstop_core::{KindConfig, Outcome, Status, Store, Target};
use backstop_engine::alerts::journal::JOURNAL_PREFIX;
use backstop_engine::alerts::{AlertFormat, AlertName, AlertOptions, AlertSink};
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, handler};
use backstop_store_sqlite::SqliteStore;
use cut::Cut;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

async fn sink() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = Router::new().route(
        "/alerts",
        post(move |body: Bytes| {
            let got = g.clone();
            async move {
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

async fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::open(&dir.path().join("t.db").display().to_string())
            .await
            .unwrap(),
    )
}

/// An engine whose alert window stays open for an hour.
fn engine(store: Arc<dyn Store>, worker: &str, url: &str) -> Engine {
    let mut bad = KindConfig::new("refund.create", Target::InProcess);
    bad.max_attempts = 1;
    Engine::builder(store)
        .kind(bad)
        .handler(
            "refund.create",
            handler(|_| async { Outcome::fail("HTTP 400: account frozen") }),
        )
        .alerts(AlertOptions {
            sinks: vec![AlertSink {
                name: "ops".into(),
                url: url.into(),
                format: AlertFormat::Generic,
                events: vec![AlertName::TaskFailed],
                secret: None,
            }],
            window: Duration::from_secs(3600),
            failure_rate: None,
        })
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            node_beat: Duration::from_millis(100),
            worker_id: Some(worker.into()),
            ..Default::default()
        })
        .build()
        .unwrap()
}

fn run(engine: &Engine) -> tokio::task::JoinHandle<()> {
    let e = engine.clone();
    tokio::spawn(async move { e.run(std::future::pending()).await })
}

async fn until<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_window_left_by_a_dead_process_is_sent_by_another() {
    let dir = tempfile::tempdir().unwrap();
    let (url, got) = sink().await;
    let cut = Cut::new(open(&dir).await);
    let a = engine(cut.clone(), "a", &url);
    let _run_a = run(&a);
    let id = a
        .enqueue(EnqueueRequest {
            kind: "refund.create".into(),
            key: "refund-77".into(),
            payload: b"{}".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    let store = open(&dir).await;
    until("the dead letter and its journal", || async {
        store.get(GetParams { id }).await.unwrap().unwrap().status == Status::Failed
            && !store
                .beats(BeatsParams {
                    prefix: JOURNAL_PREFIX.to_string(),
                })
                .await
                .unwrap()
                .is_empty()
    })
    .await;
    // The process dies with its window open: nothing it holds reaches the ledger again.
    cut.cut();
    assert!(got.lock().unwrap().is_empty(), "the window was still open");

    let b = engine(open(&dir).await, "b", &url);
    let _run_b = run(&b);
    until("the orphaned window at the sink", || async {
        !got.lock().unwrap().is_empty()
    })
    .await;
    let msg = got.lock().unwrap()[0].clone();
    assert_eq!(
        msg["source"], "a",
        "sent as the window of the process that raised it: {msg}"
    );
    let g = &msg["alerts"][0];
    assert_eq!(
        (g["event"].as_str(), g["count"].as_u64()),
        (Some("task.failed"), Some(1))
    );
    assert_eq!(g["tasks"][0], id.to_string());
    until("the journal cleared", || async {
        store
            .beats(BeatsParams {
                prefix: JOURNAL_PREFIX.to_string(),
            })
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(got.lock().unwrap().len(), 1, "sent once");
}
