//! In-process handlers that checkpoint: the cursor reaches the next attempt, a graceful
//! shutdown suspends a resumable task without spending an attempt, and a context built by
//! hand has nothing to checkpoint.

use backstop_core::store::{ClaimedTask, GetParams, TimelineParams};
use backstop_core::{EventType, KindConfig, Outcome, RetryPolicy, Status, Store, Target, TaskId};
use backstop_engine::{
    CheckpointError, Engine, EngineOptions, EnqueueRequest, TaskContext, handler,
};
use backstop_store_sqlite::SqliteStore;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

async fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("t.db").display().to_string())
        .await
        .unwrap();
    (Arc::new(s), dir)
}

fn kind() -> KindConfig {
    let mut k = KindConfig::new("batch", Target::InProcess);
    k.max_attempts = 2;
    k.retry = RetryPolicy::Schedule(vec![Duration::from_millis(20)]);
    k.timeout = Duration::from_secs(30);
    k.lease = Duration::from_secs(5);
    k
}

fn fast() -> EngineOptions {
    EngineOptions {
        poll_interval: Duration::from_millis(20),
        rescue_interval: Duration::from_millis(50),
        grace: Duration::from_secs(5),
        ..Default::default()
    }
}

fn spawn(engine: &Engine) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    let e = engine.clone();
    let h = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    (tx, h)
}

async fn wait_status(store: &dyn Store, id: TaskId, want: Status) -> backstop_core::Task {
    for _ in 0..1000 {
        let t = store.get(GetParams { id }).await.unwrap().unwrap();
        if t.status == want {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never became {want}");
}

/// Enqueues a `batch` task with key `key`.
async fn enqueue(engine: &Engine, key: &str) -> TaskId {
    let r = EnqueueRequest {
        kind: "batch".into(),
        key: key.into(),
        payload: b"{}".to_vec(),
        ..Default::default()
    };
    engine.enqueue(r).await.unwrap().id
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Cursor {
    next: u64,
}

/// A resumable job over `items` items: resumes from its cursor, checkpoints every 10, stops
/// and suspends when the worker is shutting down. Records (attempt, first item) per run.
fn resumable(items: u64, runs: Arc<Mutex<Vec<(u32, u64)>>>) -> backstop_engine::Handler {
    handler(move |ctx: TaskContext| {
        let runs = runs.clone();
        async move {
            let start = match ctx.resume_from::<Cursor>() {
                Some(Ok(c)) => c.next,
                Some(Err(e)) => return Outcome::fail(format!("bad cursor: {e}")),
                None => 0,
            };
            runs.lock().unwrap().push((ctx.attempt, start));
            for i in start..items {
                tokio::time::sleep(Duration::from_millis(2)).await;
                if (i + 1) % 10 == 0 {
                    if let Err(e) = ctx.checkpoint(&Cursor { next: i + 1 }).await {
                        return Outcome::retry(e.to_string());
                    }
                    if ctx.is_stopping() {
                        return Outcome::Suspend;
                    }
                }
            }
            Outcome::Success
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_suspends_a_resumable_task_and_the_next_run_resumes_uncounted() {
    let (store, _d) = store().await;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let build = || {
        Engine::builder(store.clone())
            .kind(kind())
            .handler("batch", resumable(1000, runs.clone()))
            .options(fast())
            .build()
            .unwrap()
    };
    let engine = build();
    let (stop, h) = spawn(&engine);
    let id = enqueue(&engine, "b-1").await;
    wait_status(&*store, id, Status::Running).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    assert_eq!(t.status, Status::Pending, "suspended, not failed: {t:?}");
    assert_eq!(t.attempts, 0, "the suspended attempt is not counted");
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    assert!(tl.iter().any(|e| e.kind == EventType::Suspended), "{tl:?}");
    assert!(!tl.iter().any(|e| e.kind == EventType::Attempt), "{tl:?}");

    // Restarted, the task resumes where it stopped, as attempt 1 again, and finishes.
    let engine = build();
    let (stop, h) = spawn(&engine);
    let t = wait_status(&*store, id, Status::Succeeded).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    assert_eq!(t.attempts, 1);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0], (1, 0));
    assert_eq!(runs[1].0, 1, "the resumed run is attempt 1: {runs:?}");
    assert!(
        runs[1].1 > 0 && runs[1].1 % 10 == 0,
        "resumed from a checkpoint: {runs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_resumes_from_the_last_checkpoint() {
    let (store, _d) = store().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let engine = Engine::builder(store.clone())
        .kind(kind())
        .handler(
            "batch",
            handler(move |ctx: TaskContext| {
                let s = s.clone();
                async move {
                    s.lock().unwrap().push(ctx.cursor.clone());
                    if ctx.attempt == 1 {
                        ctx.checkpoint(&serde_json::json!({"page": 7}))
                            .await
                            .unwrap();
                        return Outcome::retry("the provider timed out");
                    }
                    Outcome::Success
                }
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let id = enqueue(&engine, "b-2").await;
    let t = wait_status(&*store, id, Status::Succeeded).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    assert_eq!(t.attempts, 2);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![None, Some(r#"{"page":7}"#.to_string())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_outside_a_shutdown_counts_as_an_attempt() {
    let (store, _d) = store().await;
    let engine = Engine::builder(store.clone())
        .kind(kind())
        .handler("batch", handler(|_| async { Outcome::Suspend }))
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let id = enqueue(&engine, "b-3").await;
    // Never stopping, it spends its two attempts and fails: no endless loop of suspensions.
    let t = wait_status(&*store, id, Status::Failed).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    assert_eq!(t.attempts, 2);
}

#[tokio::test]
async fn a_context_built_by_hand_has_nothing_to_checkpoint() {
    let ctx = TaskContext::from(ClaimedTask {
        id: TaskId::new(),
        kind: "batch".into(),
        key: "k".into(),
        payload: b"{}".to_vec(),
        attempt: 1,
        max_attempts: 1,
        epoch: 1,
        run_at: jiff::Timestamp::now(),
        expires_at: None,
        traceparent: None,
        created_at: jiff::Timestamp::now(),
        checkpoint: None,
        started: true,
        group: None,
    });
    assert!(matches!(
        ctx.checkpoint(&1).await,
        Err(CheckpointError::Detached)
    ));
    assert!(!ctx.is_stopping());
}
