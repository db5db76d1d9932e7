//! The engine on a real SQLite ledger with in-process handlers.

use backstop_core::store::{CountsParams, GetParams, TimelineParams};
use backstop_core::{
    AttemptOutcome, Clock, EventType, KindConfig, ManualClock, Outcome, RetryPolicy, Status, Store,
    Target, TaskId,
};
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, Handler, handler};
use backstop_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;

async fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("t.db").display().to_string())
        .await
        .unwrap();
    (Arc::new(s), dir)
}

fn kind(name: &str) -> KindConfig {
    let mut k = KindConfig::new(name, Target::InProcess);
    k.max_attempts = 3;
    k.retry = RetryPolicy::Schedule(vec![Duration::from_millis(20)]);
    k.timeout = Duration::from_secs(5);
    k.lease = Duration::from_secs(5);
    k
}

fn fast() -> EngineOptions {
    EngineOptions {
        poll_interval: Duration::from_millis(20),
        rescue_interval: Duration::from_millis(50),
        grace: Duration::from_millis(500),
        ..Default::default()
    }
}

fn req(kind: &str, key: &str) -> EnqueueRequest {
    EnqueueRequest {
        kind: kind.into(),
        key: key.into(),
        payload: br#"{"n": 1}"#.to_vec(),
        ..Default::default()
    }
}

/// Runs the engine in the background; the returned sender stops it.
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
    for _ in 0..500 {
        let t = store.get(GetParams { id }).await.unwrap().unwrap();
        if t.status == want {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = store.get(GetParams { id }).await.unwrap().unwrap();
    panic!("task {id} is {} (wanted {want}): {t:?}", t.status);
}

fn counting(
    calls: Arc<AtomicUsize>,
    f: impl Fn(usize) -> Outcome + Send + Sync + 'static,
) -> Handler {
    let f = Arc::new(f);
    handler(move |_ctx| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let f = f.clone();
        async move { f(n) }
    })
}

#[tokio::test]
async fn transient_failures_retry_with_backoff_until_success() {
    let (store, _d) = store().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = Engine::builder(store.clone())
        .kind(kind("flaky"))
        .handler(
            "flaky",
            counting(calls.clone(), |n| {
                if n < 3 {
                    Outcome::retry(format!("try {n} failed"))
                } else {
                    Outcome::Success
                }
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let id = engine.enqueue(req("flaky", "a")).await.unwrap().id;
    let t = wait_status(&*store, id, Status::Succeeded).await;
    assert_eq!(t.attempts, 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    let outcomes: Vec<_> = tl
        .iter()
        .filter(|e| e.kind == EventType::Attempt)
        .map(|e| e.outcome)
        .collect();
    assert_eq!(
        outcomes,
        vec![
            Some(AttemptOutcome::Retry),
            Some(AttemptOutcome::Retry),
            Some(AttemptOutcome::Succeeded)
        ]
    );
    assert_eq!(tl[1].error.as_deref(), Some("try 1 failed"));
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test]
async fn spent_attempts_and_permanent_errors_dead_letter() {
    let (store, _d) = store().await;
    let engine = Engine::builder(store.clone())
        .kind(kind("always503"))
        .kind(kind("bad"))
        .handler(
            "always503",
            handler(|_| async { Outcome::retry("HTTP 503") }),
        )
        .handler(
            "bad",
            handler(|_| async { Outcome::fail("invalid phone number") }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let a = engine.enqueue(req("always503", "a")).await.unwrap().id;
    let b = engine.enqueue(req("bad", "b")).await.unwrap().id;
    let ta = wait_status(&*store, a, Status::Failed).await;
    assert_eq!(ta.attempts, 3, "all three attempts were made");
    assert_eq!(ta.last_error.as_deref(), Some("HTTP 503"));
    let tb = wait_status(&*store, b, Status::Failed).await;
    assert_eq!(tb.attempts, 1, "a permanent error is not retried");
    assert_eq!(tb.last_error.as_deref(), Some("invalid phone number"));
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test]
async fn skip_compensates_with_the_reason() {
    let (store, _d) = store().await;
    let engine = Engine::builder(store.clone())
        .kind(kind("sms"))
        .handler(
            "sms",
            handler(|_| async { Outcome::skip("order was closed") }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let id = engine.enqueue(req("sms", "x")).await.unwrap().id;
    let t = wait_status(&*store, id, Status::Compensated).await;
    assert_eq!(t.reason.as_deref(), Some("order was closed"));
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test]
async fn a_task_past_expires_at_is_compensated_and_never_run() {
    let (store, _d) = store().await;
    let clock = Arc::new(ManualClock::new("2030-01-01T00:00:00Z".parse().unwrap()));
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = Engine::builder(store.clone())
        .kind(kind("coupon"))
        .handler("coupon", counting(calls.clone(), |_| Outcome::Success))
        .clock(clock.clone())
        .options(fast())
        .build()
        .unwrap();
    // Due in 10 minutes, valid for 5: it must never run.
    let mut r = req("coupon", "c1");
    r.delay = Some(Duration::from_secs(600));
    r.expires_in = Some(Duration::from_secs(900));
    let late = engine.enqueue(r).await.unwrap().id;
    let mut r = req("coupon", "c2");
    r.expires_in = Some(Duration::from_secs(300));
    let mut ok = req("coupon", "c3");
    ok.expires_in = Some(Duration::from_secs(3600));
    // Enqueued, then the clock passes c2's deadline before any dispatcher runs.
    let c2 = engine.enqueue(r).await.unwrap().id;
    clock.advance(Duration::from_secs(1000));
    let c3 = engine.enqueue(ok).await.unwrap().id;
    let (stop, h) = spawn(&engine);
    let t2 = wait_status(&*store, c2, Status::Compensated).await;
    assert_eq!(t2.reason.as_deref(), Some("expired"));
    let t1 = wait_status(&*store, late, Status::Compensated).await;
    assert_eq!(t1.reason.as_deref(), Some("expired"));
    wait_status(&*store, c3, Status::Succeeded).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the valid task ran");
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test]
async fn concurrency_per_kind_is_bounded() {
    let (store, _d) = store().await;
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (n2, p2) = (now.clone(), peak.clone());
    let mut k = kind("slow");
    k.concurrency = 3;
    // Short attempts next to the lease: tasks are leased a round ahead, and still no more
    // than three run at once.
    k.timeout = Duration::from_secs(1);
    let engine = Engine::builder(store.clone())
        .kind(k)
        .handler(
            "slow",
            handler(move |_| {
                let (now, peak) = (n2.clone(), p2.clone());
                async move {
                    let c = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(c, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    Outcome::Success
                }
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            engine
                .enqueue(req("slow", &format!("s{i}")))
                .await
                .unwrap()
                .id,
        );
    }
    for id in ids {
        wait_status(&*store, id, Status::Succeeded).await;
    }
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "never more than the limit, and the limit was used"
    );
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test]
async fn long_attempts_are_heartbeated_not_rescued() {
    let (store, _d) = store().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let mut k = kind("long");
    k.lease = Duration::from_millis(300);
    let engine = Engine::builder(store.clone())
        .kind(k)
        .handler(
            "long",
            handler(move |_| {
                c2.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_millis(1200)).await;
                    Outcome::Success
                }
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let id = engine.enqueue(req("long", "l")).await.unwrap().id;
    let t = wait_status(&*store, id, Status::Succeeded).await;
    assert_eq!(
        t.attempts, 1,
        "the lease was kept alive, so no second attempt"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test]
async fn shutdown_lets_in_flight_finish_and_releases_what_overruns_the_grace() {
    let (store, _d) = store().await;
    let mut quick = kind("quick");
    quick.concurrency = 1;
    let mut stuck = kind("stuck");
    stuck.concurrency = 1;
    let engine = Engine::builder(store.clone())
        .kind(quick)
        .kind(stuck)
        .handler(
            "quick",
            handler(|_| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Outcome::Success
            }),
        )
        .handler(
            "stuck",
            handler(|_| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Outcome::Success
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (stop, h) = spawn(&engine);
    let q = engine.enqueue(req("quick", "q")).await.unwrap().id;
    let s = engine.enqueue(req("stuck", "s")).await.unwrap().id;
    let q_later = {
        wait_status(&*store, q, Status::Running).await;
        wait_status(&*store, s, Status::Running).await;
        // Queued behind the running one (concurrency 1): must not start after shutdown.
        engine.enqueue(req("quick", "q2")).await.unwrap().id
    };
    let t0 = std::time::Instant::now();
    stop.send(()).unwrap();
    h.await.unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "shutdown is bounded by the grace period"
    );
    assert_eq!(
        store
            .get(GetParams { id: q })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Succeeded,
        "in-flight attempt finished"
    );
    let st = store.get(GetParams { id: s }).await.unwrap().unwrap();
    assert_eq!(
        st.status,
        Status::Pending,
        "the overrunning attempt was released"
    );
    let tl = store.timeline(TimelineParams { id: s }).await.unwrap();
    assert!(
        tl.iter()
            .any(|e| e.outcome == Some(AttemptOutcome::Interrupted))
    );
    assert_eq!(
        store
            .get(GetParams { id: q_later })
            .await
            .unwrap()
            .unwrap()
            .status,
        Status::Pending
    );
}

#[tokio::test]
async fn a_crashed_engine_strands_nothing() {
    let (store, _d) = store().await;
    let mut k = kind("work");
    k.lease = Duration::from_millis(300);
    let first = Engine::builder(store.clone())
        .kind(k.clone())
        .handler(
            "work",
            handler(|_| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Outcome::Success
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    let (_stop, h) = spawn(&first);
    let id = first.enqueue(req("work", "w")).await.unwrap().id;
    wait_status(&*store, id, Status::Running).await;
    // Simulate a crash: the engine vanishes without shutdown, its heartbeats stop.
    h.abort();
    drop(first);
    let second = Engine::builder(store.clone())
        .kind(k)
        .handler("work", handler(|_| async { Outcome::Success }))
        .options(fast())
        .build()
        .unwrap();
    let (stop, h2) = spawn(&second);
    let t = wait_status(&*store, id, Status::Succeeded).await;
    assert_eq!(t.attempts, 2);
    let tl = store.timeline(TimelineParams { id }).await.unwrap();
    assert!(
        tl.iter()
            .any(|e| e.outcome == Some(AttemptOutcome::LeaseExpired))
    );
    stop.send(()).unwrap();
    h2.await.unwrap();
}

#[tokio::test]
async fn enqueue_is_validated_and_idempotent() {
    let (store, _d) = store().await;
    let engine = Engine::builder(store.clone())
        .kind(kind("k"))
        .handler("k", handler(|_| async { Outcome::Success }))
        .build()
        .unwrap();
    let a = engine.enqueue(req("k", "same")).await.unwrap();
    assert!(a.created);
    let b = engine.enqueue(req("k", "same")).await.unwrap();
    assert_eq!((b.id, b.created), (a.id, false));
    let mut other = req("k", "same");
    other.payload = br#"{"n": 2}"#.to_vec();
    let err = engine.enqueue(other).await.unwrap_err().to_string();
    assert!(err.contains("different payload"), "{err}");
    for (bad, why) in [
        (req("nope", "x"), "unknown kind"),
        (req("k", ""), "key must not be empty"),
        (
            EnqueueRequest {
                payload: b"{oops".to_vec(),
                ..req("k", "j")
            },
            "not valid JSON",
        ),
    ] {
        let err = engine.enqueue(bad).await.unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
    }
    assert_eq!(
        store.counts(CountsParams::default()).await.unwrap().total(),
        1,
        "refused input wrote nothing"
    );
    let _ = Clock::now(&backstop_core::SystemClock);
}

#[tokio::test]
async fn shutdown_gives_back_tasks_leased_ahead_of_a_free_slot() {
    let (store, _d) = store().await;
    let mut k = kind("ahead");
    k.concurrency = 2;
    k.timeout = Duration::from_secs(1);
    let started = Arc::new(AtomicUsize::new(0));
    let s2 = started.clone();
    let engine = Engine::builder(store.clone())
        .kind(k)
        .handler(
            "ahead",
            handler(move |_| {
                let s = s2.clone();
                async move {
                    s.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Outcome::Success
                }
            }),
        )
        .options(fast())
        .build()
        .unwrap();
    for i in 0..20 {
        engine
            .enqueue(req("ahead", &format!("a{i}")))
            .await
            .unwrap();
    }
    let (stop, h) = spawn(&engine);
    // Two attempts run; at this pace (300 ms each) one round of two more is leased ahead,
    // held (still pending) while they wait for a slot, and no more.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let c = store
        .counts(CountsParams {
            kind: Some("ahead".into()),
        })
        .await
        .unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(
        c.running, 2,
        "only the attempts running show as running: {c:?}"
    );
    let listed = store
        .list(backstop_core::store::ListParams {
            kind: Some("ahead".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let held: Vec<_> = listed.iter().filter(|t| t.is_held()).collect();
    assert_eq!(held.len(), 2, "two leased ahead, held");
    assert!(held.iter().all(|t| t.attempts == 0), "a hold is no attempt");
    stop.send(()).unwrap();
    h.await.unwrap();
    let c = store
        .counts(CountsParams {
            kind: Some("ahead".into()),
        })
        .await
        .unwrap();
    assert_eq!(c.running, 0, "nothing stays leased after shutdown: {c:?}");
    assert_eq!(c.succeeded, 2, "{c:?}");
    assert_eq!(c.pending, 18, "the waiting ones are due again: {c:?}");
}
