//! An attempt exists when it starts: tasks leased ahead of a free slot are only held, so a
//! crash or a shutdown never spends an attempt that did not run, and listings show as running
//! only the attempts actually running.

mod cut;

use backstop_core::audit::audit;
use backstop_core::store::CountsParams;
use backstop_core::store::{AuditParams, ListParams};
use backstop_core::{EventType, KindConfig, Outcome, Status, Store, Target};
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, handler};
use backstop_store_sqlite::SqliteStore;
use cut::Cut;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

async fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    let path = dir.path().join("t.db").display().to_string();
    Arc::new(SqliteStore::open(&path).await.unwrap())
}

/// One attempt allowed, two at a time, each taking 300 ms; every call is counted per key.
fn engine(store: Arc<dyn Store>, worker: &str, sent: Arc<Mutex<HashMap<String, u32>>>) -> Engine {
    let mut k = KindConfig::new("once", Target::InProcess);
    k.max_attempts = 1;
    k.concurrency = 2;
    k.lease = Duration::from_secs(1);
    k.timeout = Duration::from_secs(5);
    Engine::builder(store)
        .kind(k)
        .handler(
            "once",
            handler(move |ctx| {
                let sent = sent.clone();
                async move {
                    *sent.lock().unwrap().entry(ctx.key.clone()).or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Outcome::Success
                }
            }),
        )
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            rescue_interval: Duration::from_millis(50),
            grace: Duration::from_millis(100),
            worker_id: Some(worker.into()),
            ..Default::default()
        })
        .build()
        .unwrap()
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

async fn enqueue(engine: &Engine, n: usize) {
    for i in 0..n {
        engine
            .enqueue(EnqueueRequest {
                kind: "once".into(),
                key: format!("t{i}"),
                payload: b"{}".to_vec(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
}

async fn all(store: &dyn Store) -> Vec<backstop_core::Task> {
    store
        .list(ListParams {
            kind: Some("once".into()),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
}

/// Every task within its budget, its counter equal to the attempts on its timeline.
async fn assert_attempts_are_real(store: &dyn Store, sent: &HashMap<String, u32>) {
    let page = store
        .audit_page(AuditParams {
            after: None,
            limit: 1000,
        })
        .await
        .unwrap();
    for (t, tl) in &page {
        assert!(audit(t, tl).is_empty(), "{}: {:?}", t.key, audit(t, tl));
        let on_timeline = tl.iter().filter(|e| e.kind == EventType::Attempt).count() as u32;
        assert!(
            t.attempts <= t.max_attempts,
            "{}: {} attempts of {}",
            t.key,
            t.attempts,
            t.max_attempts
        );
        assert!(
            on_timeline <= sent.get(&t.key).copied().unwrap_or(0),
            "{} ({}): the timeline shows {on_timeline} attempts, the handler saw {:?}",
            t.key,
            t.status,
            sent.get(&t.key)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_never_dead_letters_a_task_that_was_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let cut = Cut::new(open(&dir).await);
    let a = engine(cut.clone(), "a", sent.clone());
    enqueue(&a, 8).await;
    let _run_a = spawn(&a);
    // Two attempts run and more are leased ahead; then the process is cut off from its
    // database, as a crash would leave it: nothing it holds is written again.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let leased = all(&*open(&dir).await)
        .await
        .iter()
        .filter(|t| t.lease_owner.is_some())
        .count();
    assert!(
        leased > 2,
        "the test needs tasks leased ahead of the two slots"
    );
    cut.cut();
    let b = engine(open(&dir).await, "b", sent.clone());
    let (stop_b, run_b) = spawn(&b);
    let store = open(&dir).await;
    for _ in 0..500 {
        if all(&*store).await.iter().all(|t| t.status.is_final()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_b.send(()).unwrap();
    run_b.await.unwrap();
    let sent = sent.lock().unwrap().clone();
    let tasks = all(&*store).await;
    for t in &tasks {
        assert!(t.status.is_final(), "{} is {}", t.key, t.status);
        if t.status == Status::Failed {
            assert!(
                sent.contains_key(&t.key),
                "{} was dead-lettered without ever being sent: {:?}",
                t.key,
                t.reason
            );
        }
    }
    let failed = tasks.iter().filter(|t| t.status == Status::Failed).count();
    assert!(
        failed <= 2,
        "only the two attempts cut off mid-run may fail: {failed}"
    );
    assert_attempts_are_real(&*store, &sent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_spends_no_attempt_on_tasks_that_did_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let store = open(&dir).await;
    let a = engine(store.clone(), "a", sent.clone());
    enqueue(&a, 8).await;
    let (stop, run) = spawn(&a);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let c = store
        .counts(CountsParams {
            kind: Some("once".into()),
        })
        .await
        .unwrap();
    assert_eq!(
        c.running, 2,
        "only the two attempts running show as running: {c:?}"
    );
    let held = all(&*store).await.iter().filter(|t| t.is_held()).count();
    assert!(held > 0, "the test needs tasks leased ahead");
    stop.send(()).unwrap();
    run.await.unwrap();
    let sent = sent.lock().unwrap().clone();
    for t in all(&*store).await {
        if !sent.contains_key(&t.key) {
            assert_eq!(
                (t.status, t.attempts, t.lease_owner.as_deref()),
                (Status::Pending, 0, None),
                "{}: a task that never ran goes back untouched",
                t.key
            );
        }
    }
    assert_attempts_are_real(&*store, &sent).await;
}

/// A held task's start costs no commit of its own: the attempt that frees a slot hands it to
/// the next held task, whose start is written with that attempt's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_task_starts_in_the_write_of_the_outcome_that_freed_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let store = Cut::new(open(&dir).await);
    let a = engine(store.clone(), "a", sent.clone());
    enqueue(&a, 8).await;
    let (stop, run) = spawn(&a);
    let ledger = open(&dir).await;
    for _ in 0..500 {
        if all(&*ledger).await.iter().all(|t| t.status.is_final()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    run.await.unwrap();
    let tasks = all(&*ledger).await;
    assert!(tasks.iter().all(|t| t.status == Status::Succeeded));
    let writes = store.writes();
    let started: usize = writes.iter().map(|w| w.starts).sum();
    let alone: usize = writes
        .iter()
        .filter(|w| w.outcomes == 0)
        .map(|w| w.starts)
        .sum();
    assert!(
        started >= 4,
        "the test needs tasks held past the first claim: {writes:?}"
    );
    // Two slots, 300 ms attempts: only a slot that was free when its task was held (no
    // outcome to ride with, rare) may start it alone; written on their own, half or more are.
    assert!(
        alone * 4 <= started,
        "{alone} of {started} held starts were written on their own: {writes:?}"
    );
    let sent = sent.lock().unwrap().clone();
    assert_attempts_are_real(&*ledger, &sent).await;
}
