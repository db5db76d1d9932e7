//! Ordering per group through the engine: a kind's `ordering` pointer groups its tasks, each
//! group runs one task at a time in enqueue order while groups run in parallel, a failure
//! holds its group (and says so), and a deep group never delays another.

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::group::{OnFailure, Ordering as GroupOrdering};
use backstop_core::store::{CountsParams, GetByKeyParams};
use backstop_core::{KindConfig, Outcome, Status, Store, Target, Task};
use backstop_engine::alerts::{AlertFormat, AlertName, AlertOptions, AlertSink};
use backstop_engine::{Engine, EngineOptions, EnqueueError, EnqueueRequest, Handler, handler};
use backstop_store_sqlite::SqliteStore;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

async fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("t.db").display().to_string())
        .await
        .unwrap();
    (Arc::new(s), dir)
}

fn ordered(on_failure: OnFailure) -> KindConfig {
    let mut k = KindConfig::new("order.sync", Target::InProcess);
    k.max_attempts = 1;
    k.concurrency = 8;
    k.timeout = Duration::from_secs(30);
    k.ordering = Some(GroupOrdering {
        group: Some("/order_id".into()),
        on_failure,
    });
    k
}

fn run(
    store: &Arc<dyn Store>,
    kind: KindConfig,
    h: Handler,
    alerts: Option<AlertOptions>,
) -> (
    Engine,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let mut b = Engine::builder(store.clone())
        .handler(kind.name.clone(), h)
        .kind(kind)
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        });
    if let Some(a) = alerts {
        b = b.alerts(a);
    }
    let engine = b.build().unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    (engine, stop, handle)
}

fn req(order: &str, n: usize) -> EnqueueRequest {
    EnqueueRequest {
        kind: "order.sync".into(),
        key: format!("{order}-{n}"),
        payload: format!(r#"{{"order_id": "{order}", "n": {n}}}"#).into_bytes(),
        ..Default::default()
    }
}

async fn by_key(store: &Arc<dyn Store>, key: &str) -> Task {
    store
        .get_by_key(GetByKeyParams {
            kind: "order.sync".into(),
            key: key.into(),
        })
        .await
        .unwrap()
        .expect("the task")
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_runs_in_enqueue_order_one_at_a_time_while_groups_run_in_parallel() {
    let (store, _dir) = store().await;
    type Seen = Arc<Mutex<(HashMap<String, Vec<u64>>, HashSet<String>, usize, usize)>>;
    // Per group: the `n`s in handler order; the groups running now; most groups at once.
    let seen: Seen = Default::default();
    let s = seen.clone();
    let h = handler(move |ctx| {
        let s = s.clone();
        async move {
            let v: serde_json::Value = serde_json::from_slice(&ctx.payload).unwrap();
            let g = v["order_id"].as_str().unwrap().to_string();
            let n = v["n"].as_u64().unwrap();
            {
                let mut s = s.lock().unwrap();
                assert!(s.1.insert(g.clone()), "two tasks of group {g} at once");
                s.2 = s.2.max(s.1.len());
                s.0.entry(g.clone()).or_default().push(n);
            }
            tokio::time::sleep(Duration::from_millis(n % 5)).await;
            s.lock().unwrap().1.remove(&g);
            Outcome::Success
        }
    });
    let (engine, stop, handle) = run(&store, ordered(OnFailure::Block), h, None);
    // Enqueued in many small batches, groups interleaved.
    for round in 0..20 {
        let batch: Vec<EnqueueRequest> = (0..10).map(|g| req(&format!("o{g}"), round)).collect();
        for r in engine.enqueue_many(batch).await.unwrap() {
            assert!(r.unwrap().created);
        }
    }
    wait_until("every task succeeded", async || {
        let c = store.counts(CountsParams::default()).await.unwrap();
        c.succeeded == 200
    })
    .await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let s = seen.lock().unwrap();
    for g in 0..10 {
        let got = &s.0[&format!("o{g}")];
        assert_eq!(
            *got,
            (0..20).collect::<Vec<u64>>(),
            "group o{g} out of order"
        );
    }
    assert!(s.2 > 1, "groups ran in parallel (at most {} at once)", s.2);
}

/// A sink that records every alert body it receives.
async fn sink() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = Router::new().route(
        "/alerts",
        post(move |body: Bytes| {
            let g = g.clone();
            async move {
                g.lock()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_holds_its_group_and_raises_group_blocked_once() {
    let (store, _dir) = store().await;
    let (url, got) = sink().await;
    let alerts = AlertOptions {
        sinks: vec![AlertSink {
            name: "ops".into(),
            url,
            format: AlertFormat::Generic,
            events: vec![AlertName::GroupBlocked],
            secret: None,
        }],
        window: Duration::from_millis(200),
        failure_rate: None,
    };
    let h = handler(|ctx| async move {
        match ctx.key.as_str() {
            "A-0" => Outcome::fail("HTTP 400: no such order"),
            _ => Outcome::Success,
        }
    });
    let (engine, stop, handle) = run(&store, ordered(OnFailure::Block), h, Some(alerts));
    let batch = vec![req("A", 0), req("A", 1), req("A", 2), req("B", 0)];
    engine.enqueue_many(batch).await.unwrap();
    wait_until("A-0 failed and B-0 succeeded", async || {
        by_key(&store, "A-0").await.status == Status::Failed
            && by_key(&store, "B-0").await.status == Status::Succeeded
    })
    .await;
    wait_until("the group.blocked alert", async || {
        !got.lock().unwrap().is_empty()
    })
    .await;
    // The group waits: its later tasks stay parked through several polls.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for key in ["A-1", "A-2"] {
        let t = by_key(&store, key).await;
        assert_eq!((t.status, t.parked), (Status::Pending, true), "{key}");
    }
    stop.send(()).unwrap();
    handle.await.unwrap();
    let got = got.lock().unwrap();
    let alerts: Vec<&serde_json::Value> = got
        .iter()
        .flat_map(|b| b["alerts"].as_array().unwrap())
        .collect();
    assert_eq!(alerts.len(), 1, "one alert for the group: {got:?}");
    assert_eq!(alerts[0]["event"], "group.blocked");
    assert_eq!(alerts[0]["count"], 1);
    let text = alerts[0].to_string();
    assert!(text.contains("group \\\"A\\\" waits behind task"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_skip_a_failed_task_stays_a_dead_letter_and_its_group_goes_on() {
    let (store, _dir) = store().await;
    let h = handler(|ctx| async move {
        match ctx.key.as_str() {
            "A-0" => Outcome::fail("HTTP 400: no such order"),
            _ => Outcome::Success,
        }
    });
    let (engine, stop, handle) = run(&store, ordered(OnFailure::Skip), h, None);
    engine
        .enqueue_many(vec![req("A", 0), req("A", 1)])
        .await
        .unwrap();
    wait_until("A-1 succeeded", async || {
        by_key(&store, "A-1").await.status == Status::Succeeded
    })
    .await;
    assert_eq!(by_key(&store, "A-0").await.status, Status::Failed);
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_group_does_not_delay_another() {
    let (store, _dir) = store().await;
    let started: Arc<Mutex<HashMap<String, Instant>>> = Default::default();
    let s = started.clone();
    let h = handler(move |ctx| {
        let s = s.clone();
        async move {
            s.lock().unwrap().insert(ctx.key.clone(), Instant::now());
            if ctx.key == "A-0" {
                // Group A's head takes its time: all of A waits behind it.
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            Outcome::Success
        }
    });
    let (engine, stop, handle) = run(&store, ordered(OnFailure::Block), h, None);
    for chunk in 0..20 {
        let batch: Vec<EnqueueRequest> = (0..1000).map(|i| req("A", chunk * 1000 + i)).collect();
        engine.enqueue_many(batch).await.unwrap();
    }
    wait_until("A's head started", async || {
        started.lock().unwrap().contains_key("A-0")
    })
    .await;
    let enqueued = Instant::now();
    engine.enqueue(req("B", 0)).await.unwrap();
    wait_until("B's task started", async || {
        started.lock().unwrap().contains_key("B-0")
    })
    .await;
    let waited = started.lock().unwrap()["B-0"] - enqueued;
    assert!(
        waited < Duration::from_secs(1),
        "group B waited {waited:?} behind 20,000 tasks of group A"
    );
    assert_eq!(
        started.lock().unwrap().len(),
        2,
        "nothing else of A started while its head ran"
    );
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_cannot_be_used_is_refused_with_its_pointer() {
    let (store, _dir) = store().await;
    let (engine, stop, handle) = run(
        &store,
        ordered(OnFailure::Block),
        handler(|_| async { Outcome::Success }),
        None,
    );
    let mut no_group = req("A", 0);
    no_group.payload = br#"{"order": 1}"#.to_vec();
    let e = engine.enqueue(no_group).await.unwrap_err();
    assert!(matches!(e, EnqueueError::Group(_)), "{e:?}");
    assert!(e.to_string().contains("/order_id is missing"), "{e}");
    let mut long = req("A", 1);
    long.group = Some("g".repeat(513));
    let e = engine.enqueue(long).await.unwrap_err();
    assert!(e.to_string().contains("513 bytes"), "{e}");
    // A group given at enqueue wins over the payload's.
    let mut given = req("A", 2);
    given.group = Some("explicit".into());
    engine.enqueue(given).await.unwrap();
    assert_eq!(
        by_key(&store, "A-2").await.group.as_deref(),
        Some("explicit")
    );
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(c.total(), 1, "nothing was written for the refused requests");
    stop.send(()).unwrap();
    handle.await.unwrap();
}

/// A worker that died on a group's head during its last attempt: the reconciler's rescue makes
/// the dead letter, and that dead letter holds the group, so `group.blocked` is raised as for a
/// failed attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_made_by_rescue_raises_group_blocked() {
    let (store, _dir) = store().await;
    let (url, got) = sink().await;
    let mut kind = ordered(OnFailure::Block);
    kind.max_attempts = 1;
    let engine = Engine::builder(store.clone())
        .handler(kind.name.clone(), handler(|_| async { Outcome::Success }))
        .kind(kind)
        .alerts(AlertOptions {
            sinks: vec![AlertSink {
                name: "ops".into(),
                url,
                format: AlertFormat::Generic,
                events: vec![AlertName::GroupBlocked],
                secret: None,
            }],
            window: Duration::from_millis(200),
            failure_rate: None,
        })
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            rescue_interval: Duration::from_millis(50),
            ..Default::default()
        })
        .build()
        .unwrap();
    engine
        .enqueue_many(vec![req("A", 0), req("A", 1)])
        .await
        .unwrap();
    // A process that is gone took the head and never finished it.
    let now = jiff::Timestamp::now();
    let claimed = store
        .claim(backstop_core::store::ClaimParams {
            kind: "order.sync".into(),
            limit: 1,
            start: 1,
            owner: "dead-host".into(),
            now,
            lease_until: now + jiff::SignedDuration::from_millis(100),
            max_attempts: 1,
            on_group_failure: OnFailure::Block,
            per_key: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    wait_until("the rescue's dead letter", async || {
        by_key(&store, "A-0").await.status == Status::Failed
    })
    .await;
    wait_until("the group.blocked alert", async || {
        !got.lock().unwrap().is_empty()
    })
    .await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let a1 = by_key(&store, "A-1").await;
    assert_eq!((a1.status, a1.parked), (Status::Pending, true));
    let text = got.lock().unwrap()[0].to_string();
    assert!(text.contains("group.blocked"), "{text}");
    assert!(text.contains("the last attempt's lease expired"), "{text}");
}

/// One busy group drains at the pace of its attempts, not of the poll: the end of each task
/// wakes the dispatcher for the next one of its group. 40 tasks of one group with the default
/// 250 ms poll interval take well under two seconds (one per poll would take ten).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_busy_group_drains_at_the_pace_of_its_attempts_not_of_the_poll() {
    let (store, _dir) = store().await;
    let engine = Engine::builder(store.clone())
        .handler("order.sync", handler(|_t| async { Outcome::Success }))
        .kind(ordered(OnFailure::Block))
        .build()
        .unwrap();
    engine
        .enqueue_many((0..40).map(|n| req("A-1", n)).collect())
        .await
        .unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    let began = Instant::now();
    wait_until("the group drains", async || {
        store
            .counts(CountsParams::default())
            .await
            .unwrap()
            .succeeded
            == 40
    })
    .await;
    let took = began.elapsed();
    let _ = stop.send(());
    let _ = run.await;
    assert!(
        took < Duration::from_secs(2),
        "40 tasks of one group took {took:?}"
    );
}
