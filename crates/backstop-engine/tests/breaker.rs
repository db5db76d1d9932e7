//! Backing off a sick downstream: a real HTTP target on loopback that goes down returns a
//! bounded number of requests (a trip, then probes), not a storm of retries; when it recovers
//! everything arrives and the alerts say so once. A host's breaker counts the failures of every
//! kind posting to it and probes it once at a time. A `Retry-After` pauses the whole kind (and its host); a
//! pause by hand, made from another engine on the same ledger, holds every task until resumed.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use backstop_core::breaker::{BreakerConfig, HostBreaker};
use backstop_core::store::{CountsParams, GetByKeyParams, ListParams, PausesParams};
use backstop_core::{KindConfig, Outcome, RetryPolicy, Store, Target};
use backstop_engine::alerts::{AlertFormat, AlertName, AlertOptions, AlertSink};
use backstop_engine::reconciler::overdue::Why;
use backstop_engine::{Engine, EngineOptions, EnqueueRequest, handler};
use backstop_store_sqlite::SqliteStore;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

async fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("t.db").display().to_string())
        .await
        .unwrap();
    (Arc::new(s), dir)
}

/// A target that answers 503 while `down`, or 429 with `Retry-After` for its first
/// `asks_to_wait` requests, and 200 otherwise; it counts requests and keeps what it accepted.
#[derive(Default)]
struct Target_ {
    down: AtomicBool,
    asks_to_wait: AtomicUsize,
    requests: AtomicU64,
    while_down: AtomicU64,
    accepted: Mutex<Vec<(String, Instant)>>,
    refused_at: Mutex<Vec<Instant>>,
    /// How long a 503 takes (ms), and when each one began and ended.
    down_answer_ms: AtomicU64,
    down_spans: Mutex<Vec<(Instant, Instant)>>,
}

async fn target() -> (String, Arc<Target_>) {
    let t = Arc::new(Target_::default());
    async fn hook(
        State(t): State<Arc<Target_>>,
        headers: HeaderMap,
        _body: Bytes,
    ) -> axum::response::Response {
        t.requests.fetch_add(1, Ordering::SeqCst);
        let key = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if t.down.load(Ordering::SeqCst) {
            t.while_down.fetch_add(1, Ordering::SeqCst);
            let began = Instant::now();
            let ms = t.down_answer_ms.load(Ordering::SeqCst);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            t.down_spans.lock().unwrap().push((began, Instant::now()));
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        let wait = t
            .asks_to_wait
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if wait.is_ok() {
            t.refused_at.lock().unwrap().push(Instant::now());
            return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response();
        }
        t.accepted.lock().unwrap().push((key, Instant::now()));
        StatusCode::OK.into_response()
    }
    let app = Router::new()
        .route("/hook", post(hook))
        .with_state(t.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, t)
}

/// A sink that records every alert it receives.
async fn sink() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let app = Router::new().route(
        "/alerts",
        post(move |body: Bytes| {
            let g = g.clone();
            async move {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                g.lock()
                    .unwrap()
                    .extend(v["alerts"].as_array().unwrap().iter().cloned());
                StatusCode::NO_CONTENT
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alerts", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, got)
}

/// Alerts of the target's health, sent to `url`.
fn target_alerts(url: String) -> AlertOptions {
    AlertOptions {
        sinks: vec![AlertSink {
            name: "ops".into(),
            url,
            format: AlertFormat::Generic,
            events: vec![AlertName::TargetUnhealthy, AlertName::TargetRecovered],
            secret: None,
        }],
        window: Duration::from_millis(100),
        failure_rate: None,
    }
}

/// Waits for the recovery alert, stops the engine, and checks that the outage raised exactly
/// one `target.unhealthy` and one `target.recovered`; returns them.
async fn one_outage_alerted(
    alerts: &Mutex<Vec<serde_json::Value>>,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<()>,
) -> Vec<serde_json::Value> {
    wait_until("the recovery alert", async || {
        alerts.lock().unwrap().len() >= 2
    })
    .await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let got = alerts.lock().unwrap().clone();
    let names: Vec<&str> = got.iter().map(|a| a["event"].as_str().unwrap()).collect();
    assert_eq!(names, ["target.unhealthy", "target.recovered"], "{got:?}");
    got
}

/// `warehouse.sync` and `warehouse.stock`, both posting to `url`, sharing its host's breaker
/// `config` and no breaker of their own; returns the host too.
fn two_kinds_on_one_host(url: &str, config: BreakerConfig) -> (String, Vec<KindConfig>) {
    let host = backstop_core::limit::host_of(url).expect("a host");
    let shared = HostBreaker {
        host: host.clone(),
        kinds: vec!["warehouse.stock".into(), "warehouse.sync".into()],
        config,
    };
    let mut first = push(url);
    first.host_breaker = Some(shared.clone());
    let mut other = push(url);
    other.name = "warehouse.stock".into();
    other.host_breaker = Some(shared);
    (host, vec![first, other])
}

fn push(url: &str) -> KindConfig {
    let mut k = KindConfig::new(
        "warehouse.sync",
        Target::HttpPush {
            url: url.into(),
            secret: None,
        },
    );
    k.max_attempts = 1000;
    k.concurrency = 4;
    k.retry = RetryPolicy::Exponential {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(100),
        jitter: 0.0,
    };
    k
}

fn options() -> EngineOptions {
    EngineOptions {
        poll_interval: Duration::from_millis(20),
        pause_watch: Duration::from_millis(50),
        ..Default::default()
    }
}

type Running = (
    Engine,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

fn run(store: &Arc<dyn Store>, kind: KindConfig, alerts: Option<AlertOptions>) -> Running {
    run_kinds(store, vec![kind], alerts)
}

/// An engine running `kinds` on `store` until its sender is used.
fn run_kinds(
    store: &Arc<dyn Store>,
    kinds: Vec<KindConfig>,
    alerts: Option<AlertOptions>,
) -> Running {
    let mut b = Engine::builder(store.clone()).options(options());
    for kind in kinds {
        b = b.kind(kind);
    }
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

fn req(kind: &str, n: usize) -> EnqueueRequest {
    EnqueueRequest {
        kind: kind.into(),
        key: format!("k-{n}"),
        payload: format!(r#"{{"n": {n}}}"#).into_bytes(),
        ..Default::default()
    }
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn succeeded(store: &Arc<dyn Store>, kind: &str) -> u64 {
    let c = store
        .counts(CountsParams {
            kind: Some(kind.into()),
        })
        .await
        .unwrap();
    c.succeeded
}

/// The half-hour outage, compressed to three seconds: 200 tasks while the target answers
/// 503. Without the breaker each task would retry every 20–100 ms (thousands of requests);
/// with it the target sees the failures that trip it, the attempts already under way, and one
/// probe per cool-down (200 ms doubling to 1.6 s: five or so in three seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_down_for_a_while_gets_a_bounded_number_of_probes_and_everything_arrives() {
    let (store, _dir) = store().await;
    let (url, t) = target().await;
    let (alerts_url, alerts) = sink().await;
    let mut kind = push(&url);
    let mut b = BreakerConfig::new(5, Duration::from_millis(200));
    b.max_cool_down = Duration::from_millis(1600);
    kind.breaker = Some(b);
    t.down.store(true, Ordering::SeqCst);
    let sinks = target_alerts(alerts_url);
    let (engine, stop, handle) = run(&store, kind, Some(sinks));
    engine
        .enqueue_many((0..200).map(|n| req("warehouse.sync", n)).collect())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = t.while_down.load(Ordering::SeqCst);
    let view = engine.kind_pause("warehouse.sync").await.unwrap();
    t.down.store(false, Ordering::SeqCst);
    eprintln!("the target saw {during} requests in 3 s down");
    // 5 failures trip it; up to 4 more were running or handed off; one probe per cool-down.
    assert!(
        (5..=30).contains(&during),
        "the target saw {during} requests while down"
    );
    assert!(
        view.history
            .iter()
            .any(|h| h.cause == "breaker" && h.action == "pause"),
        "{view:?}"
    );
    wait_until("every task delivered", async || {
        succeeded(&store, "warehouse.sync").await == 200
    })
    .await;
    // Paused work spent no attempts: only the tasks the target refused were tried twice.
    let tasks = store
        .list(ListParams {
            kind: Some("warehouse.sync".into()),
            limit: 500,
            ..Default::default()
        })
        .await
        .unwrap();
    let spent: u64 = tasks.iter().map(|t| t.attempts as u64).sum();
    assert_eq!(spent, 200 + during, "one attempt per request");
    let keys: HashSet<String> = t
        .accepted
        .lock()
        .unwrap()
        .iter()
        .map(|a| a.0.clone())
        .collect();
    assert_eq!(keys.len(), 200);
    let got = one_outage_alerted(&alerts, stop, handle).await;
    assert_eq!(got[0]["count"], 1, "one alert for the outage: {got:?}");
    let after = engine.kind_pause("warehouse.sync").await.unwrap();
    assert_eq!(after.state, "open");
    assert!(after.pauses.is_empty(), "{after:?}");
    assert_eq!(after.history[0].action, "resume");
    assert_eq!(after.history[0].reason, "a probe succeeded");
}

/// A breaker of the target host: two kinds post to one host that goes down. Neither has a breaker
/// of its own; their failures are counted together, the trip pauses both, and the host gets one
/// probe at a time across them (each 503 takes 40 ms, so two probes sent together would
/// overlap). When it recovers, both kinds deliver everything and the alerts say so once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_breaker_counts_every_kind_on_the_host_and_probes_it_once_at_a_time() {
    let (store, _dir) = store().await;
    let (url, t) = target().await;
    let (alerts_url, alerts) = sink().await;
    let mut config = BreakerConfig::new(6, Duration::from_millis(200));
    config.max_cool_down = Duration::from_millis(800);
    let (host, kinds) = two_kinds_on_one_host(&url, config);
    t.down.store(true, Ordering::SeqCst);
    t.down_answer_ms.store(40, Ordering::SeqCst);
    let sinks = target_alerts(alerts_url);
    let (engine, stop, handle) = run_kinds(&store, kinds, Some(sinks));
    engine
        .enqueue_many(
            (0..100)
                .map(|n| req("warehouse.sync", n))
                .chain((100..200).map(|n| req("warehouse.stock", n)))
                .collect(),
        )
        .await
        .unwrap();
    let scope = format!("host:{host}");
    wait_until("the host's breaker pause", async || {
        let rows = store.pauses(PausesParams::default()).await.unwrap();
        rows.iter()
            .any(|r| r.scope == scope && r.cause.as_str() == "breaker")
    })
    .await;
    let tripped = Instant::now();
    for kind in ["warehouse.sync", "warehouse.stock"] {
        let v = engine.kind_pause(kind).await.unwrap();
        assert_eq!(v.state, "paused", "{v:?}");
        assert!(
            v.reason
                .as_deref()
                .is_some_and(|r| r.contains(&format!("at host {host}"))),
            "{v:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = t.while_down.load(Ordering::SeqCst);
    t.down.store(false, Ordering::SeqCst);
    eprintln!("the host saw {during} requests in its outage");
    // 6 failures trip it, up to 8 more were running; then one probe per cool-down (200, 400,
    // 800, 800 … ms: about five in three seconds). Without a shared count neither kind would
    // trip: each retries every 20–100 ms, thousands of requests.
    assert!(
        (6..=40).contains(&during),
        "the host saw {during} requests while down"
    );
    // Once what was running when it tripped had ended, the host never had two requests at once.
    let spans = t.down_spans.lock().unwrap().clone();
    let probes: Vec<_> = spans
        .iter()
        .filter(|s| s.0 > tripped + Duration::from_millis(150))
        .collect();
    assert!(!probes.is_empty(), "no probe was sent: {spans:?}");
    for a in &probes {
        let overlapping = probes.iter().filter(|b| b.0 < a.1 && a.0 < b.1).count();
        assert_eq!(overlapping, 1, "two probes at once: {probes:?}");
    }
    wait_until("every task of both kinds delivered", async || {
        succeeded(&store, "warehouse.sync").await == 100
            && succeeded(&store, "warehouse.stock").await == 100
    })
    .await;
    one_outage_alerted(&alerts, stop, handle).await;
    let rows = store.pauses(PausesParams::default()).await.unwrap();
    assert!(rows.is_empty(), "the breaker closed: {rows:?}");
}

/// A 429 with `Retry-After: 1` pauses the whole kind for a second, not only the task that
/// got it: tasks enqueued meanwhile wait too, and then all arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_pauses_the_whole_kind() {
    let (store, _dir) = store().await;
    let (url, t) = target().await;
    t.asks_to_wait.store(1, Ordering::SeqCst);
    let mut kind = push(&url);
    // A Retry-After is honoured up to the retry cap.
    kind.retry = RetryPolicy::Exponential {
        base: Duration::from_millis(20),
        cap: Duration::from_secs(5),
        jitter: 0.0,
    };
    let (engine, stop, handle) = run(&store, kind, None);
    engine
        .enqueue_many(vec![req("warehouse.sync", 0)])
        .await
        .unwrap();
    wait_until("the 429", async || !t.refused_at.lock().unwrap().is_empty()).await;
    let refused = t.refused_at.lock().unwrap()[0];
    engine
        .enqueue_many((1..20).map(|n| req("warehouse.sync", n)).collect())
        .await
        .unwrap();
    wait_until("every task delivered", async || {
        succeeded(&store, "warehouse.sync").await == 20
    })
    .await;
    let accepted = t.accepted.lock().unwrap().clone();
    let first = accepted.iter().map(|a| a.1).min().unwrap();
    assert!(
        first.duration_since(refused) >= Duration::from_millis(900),
        "the first delivery came {:?} after the 429",
        first.duration_since(refused)
    );
    assert_eq!(
        t.requests.load(Ordering::SeqCst),
        21,
        "one refusal, then each task once"
    );
    let k0 = store
        .get_by_key(GetByKeyParams {
            kind: "warehouse.sync".into(),
            key: "k-0".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(k0.attempts, 2);
    stop.send(()).unwrap();
    handle.await.unwrap();
}

/// A 429 with `Retry-After: 1` pauses the whole target host: another kind posting to the same
/// host sends nothing for that second either, and then everything arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_pauses_every_kind_on_the_host() {
    let (store, _dir) = store().await;
    let (url, t) = target().await;
    t.asks_to_wait.store(1, Ordering::SeqCst);
    let mut first = push(&url);
    first.retry = RetryPolicy::Exponential {
        base: Duration::from_millis(20),
        cap: Duration::from_secs(5),
        jitter: 0.0,
    };
    let mut other = push(&url);
    other.name = "warehouse.stock".into();
    let (engine, stop, handle) = run_kinds(&store, vec![first, other], None);
    engine
        .enqueue_many(vec![req("warehouse.sync", 0)])
        .await
        .unwrap();
    wait_until("the 429", async || !t.refused_at.lock().unwrap().is_empty()).await;
    let refused = t.refused_at.lock().unwrap()[0];
    // The pause is written beside the attempt: kept under the host, not the kind.
    wait_until("the host's pause row", async || {
        let rows = store.pauses(PausesParams::default()).await.unwrap();
        rows.iter().any(|r| r.scope.starts_with("host:127.0.0.1:"))
    })
    .await;
    let view = engine.kind_pause("warehouse.stock").await.unwrap();
    assert_eq!(view.state, "paused", "{view:?}");
    assert!(
        view.reason
            .as_deref()
            .is_some_and(|r| r.contains("Retry-After: 1s from host 127.0.0.1:")),
        "{view:?}"
    );
    engine
        .enqueue_many((1..11).map(|n| req("warehouse.stock", n)).collect())
        .await
        .unwrap();
    wait_until("every task delivered", async || {
        succeeded(&store, "warehouse.sync").await == 1
            && succeeded(&store, "warehouse.stock").await == 10
    })
    .await;
    let accepted = t.accepted.lock().unwrap().clone();
    let first = accepted.iter().map(|a| a.1).min().unwrap();
    assert!(
        first.duration_since(refused) >= Duration::from_millis(900),
        "the other kind's first delivery came {:?} after the host's 429",
        first.duration_since(refused)
    );
    stop.send(()).unwrap();
    handle.await.unwrap();
}

/// A pause made by hand from another engine on the same ledger (as `backstop kinds pause`
/// is) stops the running one within its watch interval: nothing starts, nothing is spent.
/// The resume lets everything run, and the history says who did what and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_by_hand_from_another_process_holds_every_task_until_resumed() {
    let (store, _dir) = store().await;
    let ran = Arc::new(AtomicU64::new(0));
    let r = ran.clone();
    let h = handler(move |_ctx| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            Outcome::Success
        }
    });
    let kind = KindConfig::new("report.build", Target::InProcess);
    let other = Engine::builder(store.clone())
        .kind(kind.clone())
        .handler("report.build", h.clone())
        .build()
        .unwrap();
    let e = Engine::builder(store.clone())
        .kind(kind)
        .handler("report.build", h)
        .options(EngineOptions {
            node_beat: Duration::from_millis(100),
            overdue_after: Duration::from_millis(100),
            ..options()
        })
        .build()
        .unwrap();
    let engine = e.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        e.run(async {
            let _ = rx.await;
        })
        .await
    });
    let refused = other.pause_kind("report.build", "  ", "ops").await;
    assert!(refused.is_err(), "a pause needs a reason");
    let v = other
        .pause_kind("report.build", "warehouse maintenance", "ops")
        .await
        .unwrap();
    assert_eq!((v.state, v.cause), ("paused", Some("manual")));
    // The running engine reads the pause within its watch interval (50 ms).
    tokio::time::sleep(Duration::from_millis(200)).await;
    engine
        .enqueue_many((0..10).map(|n| req("report.build", n)).collect())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "nothing started while paused"
    );
    let c = store
        .counts(CountsParams {
            kind: Some("report.build".into()),
        })
        .await
        .unwrap();
    assert_eq!(c.pending, 10);
    // The reconciler says why the work is overdue: the kind is paused, not short of slots.
    let pass = engine.reconcile_once().await;
    let overdue = pass
        .overdue
        .iter()
        .find(|o| o.kind == "report.build")
        .expect("overdue");
    assert_eq!(overdue.why, Why::Paused, "{pass:?}");
    other
        .resume_kind("report.build", "maintenance over", "ops")
        .await
        .unwrap();
    wait_until("every task ran", async || {
        succeeded(&store, "report.build").await == 10
    })
    .await;
    assert_eq!(ran.load(Ordering::SeqCst), 10);
    let v = engine.kind_pause("report.build").await.unwrap();
    assert_eq!(v.state, "open");
    let h: Vec<(&str, &str, &str)> = v
        .history
        .iter()
        .map(|e| (e.action, e.reason.as_str(), e.by.as_str()))
        .collect();
    assert_eq!(
        h,
        [
            ("resume", "maintenance over", "ops"),
            ("pause", "warehouse maintenance", "ops")
        ]
    );
    stop.send(()).unwrap();
    handle.await.unwrap();
}

/// A person resuming one kind of a host whose breaker tripped says the target is back: the
/// host's breaker pause goes (for every kind on it), long before its cool-down would end, and
/// the history of the host keeps who did it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_kind_by_hand_clears_its_hosts_breaker() {
    let (store, _dir) = store().await;
    let (url, t) = target().await;
    let (host, kinds) = two_kinds_on_one_host(&url, BreakerConfig::new(3, Duration::from_secs(60)));
    t.down.store(true, Ordering::SeqCst);
    let (engine, stop, handle) = run_kinds(&store, kinds, None);
    engine
        .enqueue_many((0..10).map(|n| req("warehouse.sync", n)).collect())
        .await
        .unwrap();
    wait_until("the host's breaker pause", async || {
        let v = engine.kind_pause("warehouse.stock").await.unwrap();
        v.state == "paused" && v.cause == Some("breaker")
    })
    .await;
    t.down.store(false, Ordering::SeqCst);
    let v = engine
        .resume_kind("warehouse.stock", "the warehouse is back", "ops")
        .await
        .unwrap();
    assert_eq!(v.state, "open", "{v:?}");
    wait_until(
        "every task delivered well within the cool-down",
        async || succeeded(&store, "warehouse.sync").await == 10,
    )
    .await;
    let rows = store.pauses(PausesParams::default()).await.unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    let h = store
        .pause_history(backstop_core::store::PauseHistoryParams {
            scope: format!("host:{host}"),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(h[0].action.as_str(), "resume", "{h:?}");
    assert_eq!(
        (h[0].reason.as_str(), h[0].by.as_str()),
        ("the warehouse is back (by resuming warehouse.stock)", "ops")
    );
    stop.send(()).unwrap();
    handle.await.unwrap();
}
