//! Concurrency limits per key, end to end: two engines on one ledger deliver to a real HTTP
//! target on loopback that holds each request a while and counts what it has in flight per
//! tenant; at most `max` of a tenant's tasks are ever in flight, every task arrives, and the
//! ledger's own attempt intervals agree. An enqueue whose payload lacks the key is refused
//! (or shares one key, as the kind says).

mod cut;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use backstop_core::limit::{ConcurrencyLimit, MissingKey};
use backstop_core::store::{CountsParams, ListParams, TimelineParams};
use backstop_core::{EventType, KindConfig, Store, Target};
use backstop_engine::{Engine, EngineOptions, EnqueueError, EnqueueRequest};
use backstop_store_sqlite::SqliteStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KIND: &str = "tenant.sync";
const MAX: usize = 2;

/// In flight per tenant now, and the most ever seen.
#[derive(Default)]
struct Flights {
    now: HashMap<String, usize>,
    most: HashMap<String, usize>,
    delivered: usize,
}

async fn target() -> (String, Arc<Mutex<Flights>>) {
    let f = Arc::new(Mutex::new(Flights::default()));
    async fn hook(State(f): State<Arc<Mutex<Flights>>>, body: Bytes) -> StatusCode {
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let tenant = v["tenant"].as_str().unwrap_or("").to_string();
        {
            let mut f = f.lock().unwrap();
            let n = f.now.entry(tenant.clone()).or_default();
            *n += 1;
            let n = *n;
            let most = f.most.entry(tenant.clone()).or_default();
            *most = (*most).max(n);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut f = f.lock().unwrap();
        *f.now.get_mut(&tenant).unwrap() -= 1;
        f.delivered += 1;
        StatusCode::OK
    }
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(f.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, f)
}

fn kind(url: &str, missing_key: MissingKey) -> KindConfig {
    let mut k = KindConfig::new(
        KIND,
        Target::HttpPush {
            url: url.into(),
            secret: None,
        },
    );
    k.concurrency = 16;
    k.concurrency_limit = Some(ConcurrencyLimit {
        key: "/tenant".into(),
        max: MAX as u32,
        missing_key,
    });
    k
}

fn engine(store: &Arc<dyn Store>, kind: KindConfig) -> (Engine, tokio::sync::oneshot::Sender<()>) {
    let engine = Engine::builder(store.clone())
        .kind(kind)
        .options(EngineOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        })
        .build()
        .unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    (engine, stop)
}

fn req(n: usize, payload: String) -> EnqueueRequest {
    EnqueueRequest {
        kind: KIND.into(),
        key: format!("k-{n}"),
        payload: payload.into_bytes(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_never_run_more_than_max_of_a_tenant_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let (url, flights) = target().await;
    // Three busy tenants and a quiet one, enqueued busy ones first.
    let mut reqs = Vec::new();
    for n in 0..60 {
        let tenant = ["a", "b", "c"][n % 3];
        reqs.push(req(n, format!(r#"{{"tenant":"{tenant}","n":{n}}}"#)));
    }
    for n in 60..64 {
        reqs.push(req(n, format!(r#"{{"tenant":"quiet","n":{n}}}"#)));
    }
    let total = reqs.len();
    let (first, stop1) = engine(&store, kind(&url, MissingKey::Reject));
    first.enqueue_many(reqs).await.unwrap();
    let (_second, stop2) = engine(&store, kind(&url, MissingKey::Reject));
    let began = Instant::now();
    loop {
        if flights.lock().unwrap().delivered >= total {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "every task arrives"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = (stop1.send(()), stop2.send(()));
    {
        let f = flights.lock().unwrap();
        for tenant in ["a", "b", "c", "quiet"] {
            let most = f.most[tenant];
            assert!(most <= MAX, "{tenant}: {most} in flight at once");
        }
        assert!(
            ["a", "b", "c"].iter().any(|t| f.most[*t] == MAX),
            "the limit was reached, so it was what held them: {:?}",
            f.most
        );
    }

    // The ledger agrees: per tenant, no instant is inside more than MAX attempts.
    let tasks = store
        .list(ListParams {
            kind: Some(KIND.into()),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tasks.len(), total);
    let mut edges: HashMap<String, Vec<(i64, i32)>> = HashMap::new();
    for t in &tasks {
        let v: serde_json::Value = serde_json::from_slice(&t.payload).unwrap_or_default();
        let tenant = v["tenant"].as_str().unwrap_or("").to_string();
        for e in store
            .timeline(TimelineParams { id: t.id })
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == EventType::Attempt)
        {
            let end = e.at.as_millisecond();
            let start = end - e.duration_ms.unwrap_or(0) as i64;
            // Ends sort before starts at the same millisecond: the next attempt of the key
            // starts only after the previous end was written.
            edges
                .entry(tenant.clone())
                .or_default()
                .extend([(start, 1), (end, -1)]);
        }
    }
    for (tenant, mut e) in edges {
        e.sort();
        let (mut n, mut most) = (0, 0);
        for (_, d) in e {
            n += d;
            most = most.max(n);
        }
        assert!(
            most as usize <= MAX,
            "{tenant}: the ledger shows {most} attempts at once"
        );
    }
    let c = store
        .counts(CountsParams {
            kind: Some(KIND.into()),
        })
        .await
        .unwrap();
    assert_eq!(c.succeeded as usize, total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_without_the_key_is_refused_or_shared_as_the_kind_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let reject = Engine::builder(store.clone())
        .kind(kind("http://127.0.0.1:9/", MissingKey::Reject))
        .build()
        .unwrap();
    let e = reject
        .enqueue(req(1, r#"{"n":1}"#.into()))
        .await
        .unwrap_err();
    assert!(matches!(e, EnqueueError::LimitKey(_)), "{e:?}");
    assert!(e.to_string().contains("/tenant is missing"), "{e}");
    let e = reject
        .enqueue(req(2, r#"{"tenant":{"id":1}}"#.into()))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("/tenant is an object"), "{e}");
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(c.total(), 0, "a refused enqueue writes nothing");

    let shared = Engine::builder(store.clone())
        .kind(kind("http://127.0.0.1:9/", MissingKey::Shared))
        .build()
        .unwrap();
    shared.enqueue(req(3, r#"{"n":3}"#.into())).await.unwrap();
    let c = store.counts(CountsParams::default()).await.unwrap();
    assert_eq!(c.pending, 1);
}

/// A task from a source that is not the API (here a schedule's tick) whose payload lacks the
/// key becomes a dead letter saying why, rather than running outside its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_without_the_key_becomes_a_dead_letter_naming_the_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let def =
        serde_json::json!({"kind": KIND, "cron": "0 0 1 1 *", "payload": {"report": "daily"}});
    let schedule = serde_json::from_value::<backstop_core::schedule::ScheduleDef>(def)
        .unwrap()
        .build("nightly", |k| k == KIND)
        .unwrap();
    let engine = Engine::builder(store.clone())
        .kind(kind("http://127.0.0.1:9/", MissingKey::Reject))
        .schedule(schedule)
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
    let deadline = Instant::now() + Duration::from_secs(20);
    let triggered = loop {
        match engine.trigger_schedule("nightly", "test").await {
            Ok(t) => break t,
            Err(e) => {
                assert!(Instant::now() < deadline, "trigger: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let _ = stop.send(());
    run.await.unwrap();
    let t = store
        .get(backstop_core::store::GetParams { id: triggered.id })
        .await
        .unwrap()
        .expect("the tick's task");
    assert_eq!(t.status, backstop_core::Status::Failed, "{t:?}");
    assert_eq!(t.attempts, 0);
    let reason = t.reason.unwrap_or_default();
    assert!(
        reason.contains("limit key: the payload's /tenant is missing"),
        "{reason}"
    );
}

/// A rate limit per key, end to end on SQLite with the default poll interval: 40 tasks of one
/// tenant at 20 a second, one at a time, arrive spaced by the rate (no second holds more than
/// 21) and at the rate (all within about two seconds, where a look only every 250 ms poll
/// would start four a second and take ten).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_tenant_is_delivered_at_its_rate_not_faster_not_slower() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    async fn hook(State(a): State<Arc<Mutex<Vec<Instant>>>>) -> StatusCode {
        a.lock().unwrap().push(Instant::now());
        StatusCode::OK
    }
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(arrivals.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let mut k = KindConfig::new(KIND, Target::HttpPush { url, secret: None });
    k.rate_limit = Some(backstop_core::limit::RateLimit {
        key: "/tenant".into(),
        limit: 20,
        period: Duration::from_secs(1),
        burst: 1,
        missing_key: MissingKey::Reject,
    });
    let engine = Engine::builder(store.clone()).kind(k).build().unwrap();
    let reqs = (0..40)
        .map(|n| req(n, r#"{"tenant":"acme"}"#.to_string()))
        .collect();
    engine.enqueue_many(reqs).await.unwrap();
    let e = engine.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    let began = Instant::now();
    while arrivals.lock().unwrap().len() < 40 {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "every task arrives"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = began.elapsed();
    let _ = stop.send(());
    let _ = run.await;
    let a = arrivals.lock().unwrap().clone();
    let busiest = (0..a.len())
        .map(|i| {
            a[i..]
                .iter()
                .take_while(|t| **t - a[i] <= Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap();
    assert!(
        busiest <= 21,
        "{busiest} starts in one second at 20 a second"
    );
    assert!(
        took < Duration::from_secs(5),
        "40 starts at 20 a second took {took:?}"
    );
    let c = store
        .counts(CountsParams {
            kind: Some(KIND.into()),
        })
        .await
        .unwrap();
    assert_eq!(c.succeeded, 40);
}

/// Delivers 200 tasks of 10 tenants through `store` (attempts of 30 ms, 16 slots, 2 per
/// tenant); returns the slots asked for in outcome writes and the claims made on their own,
/// and how long the drain took.
async fn drain_limited(store: Arc<cut::Cut>) -> (usize, usize, Duration) {
    let as_store: Arc<dyn Store> = store.clone();
    let (url, flights) = target().await;
    let (engine, stop) = engine(&as_store, kind(&url, MissingKey::Reject));
    let tasks = 200;
    let began = Instant::now();
    engine
        .enqueue_many(
            (0..tasks)
                .map(|n| req(n, format!(r#"{{"tenant":"t{}"}}"#, n % 10)))
                .collect(),
        )
        .await
        .unwrap();
    for _ in 0..1500 {
        if flights.lock().unwrap().delivered == tasks {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = began.elapsed();
    stop.send(()).unwrap();
    let f = flights.lock().unwrap();
    assert_eq!(f.delivered, tasks);
    assert!(f.most.values().all(|m| *m <= MAX), "{:?}", f.most);
    let riding: usize = store.writes().iter().map(|w| w.claims).sum();
    let alone = store.claims();
    eprintln!("{riding} slots asked for in outcome writes, {alone} claims of their own, {took:?}");
    (riding, alone, took)
}

/// On SQLite, whose one writer commits every claim of its own, a limited kind's freed slots
/// are refilled by claims made in the writes of the outcomes that freed them: few claims of
/// their own, every task delivered within the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_kinds_slots_are_refilled_in_the_writes_of_their_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let inner: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let (riding, alone, _) = drain_limited(cut::Cut::new(inner)).await;
    // 16 slots, 200 attempts of 30 ms: nearly every slot is refilled by the write of the
    // outcome that freed it; a claim of its own is made only for a slot that write left empty
    // (a tenant full, the backlog's tail).
    assert!(
        riding >= 100 && alone <= 50,
        "{riding} slots asked for in outcome writes, {alone} claims of their own"
    );
}

/// Where claims do not ride completions (a server store), each freed slot wakes the kind's
/// dispatcher once its outcome is written: the drain takes about what the attempts take.
/// Before the fix, a first claim that filled every slot left the dispatcher waiting for a
/// quarter of its room to free with nothing to bring it back: 16 of 200 were delivered, and
/// nothing more in 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_riding_a_freed_slot_wakes_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").display().to_string();
    let inner: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let store = cut::Cut::new(inner);
    store.without_riding();
    let (riding, _, took) = drain_limited(store).await;
    assert_eq!(riding, 0);
    assert!(took < Duration::from_secs(10), "the drain took {took:?}");
}
